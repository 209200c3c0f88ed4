"""An entry whose `affects` is a list of tables: one mechanism reported under TensorFlow's versions
by one thread and under NCCL's by another. It matches where one alternative matches, is ruled out
only where every one is, and an alternative whose versions are not known is "cannot tell"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.matrix import index as matrix_index
from mgpu_doctor.matrix.coverage import coverage
from mgpu_doctor.matrix.environment import environment_from_mapping
from mgpu_doctor.matrix.known_issue_findings import known_issue_findings
from mgpu_doctor.matrix.known_issues import KnownIssue, load_known_issue_files
from mgpu_doctor.matrix.match import Verdict, assess
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.review import reviews
from mgpu_doctor.process.cache_home import CACHE_ENV

ALTERNATIVES = '''
[[issue]]
id = "p2p-through-the-iommu"
title = "All-reduce hangs where the IOMMU redirects peer-to-peer traffic"
symptom = "hang"
confidence = "reported"
summary = "Seen with TensorFlow 2.3.1 (one thread) and with NCCL 2.8.2 and 2.10.x (another)."
workaround = "From #1 (the reporter's fix): turn the IOMMU off."
conditions = {{ min_gpus = 2 }}

{affects}

[[issue.sources]]
url = "https://github.com/tensorflow/tensorflow/issues/1"
kind = "issue"
'''
TWO = '''[[issue.affects]]
tensorflow = "==2.3.1"

[[issue.affects]]
nccl = ["==2.8.2", "==2.10.*"]
'''


def entries(tmp_path: Path, affects: str = TWO) -> tuple[list[KnownIssue], list[str]]:
    path = tmp_path / "known-issues" / "p2p.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("schema_version = 1\n" + ALTERNATIVES.format(affects=affects))
    loaded = load_known_issue_files([path])
    return loaded.issues, [str(p) for p in loaded.problems]


def verdict(issue: KnownIssue, **env: object) -> Verdict:
    return assess(issue, environment_from_mapping({"gpus": 2, **env})).verdict


def test_one_alternative_matching_is_the_entry_matching(tmp_path) -> None:
    [issue], problems = entries(tmp_path)
    assert problems == [] and len(issue.views()) == 2
    # TensorFlow's alternative alone, NCCL's alone, and TensorFlow's while NCCL's is ruled out
    assert verdict(issue, tensorflow="2.3.1") is Verdict.MATCHES
    assert verdict(issue, nccl="2.10.3") is Verdict.MATCHES
    assert verdict(issue, tensorflow="2.3.1", nccl="2.4.8") is Verdict.MATCHES
    a = assess(issue, environment_from_mapping({"gpus": 2, "tensorflow": "2.2.0", "nccl": "2.8.2"}))
    assert a.verdict is Verdict.MATCHES and any("nccl 2.8.2 is in" in line for line in a.agrees)


def test_the_entry_is_ruled_out_only_when_every_alternative_is(tmp_path) -> None:
    [issue], _ = entries(tmp_path)
    a = assess(issue, environment_from_mapping({"gpus": 2, "tensorflow": "2.2.0", "nccl": "2.4.8"}))
    assert a.verdict is Verdict.NO_MATCH
    assert [line.split(" is not in")[0] for line in a.disagrees] == ["tensorflow 2.2.0", "nccl 2.4.8"]
    assert verdict(issue, tensorflow="2.3.1", gpus=1) is Verdict.NO_MATCH  # the shared conditions


def test_an_alternative_whose_version_is_not_given_is_cannot_tell_never_dropped(tmp_path) -> None:
    [issue], _ = entries(tmp_path)
    # TensorFlow's alternative is ruled out, NCCL's cannot be told without an NCCL version
    a = assess(issue, environment_from_mapping({"gpus": 2, "tensorflow": "2.2.0"}))
    assert a.verdict is Verdict.CANNOT_TELL and a.unknown == ("nccl ==2.8.2 || ==2.10.*: not known",)
    # NCCL between its two reports: cannot tell, and said so (a version of it is known)
    found = known_issue_findings([issue], environment_from_mapping({"gpus": 2, "tensorflow": "2.2.0",
                                                                    "nccl": "2.9.6"}))
    [finding] = found
    assert finding.title.startswith("Cannot tell")
    assert "not known: nccl 2.9.6: reported on 2.8.2 and 2.10.x, not on this series" in finding.evidence


@pytest.mark.parametrize(("affects", "field", "says"), [
    ('[[issue.affects]]\ntensorflow = "==2.3.1"\n', "affects", "two or more alternative tables"),
    (TWO + '\n[[issue.affects]]\n', "affects[2]", "at least one version range"),
    (TWO + '\n[[issue.affects]]\ntensorflow = "==2.3.1"\n', "affects[2]", "the same ranges as affects[0]"),
    (TWO.replace('"==2.3.1"', '"==2.3"'), "affects[0].tensorflow", "admits 2.3.0 only"),
    (TWO.replace('"==2.8.2", "==2.10.*"', '"==2.10.*", "==2.8.2"'), "affects[1].nccl", "oldest first"),
])
def test_validate_names_the_alternative_at_fault(tmp_path, affects, field, says) -> None:
    _, problems = entries(tmp_path, affects)
    [problem] = problems
    assert f"[p2p-through-the-iommu] {field}: " in problem and says in problem, problem


def test_the_index_keeps_an_entry_one_of_whose_alternatives_may_apply(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(matrix_index, "_LOADED", {})
    entries(tmp_path)
    index = matrix_index.load_index(bundled_matrix_dir(), (tmp_path,))
    for env in ({"tensorflow": "2.2.0", "nccl": "2.10.3"}, {"tensorflow": "2.3.1", "nccl": "2.4.8"},
                {"tensorflow": "2.2.0"}, {"tensorflow": "2.2.0", "nccl": "2.9.6"}, {"nccl": "2.30.1"}):
        environment = environment_from_mapping({"gpus": 2, **env})
        ours = [i for i in index.candidates(environment) if i.id == "p2p-through-the-iommu"]
        assert known_issue_findings(ours, environment) == known_issue_findings(
            [i for i in index.matrix().issues if i.id == "p2p-through-the-iommu"], environment), env
    ruled_out = environment_from_mapping({"gpus": 2, "tensorflow": "2.2.0", "nccl": "2.4.8"})
    assert "p2p-through-the-iommu" not in {i.id for i in index.candidates(ruled_out)}
    # far past the reports of both alternatives: only counted; past one of them only: shown
    _, counted = index.split_candidates(environment_from_mapping({"tensorflow": "2.16.1", "nccl": "2.30.1"}))
    assert "p2p-through-the-iommu" in {index.entry(i).id for i in counted}
    shown, _ = index.split_candidates(environment_from_mapping({"tensorflow": "2.3.1", "nccl": "2.30.1"}))
    assert "p2p-through-the-iommu" in {i.id for i in shown}


def test_coverage_review_and_show_read_every_alternative(tmp_path, capsys) -> None:
    [issue], _ = entries(tmp_path, TWO.replace('nccl = ["==2.8.2", "==2.10.*"]', 'tensorflow = "==2.10.*"'))
    assert coverage([issue]).tensorflow["2.3"] == 1 and coverage([issue]).tensorflow["2.10"] == 1
    assert [r.rule for r in reviews([issue])] == []
    # the second alternative's range, open above its last report, unsourced: reviewed too
    [issue], _ = entries(tmp_path, TWO.replace('["==2.8.2", "==2.10.*"]', '"<=2.10.3"'))
    assert [r.rule for r in reviews([issue])] == ["no-lower-bound", "unsourced-bound"]
    entries(tmp_path)
    assert main(["matrix", "show", "p2p-through-the-iommu", "--matrix", str(tmp_path)]) == 0
    assert "affects:     tensorflow ==2.3.1; or nccl ==2.8.2 || ==2.10.*" in capsys.readouterr().out
    assert main(["matrix", "show", "p2p-through-the-iommu", "--matrix", str(tmp_path), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["alternatives"] == [{"tensorflow": "==2.3.1"}, {"nccl": "==2.8.2 || ==2.10.*"}]
