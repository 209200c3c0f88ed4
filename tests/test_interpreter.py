"""`--python` at something that is not a working interpreter: an error finding that says what was
run, what it printed and what to do (exit 1), never a pass or a skip, never a traceback; an
option that names nothing usable is exit 2. Through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mgpu_doctor.checks.interpreter import check_interpreter
from mgpu_doctor.model.unavailable import failed

PY = sys.executable
PYTHON2 = Path("/root/.pyenv/versions/2.7.18/bin/python")


def program(tmp_path: Path, kind: str) -> str:
    path = tmp_path / kind.replace(" ", "-")
    if kind == "garbage printer":
        path.write_bytes(b"#!/bin/sh\nprintf 'garbage \\377\\376 here\\n'\necho more garbage\n")
    elif kind == "silent script":
        path.write_text("#!/bin/sh\nexit 0\n")
    elif kind == "not an executable format":
        path.write_bytes(b"\x7fELF\x00\x01garbage")
    elif kind == "bad shebang":
        path.write_text("#!/no/such/python\nprint('hi')\n")
    elif kind == "not executable":
        path.write_text("#!/bin/sh\n")
        path.chmod(0o644)
        return str(path)
    elif kind == "/bin/false":
        return "/bin/false"
    elif kind == "python 2.7":
        if not PYTHON2.exists():
            pytest.skip("no Python 2.7 on this machine")
        return str(PYTHON2)
    elif kind == "empty":
        return ""
    elif kind == "name too long":
        return str(tmp_path / ("python" * 50))
    elif kind == "in a folder the user may not search":
        if os.geteuid() == 0:
            pytest.skip("root searches every folder")
        (tmp_path / "locked").mkdir()
        os.symlink(sys.executable, tmp_path / "locked" / "python")
        (tmp_path / "locked").chmod(0)
        return str(tmp_path / "locked" / "python")
    path.chmod(0o755)
    return str(path)


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    return subprocess.run([PY, "-m", "mgpu_doctor", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env=env)


@pytest.mark.parametrize("kind,command,code,phrases", [
    ("garbage printer", "check", "interpreter.not-working",
     ["it wrote no usable result", "output that is not UTF-8 text", "garbage", "more garbage"]),
    ("/bin/false", "check", "interpreter.not-working", ["exited with status 1", "it printed nothing"]),
    ("silent script", "check", "interpreter.not-working", ["it wrote no usable result", "it printed nothing"]),
    ("not an executable format", "check", "interpreter.cannot-start", ["could not be started: [Errno 8]"]),
    ("bad shebang", "check", "interpreter.cannot-start", ["could not be started: [Errno 2]"]),
    ("python 2.7", "check", "interpreter.too-old", ["is Python 2.7.18", "3.6 or newer"]),
    ("python 2.7", "libs", "interpreter.too-old", ["is Python 2.7.18"]),
])
def test_a_python_that_does_not_work_is_an_error_finding(tmp_path, kind, command, code, phrases):
    args = [command] + (["--quick"] if command == "check" else []) + ["--format", "json", "--python",
                                                                      program(tmp_path, kind)]
    done = doctor(*args)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads(done.stdout)
    [python] = [c for c in report["checks"] if c["name"] == "interpreter"]
    [finding] = python["findings"]
    assert finding["code"] == code and finding["severity"] == "error" and finding["fix"]
    text = "\n".join([finding["title"], *finding["evidence"]])
    assert any(line.startswith("ran: ") for line in finding["evidence"]) or code == "interpreter.cannot-start"
    for phrase in phrases:
        assert phrase in text, text
    # Nothing else ran under it: no "import tensorflow fails" beside it, the rest say why they skip.
    assert not any(f["code"].startswith("tensorflow.") for c in report["checks"] for f in c["findings"])


@pytest.mark.parametrize("kind,message", [
    ("not executable", "not executable"),
    ("empty", "--python is empty"),
    ("name too long", "File name too long"),  # the OS's words, not an internal error (exit 3)
    ("in a folder the user may not search", "Permission denied"),
])
def test_a_python_option_that_names_nothing_usable_is_exit_2(tmp_path, kind, message):
    done = doctor("check", "--quick", "--python", program(tmp_path, kind))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_smoke_under_a_python_that_does_not_work_runs_nothing_and_says_why(tmp_path):
    done = doctor("smoke", "--format", "json", "--python", program(tmp_path, "garbage printer"))
    assert done.returncode == 1, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["interpreter"]["findings"][0]["code"] == "interpreter.not-working"
    assert checks["smoke"]["status"] == "skipped"


def test_the_check_passes_a_working_python_and_skips_only_an_unknown_one(scenario):
    snapshot = scenario("mixed-models")
    [ok] = check_interpreter(snapshot)
    assert ok.code == "interpreter.runs" and ok.severity.value == "ok"
    from mgpu_doctor.checks.base import CheckSkipped
    from mgpu_doctor.record import replace

    with pytest.raises(CheckSkipped):
        check_interpreter(replace(snapshot, python=failed("malformed data", cause="bad-result")))


def test_a_snapshot_of_a_python_that_does_not_work_says_so_and_exits_1(tmp_path):
    """Written all the same (its failed facts say what went wrong), but not silently with exit 0."""
    done = doctor("snapshot", "--quick", "--python", program(tmp_path, "garbage printer"))
    assert done.returncode == 1, done.stderr
    assert "The diagnosed Python does not work" in done.stderr and "interpreter.not-working" in done.stderr
    assert json.loads(done.stdout)["python"]["unavailable"] == "failed"
    assert doctor("snapshot", "--quick").returncode == 0  # a working one: exit 0 as before


def test_snapshot_into_a_missing_folder_is_refused_before_anything_is_gathered(tmp_path):
    """The error first, at once: not after a minute of probes and their progress lines."""
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nsleep 600\n")
    sleeper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    started = time.monotonic()
    done = subprocess.run([PY, "-m", "mgpu_doctor", "snapshot", "--python", str(sleeper), "-o",
                           str(tmp_path / "no" / "such" / "folder.json")], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**env, "MGPU_DOCTOR_PYTHON_TIMEOUT": "8"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"mgpu-doctor: error: cannot write {tmp_path}/no/such/folder.json: "
                                        f"No such file or directory (the folder {tmp_path}/no/such)"]
    assert time.monotonic() - started < 8  # the interpreter that never answers was not even asked


def test_a_shim_is_named_once_as_the_interpreter_it_runs(tmp_path, capsys):
    """A pyenv shim (here a script that execs the real Python, without site-packages: nothing
    installed) is named by the path the interpreter reports, in every finding and fact."""
    from mgpu_doctor.cli import main

    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    shim.chmod(0o755)
    main(["check", "--quick", "--python", str(shim), "--format", "json", "--no-redact"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["snapshot"]["tensorflow"]["cause"] == "not-installed"
    assert str(shim) not in out
    assert sys.executable in report["snapshot"]["tensorflow"]["detail"]
