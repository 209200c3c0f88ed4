"""The command line, in-process through main([...]) and as a real `python -m mgpu_doctor`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from mgpu_doctor import __version__
from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from tests.scenarios import path_of


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"mgpu-doctor {__version__}"


def test_no_command_prints_help_and_exits_2(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "usage: mgpu-doctor" in err


@pytest.mark.parametrize("scenario,expected", [
    ("healthy-8gpu-nvlink", 0),
    ("gpu-held-by-other-process", 0),  # a warning only
    ("sick-box", 1),
    ("tensorflow-import-fails", 1),
])
def test_exit_code_follows_the_worst_finding(capsys, scenario, expected):
    code, out, _ = run(capsys, "check", "--from", str(path_of(scenario)))
    assert code == expected
    assert out.splitlines()[0].startswith(f"mgpu-doctor {__version__}: snapshot ")


def test_fail_on_warning(capsys):
    code, _, _ = run(capsys, "check", "--from", str(path_of("gpu-held-by-other-process")),
                     "--fail-on", "warning")
    assert code == 1


def test_json_output_is_only_json_on_stdout(capsys):
    code, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--format", "json")
    data = json.loads(out)
    assert code == 1
    assert data["schema_version"] == 1 and data["kind"] == "mgpu-doctor-report"
    summary = dict(data["summary"])
    counts = summary.pop("checks")
    assert summary == {"worst": "error", "gate_worst": "error", "fail_on": "error", "exit_code": 1,
                       "acknowledged": 0}
    assert sum(counts.values()) == len(CHECKS) == len(data["checks"])
    assert (counts["failed"], counts["warning"], counts["crashed"]) == (2, 2, 0)
    codes = {f["code"] for c in data["checks"] for f in c["findings"]}
    assert {"gpu.ecc-uncorrected", "gpu.compute-prohibited"} <= codes
    assert data["snapshot"]["nvml"]["gpus"][1]["ecc_uncorrected_volatile"] == 3
    assert [d["nvml_index"] for d in data["devices"]] == [0, 1, 2, 3]


def test_junit_file(capsys, tmp_path):
    junit = tmp_path / "doctor.xml"
    code, _, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--junit", str(junit))
    suite = ET.parse(junit).getroot()
    assert code == 1 and suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures")) == (str(len(CHECKS)), "2")
    failure = suite.find("testcase[@name='gpu-ecc']/failure")
    assert failure is not None and failure.get("type") == "gpu.ecc-uncorrected"
    assert "Fix:" in failure.get("message")


def test_checks_and_skip_select(capsys):
    code, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--checks",
                       "gpu-pcie-link,gpu-throttling", "--format", "json")
    assert [c["name"] for c in json.loads(out)["checks"]] == ["gpu-throttling", "gpu-pcie-link"]
    assert code == 0
    _, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--skip", "gpu-ecc",
                    "--format", "json")
    assert "gpu-ecc" not in [c["name"] for c in json.loads(out)["checks"]]


@pytest.mark.parametrize("argv,message", [
    (["check", "--format", "yaml"], "invalid choice: 'yaml'"),
    (["check", "--fail-on", "sometimes"], "invalid choice: 'sometimes'"),
    (["check", "--bogus"], "unrecognized arguments: --bogus"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["check", "--checks", "gpu-eccs"], "unknown check 'gpu-eccs'"),
    (["check", "--python", "/no/such/python"], "--python /no/such/python: no such file"),
    (["check", "--from", "/no/such.json"], "/no/such.json: no such file"),
])
def test_usage_errors_are_one_line_with_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize("content,message", [
    ("", "file is empty"),
    ('{"schema_version": 1, "kind": "mgpu-doctor-snapshot"', "not valid JSON"),
    ("[]", "expected a JSON object"),
    ('{"schema_version": 1, "kind": "mgpu-doctor-snapshot"}', "field snapshot.tool_version: missing"),
])
def test_bad_from_file(capsys, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, err = run(capsys, "check", "--from", str(bad))
    assert code == 2 and message in err and err.startswith(f"mgpu-doctor: error: {bad}")


@pytest.mark.parametrize("command", ["check", "report"])
def test_a_snapshot_cut_short_is_judged_as_json_though_it_holds_log_lines(capsys, tmp_path, command):
    """Its own TensorFlow log lines (the stderr it recorded) once made it read as a paste."""
    whole = path_of("sick-box").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(whole[:len(whole) // 2] + '"stderr": "2024-01-01 10:00:00.000000: W tensorflow/core/x.cc:1] '
                   "Could not load dynamic library 'libcudart.so.12'; dlerror: not found\n")
    code, _, err = run(capsys, command, "--from", str(cut))
    assert code == 2 and "not valid JSON" in err and err.startswith(f"mgpu-doctor: error: {cut}")


@pytest.mark.parametrize("first", [
    "[ 8127.412345] Out of memory: Killed process 4242 (python) total-vm:81234567kB, anon-rss:60123456kB",
    "[INFO] epoch 3: loss nan",
    "{'loss': nan, 'accuracy': 0.1}",
])
def test_a_paste_that_opens_with_a_bracket_is_read_as_a_paste(capsys, tmp_path, first):
    """dmesg's lines, a bracketed log level and a printed Python dict open with `[` or `{` and are
    no JSON document: read as pastes, not refused as broken JSON."""
    paste = tmp_path / "issue.txt"
    paste.write_text(f"{first}\ntensorflow 2.4.1 on 2 GPUs\n")
    code, _, err = run(capsys, "check", "--from", str(paste))
    assert code != 2 and "not valid JSON" not in err


def test_internal_error_is_exit_3_without_traceback(capsys, monkeypatch):
    import mgpu_doctor.diagnose as pipeline

    def explode(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(pipeline, "resolve", explode)
    code, _, err = run(capsys, "check", "--from", str(path_of("sick-box")))
    assert code == 3 and "internal error: RuntimeError: kaboom" in err and "Traceback" not in err


def test_keyboard_interrupt_is_exit_130(capsys, monkeypatch):
    import mgpu_doctor.diagnose as pipeline

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "gather_snapshot", interrupted)
    code, _, err = run(capsys, "check", "--quick")
    assert code == 130 and "interrupted" in err


def test_snapshot_then_check_from_it(capsys, tmp_path):
    out_file = tmp_path / "snap.json"
    code, _, err = run(capsys, "snapshot", "--quick", "-o", str(out_file))
    assert code == 0 and "snapshot written" in err
    data = json.loads(out_file.read_text())
    assert data["kind"] == "mgpu-doctor-snapshot" and data["tensorflow"]["unavailable"] == "skipped"
    code, out, _ = run(capsys, "check", "--from", str(out_file))
    assert code in (0, 1) and "snapshot" in out.splitlines()[0]


def test_snapshot_to_unwritable_place(capsys, tmp_path):
    code, _, err = run(capsys, "snapshot", "--quick", "-o", str(tmp_path / "no" / "dir" / "s.json"))
    assert code == 2 and "cannot write" in err


def test_devices_without_a_driver(capsys):
    code, out, _ = run(capsys, "devices")
    assert code == 0 and out.startswith("No GPU: NVML absent")


def test_devices_with_fake_nvml(capsys):
    import argparse

    from mgpu_doctor.cli import devices
    from tests.fake_nvml import FakeMachine, FakeNvml, gpus

    code = devices.run(argparse.Namespace(format="human"), nvml_module=FakeNvml(FakeMachine(gpus=gpus(2))))
    out = capsys.readouterr().out
    assert code == 0 and "Driver 560.35.03, CUDA 12.6" in out and out.count("A100") == 2


def test_quick_check_on_this_machine(capsys):
    code, out, _ = run(capsys, "check", "--quick")
    assert code in (0, 1)
    assert "TensorFlow imports (skipped: --quick" in out
    assert "Quick check: TensorFlow was not imported" in out
    assert out.splitlines()[0].endswith(", level quick")
    code, out, _ = run(capsys, "check", "--level", "quick", "--format", "json")
    assert code in (0, 1)
    data = json.loads(out)
    assert (data["level"], data["quick"], data["smoke_runs"]) == ("quick", True, [])


def parsed(*argv: str):
    from mgpu_doctor.cli import build_parser

    return build_parser(argv[0]).parse_args(list(argv))


@pytest.mark.parametrize("argv, level, quick", [
    (("check",), "standard", False),
    (("check", "--level", "standard"), "standard", False),
    (("check", "--level", "long"), "long", False),
    (("check", "--quick"), "quick", True),  # the alias
    (("check", "--level", "quick"), "quick", True),
    (("check", "--quick", "--level", "quick"), "quick", True),
    (("report", "--level", "long"), "long", False),
])
def test_level_of_check_and_report(argv, level, quick):
    from mgpu_doctor.cli.options import diagnose_options

    options = diagnose_options(parsed(*argv), argv[0])
    assert (options.level, options.quick) == (level, quick)
    if quick:
        assert options.smoke is None
    else:
        assert options.smoke is not None and options.smoke.options.level == level


@pytest.mark.parametrize("argv, level", [(("smoke",), "standard"), (("smoke", "--level", "long"), "long")])
def test_level_of_smoke(argv, level):
    from mgpu_doctor.cli.options import level_from, smoke_request

    args = parsed(*argv)
    assert smoke_request(args, level_from(args)).options.level == level


@pytest.mark.parametrize("argv, message", [
    (("check", "--level", "huge"), "argument --level: invalid choice: 'huge'"),
    (("check", "--quick", "--level", "long"), "--quick is --level quick: it cannot go with --level long"),
    (("report", "--level", "standard", "--quick"), "it cannot go with --level standard"),
    (("smoke", "--level", "quick"), "argument --level: invalid choice: 'quick'"),
])
def test_a_bad_level_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.tensorflow
def test_python_dash_m_full_check_in_a_real_process(tmp_path):
    """The real entry point, no TTY: ASCII, no colour, progress only for the slow step."""
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "check", "--format", "json",
                           "--no-smoke", "--junit", str(tmp_path / "j.xml")],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    assert data["snapshot"]["tensorflow"]["version"]
    slow = ["mgpu-doctor: TensorFlow: importing it in a child process (a few seconds)"]
    if importlib.util.find_spec("jax") is not None:  # the test extra has it; a bare venv may not
        slow.append("mgpu-doctor: JAX: importing it in a child process, without preallocation")
    assert done.stderr.strip().splitlines() == slow
    ET.parse(tmp_path / "j.xml")


def test_python_dash_m_human_output_is_plain_ascii():
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "check", "--quick"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1)
    assert "\x1b[" not in done.stdout
    assert all(ord(ch) < 128 for ch in done.stdout), "non-ASCII when stdout is not a terminal"
    assert done.stderr == ""


def test_help_lists_every_command_and_an_unknown_one_is_a_usage_error(capsys):
    from mgpu_doctor.cli import COMMANDS

    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in COMMANDS)
    code, _, err = run(capsys, "nosuch")
    assert code == 2 and "invalid choice: 'nosuch'" in err and "fleet" in err


def test_a_command_imports_only_its_own_module():
    """The quick check's budget: `check` does not pay for importing fleet, libs or the report."""
    code = ("import sys; from mgpu_doctor.cli import main; main(['check', '--quick', '--from', "
            f"{str(path_of('healthy-8gpu-nvlink'))!r}]); "
            "print(sorted(m for m in ('fleet', 'libs', 'report', 'devices') if f'mgpu_doctor.cli.{m}' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


# Heavy modules the quick check on this machine must leave alone (issue 16): the smoke engine,
# the renderers it does not print with, TensorFlow and friends, and the standard library that
# only an error path or another command needs.
NOT_FOR_THE_QUICK_CHECK = (
    "tensorflow", "keras", "numpy", "jsonschema", "mgpu_doctor.smoke.section",
    "mgpu_doctor.smoke.runner", "mgpu_doctor.smoke.rules", "mgpu_doctor.smoke.measure",
    "mgpu_doctor.multiworker.launcher", "mgpu_doctor.renderers.junit", "mgpu_doctor.renderers.markdown",
    "mgpu_doctor.renderers.json_report", "mgpu_doctor.renderers.bug_report", "mgpu_doctor.environment.query",
    "mgpu_doctor.fleet.compare", "mgpu_doctor.model.fleet", "mgpu_doctor.model.multiworker",
    "mgpu_doctor.environment.library_view", "mgpu_doctor.model.libraries", "mgpu_doctor.model.drift",
    "mgpu_doctor.smoke_pipeline", "mgpu_doctor.gathering", "mgpu_doctor.smoke.judged", "mgpu_doctor.smoke.progress",
    "xml.etree.ElementTree", "statistics", "traceback", "email",
    "subprocess", "tempfile",  # no child is started once the loader's listing is kept
    "datetime",  # the snapshot's time is written with time.strftime
    "tomllib",  # the matrix index answers for the matrices
    # the readers of the user's code and model (--code, --model, a paste)
    "mgpu_doctor.training.code", "mgpu_doctor.training.code_rules", "mgpu_doctor.probes.user_model",
    "mgpu_doctor.training.observed", "mgpu_doctor.training.launches",
    # types only a report from a file, a paste or `hang` holds (decoding imports them)
    "mgpu_doctor.model.hang", "mgpu_doctor.model.pasted",
    # the readers of a given text's lines (a paste, --log)
    "mgpu_doctor.matrix.evidence_findings", "mgpu_doctor.matrix.signatures", "mgpu_doctor.matrix.mechanisms",
    # the smoke plan and its data types: the quick check trains nothing (the levels' table is apart)
    "mgpu_doctor.smoke.plan", "mgpu_doctor.model.smoke_runs", "mgpu_doctor.smoke.usage",
    "mgpu_doctor.smoke.checkpoint",
    "socket",  # the host name is the kernel's nodename (platform.node)
    "mgpu_doctor.gate.acks",  # read only where an acknowledgements file is
    "mgpu_doctor.training.code_roots",  # only --model looks for the code's roots
)
# Needed only to draw the GPU table or to judge the [and-cuda] wheels, which need a GPU.
ONLY_WITH_A_GPU = ("tabulate", "importlib.metadata", "packaging.requirements")


def test_the_quick_check_imports_nothing_it_does_not_use(tmp_path):
    """The real quick path in a fresh interpreter, the second time (the parse cache is warm)."""
    code = ("import json, sys\n"
            "from mgpu_doctor.cli import main\n"
            "code = main(['check', '--quick'])\n"
            "with open(sys.argv[1], 'w') as fh: json.dump([code, sorted(sys.modules)], fh)\n")
    env = {**os.environ, "MGPU_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "modules.json")], env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    status, modules = json.loads((tmp_path / "modules.json").read_text())
    assert status in (0, 1), done.stderr
    assert "mgpu_doctor.checks.known_issues" in modules  # it did run the checks
    unwanted = NOT_FOR_THE_QUICK_CHECK + (() if "GPUs (NVML index" in done.stdout else ONLY_WITH_A_GPU)
    assert not [m for m in modules if m in unwanted or m.split(".")[0] in ("tensorflow", "keras")]


def test_the_quick_check_compiles_no_pattern_it_does_not_use(tmp_path):
    """The patterns that only a text, an image, a TensorFlow log, a JSON file or the matrix's own
    files are read with are compiled on first use (functools.cache), not by every run's imports."""
    code = ("import io, json, sys, contextlib\n"
            "from mgpu_doctor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['check', '--quick'])\n"
            "from mgpu_doctor.environment import implied\n"
            "from mgpu_doctor.matrix import known_issues\n"
            "from mgpu_doctor.model import evidence\n"
            "from mgpu_doctor.probes import tensorflow\n"
            "from mgpu_doctor.process import inputs, masking\n"
            "lazy = [evidence._words, evidence.frame_line, evidence._exception, evidence._library_path,\n"
            "        implied._tf_image, implied._ngc_image, tensorflow.notable_log, inputs._json_tokens,\n"
            "        known_issues.frame_form, known_issues._status_prefix, masking._userinfo_run,\n"
            "        masking._token_patterns, masking._key_value, masking._assignment, masking._pem_begin]\n"
            "print(json.dumps([f.__qualname__ for f in lazy if f.cache_info().currsize]))\n")
    # the credential patterns run only on a text that may hold one: none in a plain environment
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MGPU_DOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # the second run: the first builds the matrix index, which reads the signatures
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_one_command_freezes_what_importing_built_and_leaves_collection_on():
    """The console script runs one command: its imports are kept out of later collections. A
    process calling main() again (these tests) is not frozen: cycles it makes must stay collectable."""
    import gc

    gc.unfreeze()
    assert main(["matrix", "show", "keras-21081-torch-ddp-callbacks-get-wrapper"]) == 0
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    try:
        assert main(["matrix", "show", "keras-21081-torch-ddp-callbacks-get-wrapper"], one_command=True) == 0
        assert gc.get_freeze_count() > 1000 and gc.isenabled()
    finally:
        gc.unfreeze()
