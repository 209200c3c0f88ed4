"""`check --baseline FILE`: what changed since a known-good run, on two recorded snapshots of one
machine built from healthy-8gpu-nvlink.json (the driver, cuDNN and one GPU changed)."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.code_table import all_declared
from mgpu_doctor.drift.compare import CODES
from mgpu_doctor.model.codes import is_declared
from tests.scenarios import path_of

HEALTHY = path_of("healthy-8gpu-nvlink")
SMOKE_RUNS = Path(__file__).parent / "data" / "smoke-runs-readme.json"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot_data() -> dict:
    data = json.loads(HEALTHY.read_text(encoding="utf-8"))
    return data.get("snapshot", data)


def set_cudnn(snap: dict, wheel: str, loaded: str) -> None:
    snap["packages"]["versions"]["nvidia-cudnn-cu12"] = wheel
    for copy_ in snap["libraries"]["copies"]:
        if copy_["name"] == "cudnn":
            copy_["versions"].update({"wheel": wheel, "ctypes": loaded})


def older_machine() -> dict:
    """The same machine a month earlier: driver 550, cuDNN 9.1, another GPU in slot 5."""
    snap = copy.deepcopy(snapshot_data())
    snap["nvml"]["driver_version"] = "550.54.15"
    snap["nvml"]["nvml_version"] = "12.550.54.15"
    set_cudnn(snap, "9.1.0.70", "9.1.0")
    snap["nvml"]["gpus"][5]["uuid"] = "GPU-55555555-aaaa-bbbb-cccc-ddddeeeeffff"
    return snap


def write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def drift_of(capsys, now: Path, baseline: Path, *extra: str) -> tuple[int, dict]:
    code, out, err = run(capsys, "check", "--from", str(now), "--baseline", str(baseline), "--format", "json",
                         "--no-redact", *extra)
    assert code in (0, 1), err
    return code, json.loads(out)


def rows(report: dict) -> dict[str, tuple[str, str, str, str]]:
    return {r["code"] + ":" + r["label"]: (r["then"], r["now"], r["severity"], ",".join(r["judged_by"]))
            for r in report["drift"]["rows"]}


@pytest.fixture
def recorded(tmp_path) -> tuple[Path, Path]:
    """(baseline, now): the older machine, and the machine as healthy-8gpu-nvlink.json records it."""
    return write(tmp_path, "baseline.json", older_machine()), HEALTHY


def test_driver_cudnn_and_a_gpu_changed(capsys, recorded):
    baseline, now = recorded
    code, report = drift_of(capsys, now, baseline)
    changes = rows(report)
    assert changes["drift.driver.changed:NVIDIA driver"] == ("550.54.15", "560.35.03", "warning", "")
    assert changes["drift.cudnn.changed:cuDNN"] == ("9.1.0", "9.3.0", "warning", "")
    then, now_, severity, _ = changes["drift.gpu.replaced:GPU 5"]
    assert "GPU-55555555-aaaa-bbbb-cccc-ddddeeeeffff" in then and "GPU-55555555" not in now_
    assert severity == "warning"
    # cuDNN 9.1 under a TensorFlow built with 9.3 failed then; 9.3 passes now
    assert changes["drift.check.now-passes:CUDA and cuDNN libraries fit TensorFlow's build"][:3] == (
        "failed", "passed", "info")
    assert code == 0  # warnings do not fail the default gate
    drift = report["checks"][0]
    assert drift["name"] == "drift" and drift["status"] == "warning"
    assert {f["code"] for f in drift["findings"]} <= set(all_declared()) | {
        f["code"] for f in drift["findings"] if is_declared(f["code"], CODES)}


def test_fail_on_gates_the_drift_warnings(capsys, recorded):
    baseline, now = recorded
    code, _ = drift_of(capsys, now, baseline, "--fail-on", "warning")
    assert code == 1


def test_a_change_a_check_judges_takes_that_checks_severity(capsys, tmp_path):
    """The other way round: cuDNN went back to 9.1 under TensorFlow 2.21 (built with 9.3)."""
    now = older_machine()
    now["nvml"]["gpus"][5]["uuid"] = snapshot_data()["nvml"]["gpus"][5]["uuid"]
    now["nvml"]["driver_version"] = snapshot_data()["nvml"]["driver_version"]
    code, report = drift_of(capsys, write(tmp_path, "now.json", now), HEALTHY)
    changes = rows(report)
    # both checks that judge cuDNN object now: the change takes their severity
    assert changes["drift.cudnn.changed:cuDNN"] == ("9.3.0", "9.1.0", "error", "and-cuda-wheels,cuda-libraries")
    assert changes["drift.check.now-fails:CUDA and cuDNN libraries fit TensorFlow's build"] == (
        "passed", "failed", "error", "cuda-libraries")
    assert "drift.driver.changed:NVIDIA driver" not in changes
    assert code == 1


def test_gpus_added_and_removed_by_uuid(capsys, tmp_path):
    now = copy.deepcopy(snapshot_data())
    removed = now["nvml"]["gpus"].pop(7)
    baseline = copy.deepcopy(snapshot_data())
    extra = copy.deepcopy(baseline["nvml"]["gpus"][0])
    extra.update(index=8, uuid="GPU-88888888-aaaa-bbbb-cccc-ddddeeeeffff")
    now["nvml"]["gpus"].append(extra)
    _, report = drift_of(capsys, write(tmp_path, "now.json", now), write(tmp_path, "base.json", baseline))
    changes = rows(report)
    assert removed["uuid"] in changes["drift.gpu.removed:GPU 7"][0]
    assert "GPU-88888888" in changes["drift.gpu.added:GPU 8"][1]
    assert changes["drift.gpu.added:GPU 8"][2] in ("warning", "error")


def test_an_environment_variable_the_doctor_reads(capsys, tmp_path):
    now = copy.deepcopy(snapshot_data())
    now["env"]["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    _, report = drift_of(capsys, write(tmp_path, "now.json", now), HEALTHY)
    assert rows(report)["drift.env.changed:env CUDA_VISIBLE_DEVICES"][:2] == ("not set", "0,1,2,3")


def test_a_version_change_alone_is_info(capsys, tmp_path):
    now = copy.deepcopy(snapshot_data())
    now["python"]["version"] = "3.11.10"
    _, report = drift_of(capsys, write(tmp_path, "now.json", now), HEALTHY)
    assert rows(report)["drift.python.changed:Python"] == ("3.11.9", "3.11.10", "info", "")


def test_nothing_changed(capsys):
    code, report = drift_of(capsys, HEALTHY, HEALTHY)
    assert report["drift"]["rows"] == []
    assert [(f["code"], f["severity"]) for f in report["checks"][0]["findings"]] == [("drift.none", "ok")]
    assert report["drift"]["compared"] > 20


def report_with_runs(capsys, tmp_path: Path, name: str, hang: str = "") -> Path:
    _, out, _ = run(capsys, "check", "--from", str(HEALTHY), "--format", "json", "--no-redact")
    report = json.loads(out)
    runs = json.loads(SMOKE_RUNS.read_text(encoding="utf-8"))["smoke_runs"]
    for r in runs:
        if hang and r["layer"] == hang and r["devices"] == 2 and r["scenario"] == "even" and r["model_size"] == 1:
            r["status"] = "hang"
    report["smoke_runs"] = runs
    return write(tmp_path, name, report)


def test_a_smoke_run_that_passed_then_and_fails_now(capsys, tmp_path):
    baseline = report_with_runs(capsys, tmp_path, "green.json")
    now = report_with_runs(capsys, tmp_path, "red.json", hang="dense")
    code, report = drift_of(capsys, now, baseline)
    failing = {k: v for k, v in rows(report).items() if k.startswith("drift.smoke.now-fails")}
    assert failing and all(v[:3] == ("ok", "hang", "error") for v in failing.values())
    assert any("dense on 2 cpu-virtual (even" in k for k in failing)
    back, report = drift_of(capsys, baseline, now)
    assert any(k.startswith("drift.smoke.now-passes") for k in rows(report))


def test_a_json_report_baseline_uses_the_verdicts_it_recorded(capsys, tmp_path):
    _, out, _ = run(capsys, "check", "--from", str(HEALTHY), "--format", "json", "--no-redact")
    recorded = json.loads(out)
    gpus = next(c for c in recorded["checks"] if c["name"] == "gpus")
    gpus["status"] = "failed"  # what the report says happened then, whatever the snapshot says
    _, report = drift_of(capsys, HEALTHY, write(tmp_path, "report.json", recorded))
    assert rows(report)["drift.check.now-passes:NVIDIA driver and GPUs"][:2] == ("failed", "passed")


def test_a_markdown_bug_report_is_a_baseline_too(capsys, tmp_path, recorded):
    baseline, _ = recorded
    bug_report = tmp_path / "bug.md"
    code, _, err = run(capsys, "report", "--from", str(baseline), "-o", str(bug_report))
    assert code in (0, 1), err
    _, report = drift_of(capsys, HEALTHY, bug_report)
    assert "drift.driver.changed:NVIDIA driver" in rows(report)


def test_markdown_and_html_show_the_drift_table_first(capsys, recorded):
    baseline, now = recorded
    _, md, _ = run(capsys, "check", "--from", str(now), "--baseline", str(baseline), "--format", "markdown")
    lines = md.splitlines()
    assert lines[4] == "## Changes since the baseline"
    assert md.index("| drift.driver.changed ") < md.index("| Check ")
    _, html, _ = run(capsys, "check", "--from", str(now), "--baseline", str(baseline), "--format", "html")
    assert html.index("Changes since the baseline") < html.index("<h2>Findings</h2>")


def test_the_drift_section_fits_the_schema(capsys, recorded):
    baseline, now = recorded
    _, report = drift_of(capsys, now, baseline)
    schema = json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    report["drift"]["rows"][0]["severity"] = "bad"
    assert not jsonschema.Draft202012Validator(schema).is_valid(report)


def test_redaction_covers_the_drift_rows(capsys, recorded):
    baseline, now = recorded
    _, out, _ = run(capsys, "check", "--from", str(now), "--baseline", str(baseline), "--format", "json")
    assert "GPU-55555555-aaaa-bbbb-cccc-ddddeeeeffff" not in out
    assert "GPU-redacted-" in json.dumps(json.loads(out)["drift"])


def test_a_bad_baseline_is_one_line_and_exit_2(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "check", "--from", str(HEALTHY), "--baseline", str(missing))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--baseline" in err


def test_every_drift_code_is_declared_and_in_the_code_table():
    declared = all_declared()
    for code in CODES:
        assert code in declared, code


pytest_plugins = ["pytester"]


def test_the_pytest_plugin_takes_a_baseline(pytester, recorded):
    baseline, now = recorded
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--mgpu-check", f"--mgpu-from={now}", f"--mgpu-baseline={baseline}")
    result.stdout.fnmatch_lines(["mgpu-doctor drift since *baseline.json: * change(s)",
                                 "  warning: drift.driver.changed: NVIDIA driver: 550.54.15 -> 560.35.03"])
    bad = pytester.runpytest("--mgpu-check", f"--mgpu-from={now}", "--mgpu-baseline=/nonexistent.json")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*--mgpu-baseline: *nonexistent.json*"])


def test_the_bug_report_shows_the_drift_table_first(capsys, tmp_path, recorded):
    baseline, now = recorded
    out = tmp_path / "report.md"
    run(capsys, "report", "--from", str(now), "--baseline", str(baseline), "-o", str(out))
    headings = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]
    assert headings[0] == "## Changes since the baseline"
