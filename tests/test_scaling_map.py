"""The scaling map and the input-bound probe: plan, pure rules and charts (no TensorFlow)."""

from __future__ import annotations

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.model.codes import canonical
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.record import replace
from mgpu_doctor.renderers.charts import input_charts, loss_charts, scaling_charts
from mgpu_doctor.renderers.smoke_table import smoke_rows
from mgpu_doctor.smoke.input_bound import input_bound
from mgpu_doctor.smoke.plan import LEVELS, SmokeOptions, plan_runs
from mgpu_doctor.smoke.rules import compare_with_single, run_findings, single_twin, smoke_outcomes
from mgpu_doctor.smoke.scaling_map import curves


def run(**kw) -> SmokeRun:
    base = dict(layer="dense", variant="", devices=2, device_kind="gpu", scenario="even", status="ok",
                global_batch=64, samples=256, epochs=4, losses=[1.0, 0.5, 0.4, 0.3],
                median_step_s=0.01, samples_per_s=6400.0)
    return SmokeRun(**{**base, **kw})


def grid(speedups: dict[tuple[int, int], float], device_kind: str = "gpu", layer: str = "dense") -> list[SmokeRun]:
    """1-device runs at 1000 samples/s and N-device runs at ``speedup`` times that, per (batch, size)."""
    runs = []
    for (batch, size), speedup in speedups.items():
        runs.append(run(layer=layer, devices=1, global_batch=batch, model_size=size, samples_per_s=1000.0,
                        device_kind=device_kind, parameters=100 * size))
        runs.append(run(layer=layer, devices=2, global_batch=batch, model_size=size,
                        samples_per_s=1000.0 * speedup, device_kind=device_kind, parameters=100 * size))
    return compare_with_single(runs)


def scaling_map(runs: list[SmokeRun]):
    return next(o for o in smoke_outcomes(runs) if o.name == "smoke/scaling-map")


def test_the_map_says_from_which_batch_n_gpus_pay_off_at_each_model_size():
    runs = grid({(64, 1): 0.5, (256, 1): 0.98, (1024, 1): 1.43,
                 (64, 4): 0.9, (256, 4): 1.2, (1024, 4): 1.8})
    outcome = scaling_map(runs)
    codes = {f.code: f for f in outcome.findings}
    table = codes["smoke.scaling-map"]
    assert table.severity is Severity.INFO and "simulated" not in table.title
    assert table.evidence == [
        "dense, 2 devices, size x1, 100 parameters: batch 64: 0.50x, batch 256: 0.98x, batch 1024: 1.43x",
        "dense, 2 devices, size x4, 400 parameters: batch 64: 0.90x, batch 256: 1.20x, batch 1024: 1.80x"]
    pays = codes["smoke.dense.pays-off"]
    assert pays.severity is Severity.INFO
    assert "size x1: from global batch 1024; size x4: from global batch 256" in pays.title
    assert outcome.status is CheckStatus.INFO


def test_a_dip_above_the_threshold_moves_the_threshold_up():
    curve = curves(grid({(64, 1): 1.2, (256, 1): 0.9, (1024, 1): 1.1}))[0]
    assert curve.pays_off_from(1) == 1024
    assert curves(grid({(64, 1): 1.2, (256, 1): 1.3, (1024, 1): 0.9}))[0].pays_off_from(1) is None


def test_n_gpus_that_never_pay_off_are_a_warning_with_the_best_point_and_what_to_measure_next():
    runs = grid({(64, 1): 0.4, (256, 1): 0.7, (64, 16): 0.6, (256, 16): 0.93})
    outcome = scaling_map(runs)
    never = next(f for f in outcome.findings if f.code == "smoke.dense.never-pays-off")
    assert never.severity is Severity.WARNING and outcome.status is CheckStatus.WARNING
    assert "2 GPUs never beat 1 in the measured range (global batch 64-256, model size x1-x16; " \
           "best 0.93x at batch 256, size x16)" in never.title
    assert "--batch-sizes 256,1024 --model-sizes 16,64" in never.fix
    # the map judges speed: the runs on it draw no poor-scaling warning of their own
    slow = next(r for r in runs if r.devices == 2 and r.global_batch == 64 and r.model_size == 1)
    assert not [f for f in run_findings(slow, runs) if f.code.endswith("poor-scaling")]
    lone = compare_with_single([run(devices=1, samples_per_s=1000.0), run(samples_per_s=500.0)])
    assert [f.code for f in run_findings(lone[1], lone)].count("smoke.dense.poor-scaling") == 1


def test_on_simulated_devices_the_map_is_only_information():
    runs = grid({(64, 1): 0.4, (256, 1): 0.7, (64, 4): 0.5}, device_kind="cpu-virtual")
    outcome = scaling_map(runs)
    assert [f.code for f in outcome.findings] == ["smoke.scaling-map"]
    assert "simulated on CPU" in outcome.findings[0].title and outcome.status is CheckStatus.INFO


def test_one_cell_per_layer_makes_no_map_and_a_failed_cell_is_named():
    assert all(o.name != "smoke/scaling-map" for o in smoke_outcomes(grid({(64, 1): 0.5})))
    runs = [replace(r, status="crash", samples_per_s=None) if (r.devices, r.global_batch) == (1, 64) else r
            for r in grid({(64, 1): 0.5, (256, 1): 1.5})]
    outcome = scaling_map(compare_with_single([replace(r, speedup=None) for r in runs]))
    assert "batch 64: failed, batch 256: 1.50x" in outcome.findings[0].evidence[0]


def test_the_twin_is_of_the_same_model_size():
    runs = [run(devices=1, model_size=1, samples_per_s=1000.0), run(devices=1, model_size=4, samples_per_s=200.0),
            run(devices=2, model_size=4, samples_per_s=300.0)]
    assert single_twin(runs[2], runs) is runs[1]
    assert compare_with_single(runs)[2].speedup == pytest.approx(1.5)


def test_the_charts_draw_one_speedup_and_one_efficiency_chart_per_model_size():
    charts = scaling_charts(grid({(64, 1): 0.5, (256, 1): 1.2, (64, 4): 0.8, (256, 4): 1.6}))
    assert [c.key for c in charts] == ["scaling-speedup-x1", "scaling-efficiency-x1",
                                       "scaling-speedup-x4", "scaling-efficiency-x4"]
    assert "model size x4" in charts[2].title and "Model size x4: dense 400 parameters." in charts[2].note
    assert charts[2].series[0].values == (0.8, 1.6)
    assert [row[0] for row in smoke_rows(grid({(64, 4): 0.8}))] == ["dense x4", "dense x4"]
    # one model size: the charts carry no size (as before model sizes existed)
    assert [c.key for c in scaling_charts(grid({(64, 1): 0.5, (256, 1): 1.2}))] == [
        "scaling-speedup", "scaling-efficiency"]


def test_the_long_level_maps_its_map_layers_over_model_sizes_and_the_option_every_layer():
    long = plan_runs(SmokeOptions(level="long"), gpu_count=0)
    sized = {(s.layer, s.model_size) for s in long}
    level = LEVELS["long"]
    assert {(layer, size) for layer in level.map_layers for size in level.model_sizes} <= sized
    assert {s.model_size for s in long if s.layer not in level.map_layers} == {1}
    # every scenario runs at the first size and batch; the other cells compare speed (even split)
    assert {s.scenario for s in long if s.model_size != 1} == {"even"}
    cells = {(s.global_batch, s.model_size) for s in long if s.layer == "dense" and s.devices == 2}
    assert cells == {(b, m) for b in level.batch_sizes for m in level.model_sizes}
    asked = plan_runs(SmokeOptions(layers=("lstm", "dense"), model_sizes=(2, 8)), gpu_count=0)
    assert {(s.layer, s.model_size) for s in asked} == {(lay, m) for lay in ("lstm", "dense") for m in (2, 8)}
    assert {s.model_size for s in asked if s.scenario != "even"} == {2}


def test_the_input_probe_runs_once_per_probed_layer_on_the_n_device_run():
    standard = [s for s in plan_runs(SmokeOptions(), gpu_count=0) if s.input_probe]
    assert [(s.layer, s.devices, s.scenario, s.global_batch) for s in standard] == [("dense", 2, "even", 64)]
    only_lstm = [s for s in plan_runs(SmokeOptions(layers=("lstm",)), gpu_count=0) if s.input_probe]
    assert [(s.layer, s.devices) for s in only_lstm] == [("lstm", 2)]
    long = {s.layer for s in plan_runs(SmokeOptions(level="long"), gpu_count=4) if s.input_probe}
    assert long == set(SmokeOptions(level="long").planned_layers)


def test_input_bound_is_a_pipeline_slower_than_the_devices_consume():
    bound = run(input_samples_per_s=2000.0, compute_samples_per_s=20000.0, samples_per_s=1900.0,
                device_kind="cpu-virtual")
    finding = next(f for f in run_findings(bound, [bound]) if f.code == "smoke.dense.input-bound")
    assert finding.severity is Severity.WARNING
    assert "2,000 samples/s delivered, 20,000 consumed" in finding.title
    assert "the devices would wait for input about 90% of every step" in finding.evidence
    assert any("GPUs consume faster" in e for e in finding.evidence)
    for fix in ("prefetch(tf.data.AUTOTUNE)", "cache()", "num_parallel_calls", "interleave", "host CPUs"):
        assert fix in finding.fix
    fed = run(input_samples_per_s=150000.0, compute_samples_per_s=20000.0)
    assert not input_bound(fed) and not any(f.code.endswith("input-bound") for f in run_findings(fed, [fed]))
    ok = next(f for f in run_findings(fed, [fed]) if f.code == "smoke.dense.ok")
    assert "input pipeline alone (nothing training): 150,000 samples/s" in ok.evidence
    assert not input_bound(run(status="nan", input_samples_per_s=1.0, compute_samples_per_s=2.0))
    assert not input_bound(run(input_samples_per_s=None, compute_samples_per_s=2.0))


def test_the_old_sweep_code_still_names_the_map():
    assert canonical("smoke.batch-size-sweep") == "smoke.scaling-map"


@pytest.mark.parametrize("argv, message", [
    (["smoke", "--model-sizes", "0"], "--model-sizes takes numbers from 1 to 256, got '0'"),
    (["smoke", "--model-sizes", "x4"], "--model-sizes takes comma-separated whole numbers, got 'x4'"),
    (["smoke", "--workers", "2", "--model-sizes", "4"], "--model-sizes applies to the single-host smoke"),
])
def test_model_size_usage_errors_are_one_line_with_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_per_epoch_charts_keep_model_sizes_apart():
    runs = grid({(64, 1): 0.5, (64, 4): 0.8})
    charts = {c.key: c for c in loss_charts(runs)}
    assert set(charts) == {"loss-dense-b64", "loss-dense-b64-w4"}
    assert [s.name for s in charts["loss-dense-b64-w4"].series] == ["1 device, even", "2 devices, even"]
    assert charts["loss-dense-b64-w4"].title.endswith("global batch 64, model size x4")


def test_the_input_chart_shows_how_long_the_devices_wait_for_each_probed_run():
    fed = run(input_samples_per_s=40000.0, compute_samples_per_s=20000.0, device_kind="cpu-virtual")
    starved = run(layer="lstm", input_samples_per_s=2000.0, compute_samples_per_s=20000.0,
                  device_kind="cpu-virtual")
    (chart,) = input_charts([fed, starved, run()])
    assert chart.group == "input" and chart.categories == ("dense: pipeline 2x", "lstm: pipeline 0.1x")
    assert chart.series[0].values == (0.0, 90.0)
    assert "simulated" in chart.title and "Below 1x the devices wait" in chart.note
    assert input_charts([run()]) == []


def test_a_long_note_wraps_inside_the_svg_chart():
    import xml.etree.ElementTree as ET

    from mgpu_doctor.renderers.svg import WIDTH, render_svg

    chart = scaling_charts(grid({(64, 1): 0.5, (256, 1): 1.2, (64, 4): 0.8, (256, 4): 1.6},
                                device_kind="cpu-virtual"))[2]
    assert len(chart.note) > 120
    root = ET.fromstring(render_svg(chart))
    notes = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("font-style") == "italic"]
    assert len(notes) >= 2 and " ".join(notes) == chart.note
    assert all(len(line) * 6.6 < WIDTH - 20 for line in notes)
