"""`--python` at something that is not a working interpreter: an error finding that says what was
run, what it printed and what to do (exit 1), never a pass or a skip, never a traceback; an
option that names nothing usable is exit 2. Through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    from dataclasses import replace

    from mgpu_doctor.checks.base import CheckSkipped

    with pytest.raises(CheckSkipped):
        check_interpreter(replace(snapshot, python=failed("malformed data", cause="bad-result")))
