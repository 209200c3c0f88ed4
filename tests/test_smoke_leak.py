"""The leak probe: the plan, the line through the memory after every call, the finding, the matrix's
verdict (known leak reproduced, new, not reproduced), and a real probe on virtual CPU devices with
an injected leak (MGPU_DOCTOR_SMOKE_FAULT="LAYER:leak_predict:N")."""

from __future__ import annotations

import json
import os
import sys
from importlib.resources import files

import jsonschema
import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue, load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.serde import from_jsonable, to_jsonable
from mgpu_doctor.model.smoke_runs import LEAK_SCENARIO, SCENARIO_USAGE, LeakCycle, SmokeRun
from mgpu_doctor.smoke.leak import (
    HOST_FLOOR_MB,
    PHASE_USAGE,
    PHASES,
    WARMUP_CYCLES,
    growths,
    leak_verdicts,
    line_fit,
)
from mgpu_doctor.smoke.measure import run_from_child
from mgpu_doctor.smoke.plan import LEAK_CYCLES, LEVELS, SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import run_findings, smoke_outcomes

SCHEMA = json.loads((files("mgpu_doctor") / "schemas" / "report.schema.json").read_text())
# A clean probe measured on this project's 2-core machine (TensorFlow 2.21, Keras 3, dense on 2
# virtual CPU devices): anonymous host memory after each call, a creep of hundredths of a MiB
# per call and a dip of 1.5 MiB.
CLEAN = {
    "fit": [212.2, 212.6, 210.9, 211.1, 211.2, 211.3, 211.2, 211.4, 211.5, 211.5, 211.4, 211.5],
    "predict": [213.0, 213.3, 213.3, 211.8, 213.1, 213.2, 213.2, 213.3, 213.3, 213.2, 213.3, 213.3],
    "evaluate": [215.6, 215.6, 215.8, 216.0, 216.0, 216.1, 216.2, 216.3, 216.3, 216.1, 216.3, 216.4],
}


def cycles(leak: dict[str, float] | None = None, gpu: bool = False) -> list[LeakCycle]:
    """A probe's calls: the measured clean series, plus ``leak[phase]`` MiB more per call."""
    out = []
    for phase in PHASES:
        for i, value in enumerate(CLEAN[phase]):
            extra = (leak or {}).get(phase, 0.0) * i
            out.append(LeakCycle(phase, i, rss_anon_mb=value + extra, gpu_mb=100.0 if gpu else None, seconds=0.1))
    return out


def probe_run(leak: dict[str, float] | None = None, **kw: object) -> SmokeRun:
    base: dict[str, object] = dict(layer="dense", variant="", devices=2, device_kind="cpu-virtual",
                                   scenario=LEAK_SCENARIO, status="ok", global_batch=64, samples=256,
                                   epochs=1, leak_cycles=cycles(leak))
    return SmokeRun(**{**base, **kw})  # type: ignore[arg-type]


# --- the plan -------------------------------------------------------------------------------------

def _probes(**kw: object) -> list[tuple[str, int, int]]:
    return [(s.layer, s.devices, s.cycles) for s in plan_runs(SmokeOptions(**kw), 0)  # type: ignore[arg-type]
            if s.scenario == LEAK_SCENARIO]


def test_the_probe_runs_at_long_and_on_request_on_one_and_n_devices():
    assert LEVELS["long"].leak_probe and not LEVELS["standard"].leak_probe
    assert _probes(level="long") == [("dense", 1, LEAK_CYCLES), ("dense", 2, LEAK_CYCLES)]
    assert _probes() == []  # the standard level's budget is untouched
    assert _probes(leak_probe=True) == [("dense", 1, LEAK_CYCLES), ("dense", 2, LEAK_CYCLES)]
    assert _probes(level="long", leak_probe=False) == []
    # the stock model is dense; without it, the first layer asked for
    assert _probes(leak_probe=True, layers=("gru", "lstm")) == [("gru", 1, LEAK_CYCLES), ("gru", 2, LEAK_CYCLES)]
    specs = plan_runs(SmokeOptions(level="long"), 0)
    assert [s.index for s in specs] == list(range(len(specs)))


def test_the_leak_scenario_names_the_usage_words_of_its_phases():
    assert set(SCENARIO_USAGE[LEAK_SCENARIO]) == {w for p in PHASES for w in PHASE_USAGE[p]}


@pytest.mark.parametrize("argv, message", [
    (["smoke", "--workers", "2", "--leak-probe"], "--leak-probe applies to the single-host smoke"),
])
def test_leak_probe_usage_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


# --- the line and the finding -----------------------------------------------------------------

def test_line_fit_gives_slope_and_standard_error():
    slope, stderr = line_fit([1.0, 3.0, 5.0, 7.0])
    assert slope == pytest.approx(2.0) and stderr == pytest.approx(0.0)
    assert line_fit([1.0, 2.0, 3.0]) == (None, None)
    noisy = line_fit([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert noisy[0] is not None and noisy[1] is not None and noisy[0] < 3 * noisy[1]


def test_a_clean_probe_measured_here_is_not_a_leak():
    run = probe_run()
    measured = growths(run.leak_cycles)
    assert [g.phase for g in measured] == list(PHASES) and not any(g.leaks for g in measured)
    [finding] = run_findings(run, [run])
    assert finding.code == "smoke.dense.ok" and finding.severity is Severity.OK
    assert "no memory growth over 12 calls each of fit, predict and evaluate" in finding.title
    assert "GPU memory: not measured (simulated CPU devices)" in finding.evidence


def test_a_leak_in_predict_is_a_warning_with_its_rate_cycles_and_phase():
    run = probe_run({"predict": 2.0})
    [finding] = run_findings(run, [run])
    assert finding.code == "smoke.dense.leak" and finding.severity is Severity.WARNING
    # 2 MiB per call on top of the measured creep
    assert "host memory grows by 2.07 MiB per predict call (2.0 GiB per 1,000 calls)" in finding.title
    assert "fit" not in finding.title and "evaluate" not in finding.title
    assert any(e.startswith("leaked in: predict; 12 calls per phase, the first 2 left out") for e in finding.evidence)
    assert any(e.startswith("predict: host memory (anonymous RSS)") and f"calls {WARMUP_CYCLES + 1}-12" in e for e in finding.evidence)
    [outcome] = smoke_outcomes([run])
    assert outcome.name == "smoke/dense/2xcpu-virtual/leak_probe/b64" and outcome.status.value == "warning"


def test_a_growth_below_the_floor_or_a_single_dip_is_noise():
    assert not any(g.leaks for g in growths(cycles({"fit": HOST_FLOOR_MB / 2})))
    dip = [LeakCycle("fit", i, rss_anon_mb=500.0 - (2.0 if i == 6 else 0.0)) for i in range(12)]
    assert not any(g.leaks for g in growths(dip))
    # a process holding 5 GiB: 2 MiB per call is within 0.1 % of it
    big = [LeakCycle("fit", i, rss_anon_mb=5000.0 + 2.0 * i) for i in range(12)]
    assert [g.threshold_mb for g in growths(big)] == [pytest.approx(5.011)] and not growths(big)[0].leaks
    # one jump of 8 MiB before the last two calls: a slope above the floor, but not a steady one
    jump = [LeakCycle("fit", i, rss_anon_mb=500.0 + (8.0 if i >= 10 else 0.0)) for i in range(12)]
    [growth] = growths(jump)
    assert growth.slope_mb is not None and growth.slope_mb > growth.threshold_mb and not growth.leaks


def test_gpu_memory_is_judged_where_it_was_measured():
    calls = [LeakCycle("fit", i, rss_anon_mb=500.0, gpu_mb=100.0 + 4.0 * i) for i in range(12)]
    run = probe_run(device_kind="gpu", leak_cycles=calls)
    [finding] = run_findings(run, [run])
    assert finding.code == "smoke.dense.leak" and "GPU memory grows by 4.00 MiB per fit call" in finding.title
    assert not any("not measured" in e for e in finding.evidence)


def test_child_records_become_leak_cycles_and_round_trip_through_json_and_the_schema():
    from mgpu_doctor.model.smoke_runs import SmokeSpec

    spec = SmokeSpec(index=0, layer="dense", variant="", devices=1, device_kind="cpu-virtual",
                     scenario=LEAK_SCENARIO, global_batch=64, samples=256, epochs=1, cycles=2)
    data = {"status": "ok", "leak_cycles": [
        {"phase": "fit", "cycle": 0, "rss_anon_mb": 500.5, "gpu_mb": None, "seconds": 0.2},
        {"phase": "fit", "cycle": "x"}, "junk"]}
    run = run_from_child(spec, data)
    assert run.leak_cycles == [LeakCycle("fit", 0, rss_anon_mb=500.5, gpu_mb=None, seconds=0.2)]
    jsonable = to_jsonable(run)
    assert from_jsonable(SmokeRun, json.loads(json.dumps(jsonable))) == run
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/smoke_run", "$defs": SCHEMA["$defs"]})
    validator.validate(jsonable)
    jsonable["leak_cycles"][0]["phase"] = "train"
    assert not validator.is_valid(jsonable)


# --- the matrix's verdict -----------------------------------------------------------------------

def _predict_leak_entry() -> tuple[KnownIssue, Environment]:
    """A bundled leak entry of predict in a loop, and an environment its own example matches."""
    for issue in load_matrix(bundled_matrix_dir()).issues:
        c = issue.conditions
        if (issue.symptom == "leak" and c.usage and set(c.usage) <= {"predict_in_loop", "predict_evaluate"}
                and not (c.layers or c.strategy or c.scenario) and set(issue.affects) <= {"tensorflow", "keras"}):
            for example in issue.examples:
                versions = {k: v for k, v in example.env.items() if k in ("tensorflow", "keras")}
                if example.matches and versions:
                    return issue, Environment(versions={k: str(v) for k, v in versions.items()})
    raise AssertionError("no leak entry of predict in a loop with a matching example")


def test_a_leak_the_matrix_knows_is_named_as_reproduced_here():
    issue, env = _predict_leak_entry()
    matrix = load_matrix(bundled_matrix_dir()).issues
    findings = leak_verdicts(matrix, env, probe_run({"predict": 2.0}))
    named = {f.code: f for f in findings}
    found = named[f"smoke.known-issue.{issue.id}"]
    assert found.severity is Severity.WARNING and f"known leak {issue.id}, reproduced here" in found.title
    assert not any(code.startswith("smoke.not-in-matrix.") for code in named)


def test_a_clean_run_says_a_matching_known_leak_was_not_reproduced_here():
    issue, env = _predict_leak_entry()
    matrix = load_matrix(bundled_matrix_dir()).issues
    findings = {f.code: f for f in leak_verdicts(matrix, env, probe_run())}
    quiet = findings[f"smoke.not-reproduced.{issue.id}"]
    assert quiet.severity is Severity.INFO and "not reproduced here" in quiet.title
    assert not any(f.severity > Severity.INFO for f in findings.values())
    # a leak in fit only does not reproduce an entry of predict in a loop
    fit_only = {f.code for f in leak_verdicts(matrix, env, probe_run({"fit": 2.0}))}
    assert f"smoke.known-issue.{issue.id}" not in fit_only and f"smoke.not-reproduced.{issue.id}" in fit_only


def test_a_leak_no_entry_explains_is_new():
    [finding] = leak_verdicts([], Environment(versions={"tensorflow": "2.21.0"}), probe_run({"evaluate": 3.0}))
    assert finding.code == "smoke.not-in-matrix.dense-2cpu-virtual-leak-probe"
    assert finding.severity is Severity.WARNING and "a new leak" in finding.title
    assert leak_verdicts([], Environment(), probe_run()) == []
    assert leak_verdicts([], Environment(), probe_run(scenario="even")) == []


def test_a_replayed_probe_is_judged_and_looked_up_by_check_from(capsys, tmp_path):
    """`check --from` a report holding probe runs: the leak, the matrix's verdict, a valid report."""
    from tests.scenarios import path_of

    assert main(["check", "--from", str(path_of("healthy-8gpu-nvlink")), "--format", "json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    gpu_leak = [LeakCycle("predict", i, rss_anon_mb=900.0, gpu_mb=100.0 + 4.0 * i) for i in range(12)]
    runs = [probe_run(devices=1, device_kind="gpu"), probe_run(device_kind="gpu", leak_cycles=gpu_leak)]
    data["smoke_runs"] = [to_jsonable(r) for r in runs]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    main(["check", "--from", str(path), "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(SCHEMA).validate(report)
    checks = {c["name"]: c for c in report["checks"]}
    clean, leaky = checks["smoke/dense/1xgpu/leak_probe/b64"], checks["smoke/dense/2xgpu/leak_probe/b64"]
    assert clean["findings"][0]["code"] == "smoke.dense.ok"
    codes = [f["code"] for f in leaky["findings"]]
    assert leaky["status"] == "warning" and "smoke.dense.leak" in codes
    # known or new: the leak always gets the matrix's verdict
    assert any(c.startswith(("smoke.known-issue.", "smoke.not-in-matrix.dense-2gpu-leak-probe")) for c in codes)
    leak = next(f for f in leaky["findings"] if f["code"] == "smoke.dense.leak")
    assert "GPU memory grows by 4.00 MiB per predict call" in leak["title"]


# --- for real: TensorFlow on virtual CPU devices ------------------------------------------------

@pytest.mark.tensorflow
@pytest.mark.slow
def test_the_probe_finds_an_injected_leak_and_passes_a_clean_run():
    """1 device trains clean; on 2 devices every predict call keeps 8 MiB more (the test fault)."""
    from mgpu_doctor.smoke.runner import run_suite

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "MGPU_DOCTOR_SMOKE_FAULT": "dense:leak_predict:2"}
    specs = plan_runs(SmokeOptions(layers=("dense",), scenarios=(LEAK_SCENARIO,), leak_probe=True), 0)
    suite = run_suite(specs, python=sys.executable, stall_timeout_s=120, env=env)
    clean, leaky = suite.runs
    assert (clean.devices, leaky.devices) == (1, 2) and clean.status == leaky.status == "ok"
    assert len(clean.leak_cycles) == len(PHASES) * LEAK_CYCLES
    assert all(c.rss_anon_mb and c.gpu_mb is None for c in clean.leak_cycles)
    [ok] = run_findings(clean, suite.runs)
    assert ok.code == "smoke.dense.ok", ok.evidence
    [leak] = run_findings(leaky, suite.runs)
    assert leak.code == "smoke.dense.leak" and "per predict call" in leak.title, leak.evidence
    assert "fit call" not in leak.title and "evaluate call" not in leak.title
    [rate] = [g.slope_mb for g in growths(leaky.leak_cycles) if g.leaks]
    assert rate == pytest.approx(8.0, abs=1.0)
