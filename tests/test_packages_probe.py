"""The package probe runs under the diagnosed interpreter, which may be another Python."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.probes.packages import gather_python_and_packages
from mgpu_doctor.process.interpreter import CHILD_SCRIPTS, Interpreter


def base_python() -> str:
    """The interpreter this virtual environment was made from: no TensorFlow in it."""
    for name in ("python3", "python"):
        path = Path(sys.base_prefix) / "bin" / name
        if path.exists():
            return str(path)
    pytest.skip("no base interpreter found")


def test_current_interpreter_packages():
    python, packages, libc = gather_python_and_packages(Interpreter.current())
    assert not isinstance(python, Unavailable) and not isinstance(packages, Unavailable)
    assert python.is_doctor_interpreter
    assert python.version == ".".join(map(str, sys.version_info[:3]))
    assert packages.versions["numpy"] == metadata.version("numpy")
    assert packages.versions["tensorflow"] == metadata.version("tensorflow")
    tf_requires = packages.requires["tensorflow"]
    assert any("and-cuda" in r for r in tf_requires)
    assert libc.startswith("glibc")


def test_the_doctors_own_python_is_read_in_process_with_the_facts_of_a_child(monkeypatch):
    from mgpu_doctor.probes import packages as probe

    with monkeypatch.context() as patched:  # pytest put folders first: read in-process all the same
        patched.setattr(probe, "reads_in_process", lambda interpreter: True)
        patched.setattr(Interpreter, "run_script", lambda *a, **k: pytest.fail("a child"))
        in_process = gather_python_and_packages(Interpreter.current())
    monkeypatch.setattr(probe, "reads_in_process", lambda interpreter: False)
    assert gather_python_and_packages(Interpreter.current()) == in_process


COMPARE = """
import json, sys
if sys.argv[2] == "host":  # a host that puts its own folder first, as pytest does
    sys.path.insert(0, sys.argv[3])
from mgpu_doctor.probes import packages as probe
from mgpu_doctor.process.interpreter import Interpreter
assert probe.reads_in_process(Interpreter.current()) == (sys.argv[1] == "yes")
here = probe.gather_python_and_packages(Interpreter.current())
probe.reads_in_process = lambda interpreter: False
child = probe.gather_python_and_packages(Interpreter.current())
print(json.dumps([here == child, here[1].versions.get("tensorflow"), here[1].shadowed.get("tensorflow")]))
"""


@pytest.mark.parametrize("flags, host, in_process", [((), "plain", "yes"), (("-s",), "plain", "no"),
                                                     ((), "host", "no")])
def test_a_fresh_doctor_reads_what_its_child_reads_path_order_and_all(tmp_path, flags, host, in_process):
    # A copy of TensorFlow first on PYTHONPATH: the one a child finds first, the other shadowed.
    dist = tmp_path / "tensorflow-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Name: tensorflow\nVersion: 9.9.9\nRequires-Dist: numpy>=1\n\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[1])])}
    done = subprocess.run([sys.executable, *flags, "-c", COMPARE, in_process, host, str(Path(__file__).parent)],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    same, version, shadowed = json.loads(done.stdout)
    assert same and version == "9.9.9" and shadowed == [f"{metadata.version('tensorflow')} at "
                                                         f"{Path(metadata.distribution('tensorflow')._path).parent}"]


def test_another_interpreter_is_diagnosed_in_its_own_environment():
    other = base_python()
    python, packages, _ = gather_python_and_packages(Interpreter(other))
    assert not isinstance(packages, Unavailable)
    assert not python.is_doctor_interpreter
    assert os.path.realpath(python.executable) == os.path.realpath(other)
    assert "tensorflow" not in packages.versions


def test_missing_interpreter_is_a_fact():
    python, packages, _ = gather_python_and_packages(Interpreter("/no/such/python"))
    assert isinstance(python, Unavailable) and "no such file" in python.detail
    assert packages == python


def test_interpreter_that_is_not_python(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'I am not python' >&2\nexit 4\n")
    fake.chmod(0o755)
    python, _, _ = gather_python_and_packages(Interpreter(str(fake)))
    assert isinstance(python, Unavailable)
    assert "exited with status 4: I am not python" in python.detail


@pytest.mark.parametrize("script", sorted(p.name for p in CHILD_SCRIPTS.glob("*.py")))
def test_child_scripts_stay_python36_compatible(script):
    source = (CHILD_SCRIPTS / script).read_text()
    ast.parse(source, feature_version=(3, 6))  # no walrus, no positional-only, ...
    for banned in ("from __future__ import annotations", "import dataclasses", "from dataclasses",
                   "importlib.metadata import", "removeprefix(", "functools.cache\n"):
        assert banned not in source, f"{script} uses {banned!r}, unavailable on Python 3.6"


OLD_PYTHONS = sorted(Path("/root/.pyenv/versions").glob("3.[6-9].*/bin/python3")) if Path(
    "/root/.pyenv/versions").is_dir() else []


@pytest.mark.skipif(not OLD_PYTHONS, reason="no Python 3.6-3.9 interpreter on this machine")
@pytest.mark.parametrize("python", OLD_PYTHONS, ids=lambda p: p.parent.parent.name)
def test_package_probe_runs_under_old_pythons(python):
    """Training environments can be older than the doctor: the child runs there for real."""
    py, packages, _ = gather_python_and_packages(Interpreter(str(python)))
    assert not isinstance(py, Unavailable), py
    assert py.version == python.parent.parent.name
    assert not isinstance(packages, Unavailable)


PYTHON2 = Path("/root/.pyenv/versions/2.7.18/bin/python")


@pytest.mark.skipif(not PYTHON2.exists(), reason="no Python 2 on this machine")
def test_python2_is_refused_with_a_clear_reason():
    python, _, _ = gather_python_and_packages(Interpreter(str(PYTHON2)))
    assert isinstance(python, Unavailable) and python.cause == "python-too-old"
    assert "Python 2.7.18; mgpu-doctor can diagnose Python 3.6 or newer" in python.detail
