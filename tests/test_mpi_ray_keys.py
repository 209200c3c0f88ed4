"""Open MPI's, MPICH's and Ray's versions as version keys (`openmpi`, `mpich`, `ray`): typed in a query,
bounded in an entry's `affects`, read from a paste or the installed packages; unknown is "cannot tell"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgpu_doctor.child_scripts import _package_facts
from mgpu_doctor.cli import main
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.matrix.environment import BadEnvironment, environment_from_mapping, parse_query
from mgpu_doctor.matrix.known_issues import KnownIssue, load_known_issue_files
from mgpu_doctor.matrix.match import Verdict, assess
from mgpu_doctor.pasted.split import snapshot_from_paste

ENTRY = '''schema_version = 1

[[issue]]
id = "team-mpi-ray-bound"
title = "All-reduce stalls with one MPI library's releases under Ray"
symptom = "hang"
confidence = "reported"
summary = "Seen with TensorFlow 2.9.1, Open MPI 4.1.3, MPICH 4.0 and Ray 2.9.0."
workaround = "None posted."
affects = {{ tensorflow = "==2.9.1", {key} = "{spec}" }}

[[issue.sources]]
url = "https://example.org/our-tracker/7"
kind = "issue"
'''
CASES = [("openmpi", ">=4.1.0,<=4.1.3", "4.1.3", "4.0.5"), ("mpich", "==4.0.*", "4.0.2", "3.4.3"),
         ("ray", ">=2.9.0,<=2.9.3", "2.9.0", "2.5.1")]


def entry(tmp_path: Path, key: str, spec: str) -> KnownIssue:
    path = tmp_path / "known-issues" / "team.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(ENTRY.format(key=key, spec=spec))
    loaded = load_known_issue_files([path])
    assert not loaded.problems, [str(p) for p in loaded.problems]
    [issue] = loaded.issues
    return issue


@pytest.mark.parametrize(("key", "spec", "inside", "outside"), CASES)
def test_an_entry_bounds_the_key_and_an_unknown_version_is_cannot_tell(tmp_path, key, spec, inside, outside):
    issue = entry(tmp_path, key, spec)
    assert assess(issue, environment_from_mapping({"tensorflow": "2.9.1", key: inside})).verdict is Verdict.MATCHES
    assert assess(issue, environment_from_mapping({"tensorflow": "2.9.1", key: outside})).verdict \
        is Verdict.NO_MATCH
    assert assess(issue, environment_from_mapping({"tensorflow": "2.9.1"})).verdict is Verdict.CANNOT_TELL


@pytest.mark.parametrize(("key", "spec", "inside", "outside"), CASES)
def test_matrix_query_takes_the_key_and_shows_it_as_named(tmp_path, capsys, key, spec, inside, outside):
    entry(tmp_path, key, spec)
    codes = {}
    for version in (inside, outside, None):
        terms = ["tensorflow==2.9.1"] + ([f"{key}=={version}"] if version else [])
        main(["matrix", "query", *terms, "--matrix", str(tmp_path), "--format", "json", "-v"])
        report = json.loads(capsys.readouterr().out)
        found = [f for c in report["checks"] for f in c["findings"] if f["code"] == "known-issue.team-mpi-ray-bound"]
        codes[version] = found[0]["severity"] if found else None
    assert codes == {inside: "warning", outside: None, None: "info"}
    main(["matrix", "query", "tensorflow==2.9.1", f"{key}=={inside}", "--matrix", str(tmp_path)])
    assert f"matrix query: tensorflow==2.9.1 {key}=={inside}" in capsys.readouterr().out


def test_mpi_names_its_library_or_is_refused_with_the_two_keys(capsys):
    assert parse_query(["mpi=openmpi-4.1.5"])[0].versions == {"openmpi": "4.1.5"}
    assert parse_query(["mpi==MPICH-4.1"])[0].versions == {"mpich": "4.1"}
    with pytest.raises(BadEnvironment, match="openmpi==VERSION or mpich==VERSION"):
        parse_query(["mpi=4.1.5"])
    with pytest.raises(BadEnvironment, match="expected KEY==VERSION"):
        parse_query(["mpi"])
    assert main(["matrix", "query", "mpi=4.1.5"]) == 2
    err = capsys.readouterr().err
    assert "openmpi==VERSION or mpich==VERSION" in err and len(err.strip().splitlines()) == 1


HOROVOD_TEMPLATE = """**Environment:**
1. Framework: TensorFlow
2. Framework version: 2.9.1
3. Horovod version: 0.25.0
4. MPI version: {mpi}
5. CUDA version: 11.2
6. NCCL version: 2.10.3
7. Python version: 3.8.10
8. Spark / PySpark version: NA
9. Ray version: 2.9.0
"""


@pytest.mark.parametrize(("mpi", "key"), [("mpirun (Open MPI) 4.1.3", "openmpi"), ("MPICH 4.0.2", "mpich"),
                                          ("4.1.3", "mpi")])
def test_the_horovod_template_s_mpi_and_ray_versions_are_read_as_their_keys(mpi, key):
    snapshot = snapshot_from_paste(HOROVOD_TEMPLATE.format(mpi=mpi), "paste.md")
    assert snapshot.pasted is not None
    versions = {k: v.text for k, v in snapshot.pasted.versions.items()}
    assert versions["ray"] == "2.9.0" and versions[key] == mpi.split()[-1]
    resolved = resolve(snapshot).versions()
    assert resolved["ray"].text == "2.9.0"
    # a bare number says neither library: both stay unknown ("cannot tell"), never compared
    assert [k for k in ("openmpi", "mpich") if resolved[k].known] == ([key] if key != "mpi" else [])


def test_an_installed_ray_is_read_from_the_packages_and_mpi_never_from_a_machine():
    assert _package_facts.wanted("ray")
    snapshot = snapshot_from_paste("Package    Version\n---------- -------\nray        2.9.0\n"
                                   "tensorflow 2.9.1\n", "pip-list.md")
    resolved = resolve(snapshot).versions()
    assert resolved["ray"].text == "2.9.0"
    assert not resolved["openmpi"].known and "not read on a machine" in str(resolved["openmpi"].missing)


@pytest.mark.parametrize(("text", "key", "version"), [
    ("I run TensorFlow 2.1.0 with Horovod 0.19.4 and OpenMPI 4.0.3 on two nodes.", "openmpi", "4.0.3"),
    ("TensorFlow 2.9.1 and Horovod 0.25.0 with MPICH 3.4.2 on the cluster.", "mpich", "3.4.2"),
])
def test_an_mpi_library_named_in_a_sentence_is_its_key(text, key, version):
    snapshot = snapshot_from_paste(text, "prose.md")
    assert snapshot.pasted is not None and snapshot.pasted.versions[key].text == version
    assert "mpi" not in snapshot.pasted.versions
