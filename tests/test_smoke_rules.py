"""Smoke plan, measurements and rules: pure functions, no TensorFlow."""

from __future__ import annotations

import json

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.gate.requirements import LayerOutcome, layer_outcomes
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.serde import from_jsonable, to_jsonable
from mgpu_doctor.model.smoke_runs import LEAK_SCENARIO, SCENARIOS, SmokeRun, SmokeSpec
from mgpu_doctor.record import replace
from mgpu_doctor.renderers import RenderOptions, junit
from mgpu_doctor.smoke.layers import SMOKE_LAYERS
from mgpu_doctor.smoke.measure import run_from_child, slope
from mgpu_doctor.smoke.plan import LEVELS, PlanError, SmokeOptions, parse_counts, parse_layers, plan_runs
from mgpu_doctor.smoke.rules import compare_with_single, run_findings, smoke_outcomes

CUDNN_VARIANTS = [(row.name, "cudnn") for row in SMOKE_LAYERS.values() if row.cudnn]


def spec(**kw) -> SmokeSpec:
    base = dict(index=0, layer="dense", variant="", devices=2, device_kind="gpu", scenario="even",
                global_batch=64, samples=256, epochs=4)
    return SmokeSpec(**{**base, **kw})


def run(**kw) -> SmokeRun:
    base = dict(layer="dense", variant="", devices=2, device_kind="gpu", scenario="even", status="ok",
                global_batch=64, samples=256, epochs=4, losses=[1.0, 0.5, 0.4, 0.3],
                median_step_s=0.01, samples_per_s=6400.0)
    return SmokeRun(**{**base, **kw})


def planned(level: str, gpus: int = 0, **kw) -> set[tuple[str, str, int, str, int]]:
    return {(s.layer, s.variant, s.devices, s.scenario, s.global_batch)
            for s in plan_runs(SmokeOptions(level=level, **kw), gpu_count=gpus)}


def test_long_plan_covers_every_layer_variant_device_count_and_scenario_and_sweeps_the_batch():
    specs = plan_runs(SmokeOptions(level="long"), gpu_count=0)
    level = LEVELS["long"]
    main, *sweep = level.batch_sizes
    assert sweep, "the long level sweeps the global batch"
    assert {s.device_kind for s in specs} == {"cpu-virtual"}
    # a slope of 4+ points (the leak probe calls fit one epoch at a time: tests/test_smoke_leak.py)
    assert {s.epochs for s in specs if s.scenario != LEAK_SCENARIO} == {level.epochs} and level.epochs >= 5
    variants = {(row.name, v) for row in SMOKE_LAYERS.values() for v in row.variants}
    assert {(layer, v, d, sc, main) for layer, v in variants for d in (1, 2) for sc in SCENARIOS} <= planned("long")
    assert {(layer, v, d, "even", b) for layer, v in variants for d in (1, 2) for b in sweep} <= planned("long")
    # the sweep compares speed: the empty replica is the same hazard at any batch size
    assert not any(s.scenario != "even" and s.global_batch != main for s in specs)
    uneven = [s for s in specs if s.scenario == "uneven_final_batch"]
    assert all(s.samples == main * level.steps + 1 and s.global_batch == main for s in uneven)
    assert [s.index for s in specs] == list(range(len(specs)))


def test_standard_plan_keeps_every_layer_type_on_one_and_n_devices_and_runs_fewer():
    standard, long = planned("standard"), planned("long")
    specs = plan_runs(SmokeOptions(), gpu_count=0)
    assert SmokeOptions().level == "standard"
    assert {s.epochs for s in specs} == {LEVELS["standard"].epochs}
    assert LEVELS["standard"].epochs < LEVELS["long"].epochs
    assert standard < long  # the same trainings, a subset of them
    # every layer type is compared 1 vs N devices with batches that split evenly
    for layer in SMOKE_LAYERS:
        assert {d for (lay, _, d, sc, _) in standard if lay == layer and sc == "even"} == {1, 2}, layer
    # the uneven final batch runs where an empty replica can break the layer, on N devices only:
    # it is judged against the even run on the same devices
    uneven = {(lay, v, d) for (lay, v, d, sc, _) in standard if sc == "uneven_final_batch"}
    assert {lay for lay, _, _ in uneven} == {row.name for row in SMOKE_LAYERS.values() if row.empty_replica_sensitive}
    assert ("batchnorm", "plain", 2) in uneven and ("batchnorm", "sync", 2) in uneven
    assert {d for _, _, d in uneven} == {2}
    # trainings that would repeat another: cuDNN variants where there is no cuDNN, the 1-device
    # synchronized BatchNormalization (the plain one is its reference)
    assert not {(lay, v) for (lay, v, *_) in standard} & set(CUDNN_VARIANTS)
    assert ("batchnorm", "sync", 1, "even", 64) not in standard
    assert ("batchnorm", "plain", 1, "even", 64) in standard


def test_on_gpus_the_standard_level_keeps_the_cudnn_variants():
    on_gpus = planned("standard", gpus=4)
    for layer, variant in CUDNN_VARIANTS:
        assert {(d, sc) for (lay, v, d, sc, _) in on_gpus if (lay, v) == (layer, variant)} == {
            (1, "even"), (4, "even"), (4, "uneven_final_batch")}


def test_quick_and_unknown_levels_plan_no_training():
    with pytest.raises(PlanError, match="no smoke trainings at level 'quick'"):
        plan_runs(SmokeOptions(level="quick"), 0)
    with pytest.raises(PlanError, match="levels that train: standard, long"):
        plan_runs(SmokeOptions(level="huge"), 0)
    assert set(LEVELS) == {"quick", "standard", "long"} and not LEVELS["quick"].trains


def test_the_one_device_reference_is_shared_where_it_trains_the_same():
    plain1 = run(layer="batchnorm", variant="plain", devices=1, device_kind="cpu-virtual")
    sync2 = run(layer="batchnorm", variant="sync", device_kind="cpu-virtual", losses=[1.0, 0.5, 0.4, 0.3003])
    generic1 = run(layer="lstm", variant="generic", devices=1, device_kind="cpu-virtual")
    cudnn2 = run(layer="lstm", variant="cudnn", device_kind="cpu-virtual")
    compared = compare_with_single([plain1, sync2, generic1, cudnn2])
    assert compared[1].loss_vs_single == pytest.approx(0.0003 / 0.3)
    assert compared[3].loss_vs_single == 0.0
    # on GPUs the cuDNN kernel is a different training: no twin but its own
    gpu = compare_with_single([replace(generic1, device_kind="gpu"), replace(cudnn2, device_kind="gpu")])
    assert gpu[1].loss_vs_single is None
    # a different scenario is different data: the uneven run is not compared with the even one
    uneven2 = replace(sync2, scenario="uneven_final_batch", samples=257)
    assert compare_with_single([plain1, uneven2])[1].loss_vs_single is None


@pytest.mark.parametrize("gpus, option, expected", [
    (8, None, ("gpu", (1, 8))),
    (4, (1, 2, 4), ("gpu", (1, 2, 4))),
    (1, None, ("cpu-virtual", (1, 2))),
    (0, (1,), ("cpu-virtual", (1, 2))),
])
def test_device_counts(gpus, option, expected):
    specs = plan_runs(SmokeOptions(layers=("dense",), gpus=option, scenarios=("even",)), gpus)
    assert (specs[0].device_kind, tuple(s.devices for s in specs)) == expected


def test_plan_errors_name_the_option():
    with pytest.raises(PlanError, match="--gpus asks for 4 GPUs but TensorFlow sees 2"):
        plan_runs(SmokeOptions(gpus=(1, 4)), 2)
    with pytest.raises(PlanError, match="--virtual-devices N"):
        plan_runs(SmokeOptions(gpus=(1, 2)), 0)
    with pytest.raises(PlanError, match="unknown layer 'transformer'"):
        parse_layers("dense,transformer")
    with pytest.raises(PlanError, match="whole numbers"):
        parse_counts("1,two", "--gpus")
    assert parse_counts("1024,64,64", "--batch-sizes") == (64, 1024)


def test_slope_leaves_out_the_first_epoch():
    assert slope([100.0, 300.0, 310.0, 320.0]) == pytest.approx(10.0)
    assert slope([100.0, 300.0, 320.0]) == pytest.approx(20.0)
    # two epochs: the only growth is the first epoch's (tracing), not a slope
    assert slope([100.0, 300.0]) is None and slope([1.0]) is None


def test_child_result_becomes_a_run_with_statistics():
    data = {"index": 0, "status": "ok", "losses": [1.0, 20.0], "step_times_s": [0.01, 0.03, 0.02],
            "rss_mb": [100, 150, 200, 250], "framework": "keras 3.15.1", "duration_s": 1.5}
    r = run_from_child(spec(), data)
    assert r.status == "diverged"  # finite but 20x the first epoch
    assert r.median_step_s == pytest.approx(0.02) and r.samples_per_s == pytest.approx(3200)
    assert r.rss_slope_mb_per_epoch == pytest.approx(50.0)
    assert r.name == "smoke/dense/2xgpu/even/b64"


def test_comparison_with_the_single_device_twin():
    single = run(devices=1, samples_per_s=4000.0, losses=[1.0, 0.5, 0.4, 0.3])
    multi = run(devices=2, samples_per_s=2000.0, losses=[1.0, 0.5, 0.4, 0.31])
    _, compared = compare_with_single([single, multi])
    assert compared.speedup == pytest.approx(0.5) and compared.scaling_efficiency == pytest.approx(0.25)
    assert compared.loss_vs_single == pytest.approx(0.01 / 0.3)
    codes = {f.code: f for f in run_findings(compared, [single, compared])}
    assert codes["smoke.dense.poor-scaling"].severity is Severity.WARNING
    assert "larger global batch" in codes["smoke.dense.poor-scaling"].fix
    assert "prefetch" in codes["smoke.dense.poor-scaling"].fix
    assert codes["smoke.dense.loss-mismatch"].severity is Severity.WARNING


def test_simulated_devices_never_claim_poor_scaling():
    single = run(devices=1, device_kind="cpu-virtual", samples_per_s=4000.0)
    multi = run(devices=2, device_kind="cpu-virtual", samples_per_s=1000.0)
    compared = compare_with_single([single, multi])[1]
    findings = run_findings(compared, [single, compared])
    assert [f.code for f in findings] == ["smoke.dense.ok"]
    assert any("simulated on one CPU" in line for line in findings[0].evidence)


def test_unsynced_batchnorm_difference_is_info_and_uneven_nan_gets_the_fix():
    even1 = run(layer="batchnorm", variant="plain", devices=1)
    even2 = run(layer="batchnorm", variant="plain", losses=[1.0, 0.45, 0.4, 0.3])
    un1 = run(layer="batchnorm", variant="plain", devices=1, scenario="uneven_final_batch", samples=257)
    un2 = run(layer="batchnorm", variant="plain", scenario="uneven_final_batch", samples=257,
              status="nan", losses=[1.0, None, None, None], nonfinite_epoch=2, weights_finite=False)
    runs = compare_with_single([even1, even2, un1, un2])
    info = run_findings(runs[1], runs)
    assert [(f.code, f.severity) for f in info] == [("smoke.batchnorm.unsynced-statistics", Severity.INFO),
                                                     ("smoke.batchnorm.ok", Severity.OK)]
    nan = run_findings(runs[3], runs)[0]
    assert nan.code == "smoke.batchnorm.nan" and nan.severity is Severity.ERROR
    assert "drop_remainder=True" in nan.fix and "synchronized=True" in nan.fix
    assert "multiple of the global batch" in nan.fix
    assert "the last batch has 1 sample(s) for 2 replicas" in "\n".join(nan.evidence)


def test_hang_on_a_recurrent_layer_points_to_the_variant_that_passed():
    hung = run(layer="lstm", variant="cudnn", status="hang", stacks="Thread 0x1 (most recent call first):\n"
               "  File \"x.py\", line 3 in step", error_message="no progress")
    other = run(layer="lstm", variant="generic")
    f = run_findings(hung, [hung, other], stall_timeout_s=5)[0]
    assert f.code == "smoke.lstm.hang" and "no step finished for 5 s" in f.title
    assert f.fix == "The generic LSTM passed the same test: use `LSTM(..., use_cudnn=False)`."
    assert '  File "x.py", line 3 in step' in f.evidence


def test_memory_growth_and_replica_mismatch():
    leaky = run(rss_mb=[300.0, 348.0, 396.0, 444.0], rss_slope_mb_per_epoch=48.0,
                replicas_identical=False, replica_max_abs_diff=0.5)
    codes = [f.code for f in run_findings(leaky, [leaky])]
    assert codes[:2] == ["smoke.dense.replicas-differ", "smoke.dense.memory-growth"]


def test_outcomes_feed_every_renderer_and_junit_has_one_testcase_per_run():
    runs = [run(devices=1), run(status="crash", signal="SIGABRT", stderr_tail="Fatal Python error: Aborted")]
    outcomes = smoke_outcomes(compare_with_single(runs))
    assert [o.status for o in outcomes] == [CheckStatus.PASSED, CheckStatus.FAILED]
    from mgpu_doctor.model.report import REPORT_KIND, REPORT_SCHEMA_VERSION, Report
    from mgpu_doctor.model.snapshot import load_snapshot
    from tests.scenarios import path_of
    report = Report(REPORT_SCHEMA_VERSION, REPORT_KIND, "0", "smoke", "this machine", False,
                    load_snapshot(path_of("cpu-only-tensorflow")), outcomes, smoke_runs=runs)
    xml = junit.render(report, RenderOptions())
    assert xml.count("<testcase ") == 2
    assert 'name="smoke/dense/2xgpu/even/b64"' in xml and "SIGABRT" in xml
    data = json.loads(report.to_json())
    assert data["smoke_runs"][1]["status"] == "crash"
    assert from_jsonable(Report, data) == report
    assert layer_outcomes(runs) == {"dense": LayerOutcome.FAILED}
    assert layer_outcomes(runs[:1]) == {"dense": LayerOutcome.PASSED} and layer_outcomes([]) is None


def test_runs_round_trip_through_serde_with_missing_optional_fields():
    r = replace(run(), losses=[1.0, None])
    assert from_jsonable(SmokeRun, json.loads(json.dumps(to_jsonable(r)))) == r
    minimal = {"layer": "gru", "variant": "generic", "devices": 1, "device_kind": "gpu",
               "scenario": "even", "status": "ok"}
    assert from_jsonable(SmokeRun, minimal).losses == []


@pytest.mark.parametrize("argv, message", [
    (["smoke", "--layers", "dense,transformer"], "unknown layer 'transformer'"),
    (["smoke", "--stall-timeout", "0"], "--stall-timeout must be a number of seconds above 0"),
    (["smoke", "--batch-sizes", "64,abc"], "--batch-sizes takes comma-separated whole numbers"),
    (["smoke", "--gpus", "1,2"], "use --virtual-devices N"),
    (["smoke", "--virtual-devices", "1"], "--virtual-devices must be from 2 to 1024"),
    (["check", "--layers", "bogus"], "unknown layer 'bogus'"),
])
def test_smoke_usage_errors_are_one_line_with_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def _python_without_tensorflow() -> str | None:
    import shutil
    import subprocess
    path = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if path is None:
        return None
    probe = subprocess.run([path, "-c", "import importlib.util as u, sys; "
                            "sys.exit(u.find_spec('tensorflow') is not None)"], check=False)
    return path if probe.returncode == 0 else None


def test_smoke_without_tensorflow_is_skipped_with_the_reason(capsys):
    python = _python_without_tensorflow()
    if python is None:
        pytest.skip("no Python without TensorFlow on this machine")
    assert main(["smoke", "--python", python, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["status"]) for c in report["checks"]] == [("smoke", "skipped")]
    assert "TensorFlow is not installed" in report["checks"][0]["skip_reason"]
    assert report["smoke_runs"] == []


def test_a_smoke_finding_that_cites_a_thread_names_its_matrix_entry():
    """`smoke` and `matrix query` tell one story: the entry exists and carries the same source."""
    from mgpu_doctor.matrix.known_issues import load_matrix
    from mgpu_doctor.matrix.paths import bundled_matrix_dir
    from mgpu_doctor.smoke import rules

    entry = load_matrix(bundled_matrix_dir()).get(rules.COLLECTIVE_REUSE_ENTRY)
    assert entry is not None and rules.COLLECTIVE_REUSE_ISSUE in [s.url for s in entry.sources]
    failed = SmokeRun("dense", "", 2, "cpu-virtual", "even", "error", error_type="InvalidArgumentError",
                      error_message="Collective ops is aborted by: Shape mismatch in the collective instance 100")
    [finding] = rules.run_findings(failed, [failed])
    assert f"known issue: {entry.id} (`mgpu-doctor matrix show {entry.id}`)" in finding.evidence
    assert rules.COLLECTIVE_REUSE_ISSUE in finding.links


# --- a run killed by a signal: retried once, out of memory told apart ----------------------------

@pytest.mark.parametrize("deaths,status,final,retried", [
    # first attempt killed from outside, the retry trained: ok, with how the first one ended
    ([{"signal": "SIGKILL", "oom_kills": 0}], "ok", "ok", "died by SIGKILL"),
    # both attempts aborted: a crash of the layer
    ([{"signal": "SIGABRT", "oom_kills": 0}, {"signal": "SIGABRT", "oom_kills": 0}], "crash", "crash",
     "died by SIGABRT"),
    # the OOM killer both times (a SIGKILL while the kernel's count went up): out of memory
    ([{"signal": "SIGKILL", "oom_kills": 1}, {"signal": "SIGKILL", "oom_kills": 1}], "crash", "oom",
     "killed by the kernel's OOM killer (SIGKILL, out of memory)"),
    # a SIGKILL without an OOM kill counted is someone else's kill, not memory
    ([{"signal": "SIGKILL", "oom_kills": 0}, {"signal": "SIGKILL", "oom_kills": 0}], "crash", "crash",
     "died by SIGKILL"),
    # the count could not be read: no claim about memory
    ([{"signal": "SIGKILL", "oom_kills": None}, {"signal": "SIGKILL", "oom_kills": None}], "crash",
     "crash", "died by SIGKILL"),
    # an OOM kill counted but the run died by SIGSEGV: not the OOM killer's doing
    ([{"signal": "SIGSEGV", "oom_kills": 2}, {"signal": "SIGSEGV", "oom_kills": 1}], "crash", "crash",
     "died by SIGSEGV"),
    ([], "ok", "ok", ""),
])
def test_signal_deaths_are_classified(deaths, status, final, retried):
    data = {"status": status, "signal": deaths[-1]["signal"] if status == "crash" else "",
            "signal_deaths": deaths}
    got = run_from_child(spec(), data)
    assert (got.status, got.retried_after) == (final, retried)


def test_oom_run_blames_memory_not_the_layer_and_a_retried_run_says_how_the_first_ended():
    [oom] = run_findings(run(layer="gru", variant="cudnn", status="oom", signal="SIGKILL",
                             retried_after="killed by the kernel's OOM killer (SIGKILL, out of memory)"), [])
    assert oom.code == "smoke.gru.out-of-memory" and oom.severity is Severity.ERROR
    assert "says nothing about the layer" in oom.title and "use_cudnn" not in oom.fix
    assert "memory" in oom.fix
    outside = run_findings(run(retried_after="died by SIGKILL"), [])
    assert [f.code for f in outside] == ["smoke.dense.retried", "smoke.dense.ok"]
    assert outside[0].severity is Severity.INFO
    flaky = run_findings(run(retried_after="died by SIGSEGV"), [])
    assert flaky[0].code == "smoke.dense.intermittent-crash" and flaky[0].severity is Severity.WARNING
    [crash] = run_findings(run(status="crash", signal="SIGABRT", retried_after="died by SIGABRT"), [])
    assert crash.title.endswith("crashed with SIGABRT twice")
    assert "first attempt: died by SIGABRT; tried once more: crash (SIGABRT)" in crash.evidence


def test_an_oom_run_is_not_looked_up_as_a_layer_issue(scenario):
    from mgpu_doctor.smoke.judged import judged_outcomes

    [outcome] = judged_outcomes([run(status="oom", signal="SIGKILL")], scenario("mixed-models"))
    assert [f.code for f in outcome.findings] == ["smoke.dense.out-of-memory"]


def test_a_run_the_diagnosed_tensorflow_cannot_do_is_skipped_with_its_reason(scenario):
    """A skipped run (the child's "skipped" with a reason) is a skipped check: no error, no
    known-issue lookup, no "not in the matrix"; its N-device twin is not compared with it."""
    from mgpu_doctor.smoke.judged import judged_outcomes

    why = "MultiHeadAttention needs TensorFlow 2.4 (this is TensorFlow 2.3.4)"
    skipped = run_from_child(spec(layer="attention", devices=1), {"status": "skipped", "skip_reason": why})
    assert skipped.status == "skipped" and skipped.skip_reason == why
    other = run(layer="attention")
    runs = compare_with_single([skipped, other])
    [first, second] = judged_outcomes(runs, scenario("mixed-models"))
    assert first.status is CheckStatus.SKIPPED and first.skip_reason == why and first.findings == []
    assert second.status is CheckStatus.PASSED and runs[1].speedup is None
    assert from_jsonable(SmokeRun, json.loads(json.dumps(to_jsonable(skipped)))) == skipped
    # a status the child made up is still an error, and a reason without the status is dropped
    assert run_from_child(spec(), {"status": "unsupported"}).status == "error"
    assert run_from_child(spec(), {"status": "ok", "skip_reason": why}).skip_reason == ""


def _child_helpers():
    import importlib.util

    from mgpu_doctor.process.interpreter import CHILD_SCRIPTS

    loaded = importlib.util.spec_from_file_location("_mgpu_child_under_test", CHILD_SCRIPTS / "_mgpu_child.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


@pytest.mark.parametrize("layout,expected", [
    ("v2", 3),  # memory.events of the process's own cgroup
    ("v1", 5),  # memory.oom_control of the memory controller's cgroup
    ("v2-namespaced", 7),  # the path shown is not mounted: the nearest parent that is
    ("vmstat", 11),  # no cgroup file: the whole system's count
    ("none", None),
])
def test_oom_kill_count_reads_the_cgroup_then_the_system(tmp_path, layout, expected):
    helpers = _child_helpers()
    root, own, vmstat = tmp_path / "cgroup", tmp_path / "self-cgroup", tmp_path / "vmstat"
    if layout == "v2":
        own.write_text("0::/job/step\n")
        (root / "job" / "step").mkdir(parents=True)
        (root / "job" / "step" / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 3\noom_kill 3\n")
    elif layout == "v1":
        own.write_text("4:memory:/job\n1:cpu:/\n")
        (root / "memory" / "job").mkdir(parents=True)
        (root / "memory" / "job" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    elif layout == "v2-namespaced":
        own.write_text("0::/kubepods/pod1/ctr\n")
        root.mkdir()
        (root / "memory.events").write_text("oom_kill 7\n")
    elif layout == "vmstat":
        own.write_text("0::/\n")
        vmstat.write_text("pgfault 100\noom_kill 11\n")
    assert helpers.oom_kill_count(str(root), str(own), str(vmstat)) == expected


def test_a_failure_only_in_the_hazard_scenario_is_a_warning_and_of_the_common_case_an_error():
    from mgpu_doctor.smoke.rules import smoke_outcomes

    even1 = run(layer="batchnorm", variant="plain", devices=1)
    even2 = run(layer="batchnorm", variant="plain")
    un1 = run(layer="batchnorm", variant="plain", devices=1, scenario="uneven_final_batch", samples=257)
    un2 = run(layer="batchnorm", variant="plain", scenario="uneven_final_batch", samples=257,
              status="nan", losses=[1.0, None, None, None], nonfinite_epoch=2, weights_finite=False)
    outcome = {o.name: o for o in smoke_outcomes([even1, even2, un1, un2])}[un2.name]
    nan = outcome.findings[0]
    assert nan.code == "smoke.batchnorm.nan" and nan.severity is Severity.WARNING
    assert "drop_remainder=True" in nan.fix
    # the standard level trains no 1-device twin of the uneven scenario: the evidence names the
    # 1-device run of the even dataset instead
    standard = {o.name: o for o in smoke_outcomes([even1, even2, un2])}[un2.name].findings[0]
    assert standard.severity is Severity.WARNING
    assert "same model on 1 device, dataset a multiple of the global batch: ok" in standard.evidence
    # the same failure with the even dataset failing too is the common case: an error
    bad_even = replace(even2, status="nan", losses=[1.0, None, None, None])
    outcomes = {o.name: o for o in smoke_outcomes([even1, bad_even, un1, un2])}
    assert outcomes[un2.name].findings[0].severity is Severity.ERROR
    assert outcomes[bad_even.name].findings[0].severity is Severity.ERROR


def test_an_indivisible_global_batch_is_planned_even_and_reported_with_the_fix():
    from mgpu_doctor.smoke.plan import SmokeOptions, batch_splits, plan_runs
    from mgpu_doctor.smoke.rules import batch_split_outcomes

    options = SmokeOptions(layers=("dense",), virtual_devices=3, batch_sizes=(64,))
    specs = plan_runs(options, 0)
    assert {s.global_batch for s in specs} == {66} and {s.devices for s in specs} == {1, 3}
    assert {s.samples for s in specs if s.scenario == "even"} == {66 * 4}
    [split] = batch_splits(options, 0)
    assert (split.requested, split.planned, split.replicas, split.shares) == (64, 66, 3, "22/21/21")
    [outcome] = batch_split_outcomes([split])
    [finding] = outcome.findings
    assert finding.code == "smoke.batch-indivisible" and finding.severity is Severity.WARNING
    assert "multiple of the number of replicas" in finding.fix
    assert batch_splits(SmokeOptions(batch_sizes=(64,)), 0) == []  # 2 devices share 64 evenly
    # a level's own batch sizes are the doctor's choice, not the user's: planned even, no warning
    assert batch_splits(SmokeOptions(virtual_devices=3), 0) == []
    assert {s.global_batch for s in plan_runs(SmokeOptions(layers=("dense",), virtual_devices=3), 0)} == {66}


# ----------------------------------------------------------------------------- your model's differences and NaNs

def _user_pair(multi_losses: list[float], split_losses: list[float] | None, layers: list[str],
               skipped: str = "") -> list[SmokeRun]:
    single = run(layer="model", devices=1, device_kind="cpu-virtual", losses=[1.0, 0.5], split_replicas=3,
                 split_losses=split_losses or [], split_layers=layers, split_skipped=skipped)
    multi = run(layer="model", devices=3, device_kind="cpu-virtual", losses=multi_losses)
    return compare_with_single([single, multi])


def test_your_model_s_difference_is_judged_against_what_its_split_training_measured():
    # plain BatchNormalization: 1 vs 3 devices 8 %, the split training 7 %: expected, an info
    runs = _user_pair([1.0, 0.54], [1.0, 0.535], ["BatchNormalization x2"])
    assert runs[1].expected_loss_difference == pytest.approx(0.07) and runs[1].split_layers == ["BatchNormalization x2"]
    found = {f.code: f for f in run_findings(runs[1], runs)}
    assert "smoke.model.loss-mismatch" not in found
    info = found["smoke.model.expected-difference"]
    assert info.severity is Severity.INFO and "BatchNormalization x2" in info.title and "expected 7.00%" in info.title
    # beyond twice the measure: a warning that says what was expected
    found = {f.code: f for f in run_findings(*_user_pair([1.0, 0.62], [1.0, 0.535], ["BatchNormalization"])[1:],
                                             _user_pair([1.0, 0.62], [1.0, 0.535], ["BatchNormalization"]))}
    mismatch = found["smoke.model.loss-mismatch"]
    assert mismatch.severity is Severity.WARNING and "beyond the 7.00% its layers explain" in mismatch.title
    assert "(tolerance 14.0%)" in mismatch.title
    # nothing explains a difference (a layer that reads the replica's id): the floor of 2 %
    runs = _user_pair([1.0, 0.53], [1.0, 0.5], [])
    mismatch = {f.code: f for f in run_findings(runs[1], runs)}["smoke.model.loss-mismatch"]
    assert "(tolerance 2.0%)" in mismatch.title
    assert any(line.startswith("expected difference: 0.00%, no layer") for line in mismatch.evidence)
    # not measured: the plain tolerance, and why
    runs = _user_pair([1.0, 0.54], None, ["Dropout"], skipped="the model has its own train_step")
    mismatch = {f.code: f for f in run_findings(runs[1], runs)}["smoke.model.loss-mismatch"]
    assert "(tolerance 5.0%)" in mismatch.title and any("its own train_step" in e for e in mismatch.evidence)


def test_where_a_nan_came_from_is_read_from_the_child_and_said_in_the_finding():
    data = {"status": "nan", "losses": [1.2, None], "weights_finite": False, "nonfinite_epoch": 2,
            "nonfinite_origin": {"kind": "variable", "name": "batch_normalization/moving_mean", "value": "NaN",
                                 "epoch": 1, "step": 5, "replica": 1, "replicas": 2, "on_replicas": [1],
                                 "batch_shapes": [[1, 6], [0, 6]], "how": "watched",
                                 "also": ["batch_normalization/moving_variance", "dense/kernel"]}}
    nan_run = run_from_child(spec(layer="model", scenario="uneven_final_batch", samples=257), data)
    origin = nan_run.nonfinite_origin
    assert origin is not None and origin.replica_shape == [0, 6]
    assert from_jsonable(SmokeRun, json.loads(json.dumps(to_jsonable(nan_run)))) == nan_run
    [finding] = [f for f in run_findings(nan_run, [nan_run]) if f.code == "smoke.model.nan"]
    assert "NaN in layer batch_normalization's moving_mean, moving_variance on replica 1 in step 5 of epoch 1" \
        in finding.title, finding.title
    text = "\n".join(finding.evidence)
    assert "on replica 1 of 2, whose batch there was (0, 6) (no samples)" in text
    assert "also non-finite in that step: batch_normalization/moving_variance, dense/kernel" in text
    loss = replace(nan_run, nonfinite_origin=replace(origin, kind="loss", name="poisson_log", replica=0,
                                                     how="replayed", also=[]), scenario="even")
    [finding] = [f for f in run_findings(loss, [loss]) if f.code == "smoke.model.nan"]
    assert "NaN in the loss poisson_log on replica 0" in finding.title and "divide_no_nan" in finding.fix
    assert any("replaying that step" in line for line in finding.evidence)
    # no origin (an old results file): the finding as before
    plain = replace(nan_run, nonfinite_origin=None)
    assert "the loss became NaN" in next(f.title for f in run_findings(plain, [plain]) if f.code == "smoke.model.nan")
