"""The smoke layer table is the only list of layers: every consumer follows it, and the child's
models (which cannot import the package) and the report schema are held equal to it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.gate.requirements import RequirementSyntaxError
from mgpu_doctor.gate.requirements import parse_layers as parse_required_layers
from mgpu_doctor.matrix import vocabulary
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.multiworker.suite import MultiWorkerPlan
from mgpu_doctor.smoke.known_issues import run_environment
from mgpu_doctor.smoke.layers import DATA_KINDS, SMOKE_LAYERS, SmokeLayer, layer_names, markdown_table
from mgpu_doctor.smoke.plan import PlanError, SmokeOptions, plan_runs
from mgpu_doctor.smoke.plan import parse_layers as parse_smoke_layers

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "mgpu_doctor" / "schemas" / "report.schema.json"


def child_models():
    """The child's model table, loaded as the child loads it: a standalone module."""
    path = ROOT / "mgpu_doctor" / "child_scripts" / "_smoke_models.py"
    spec = importlib.util.spec_from_file_location("_smoke_models_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_child_builds_a_model_for_each_row_on_the_data_the_row_names():
    child = child_models()
    assert {name: kind for name, (kind, _) in child.MODELS.items()} == {
        row.name: row.data for row in SMOKE_LAYERS.values()}
    assert set(child.DATA) == set(DATA_KINDS)


def test_every_row_is_well_formed_and_looked_up_under_words_the_matrix_knows():
    for row in SMOKE_LAYERS.values():
        assert row.data in DATA_KINDS, row.name
        assert not (row.cudnn and row.batch_statistics), f"{row.name}: two variant axes are not planned"
        for variant in row.variants:
            assert set(row.matrix_terms(variant)) <= set(vocabulary.LAYERS), (row.name, variant)


def test_the_report_schema_names_exactly_the_table_layers():
    defs = json.loads(SCHEMA.read_text())["$defs"]
    for name in ("smoke_run", "multiworker_run"):
        assert defs[name]["properties"]["layer"]["enum"] == list(layer_names()), (
            f"{SCHEMA.name} $defs.{name}.layer.enum differs from SMOKE_LAYERS in mgpu_doctor/smoke/layers.py")


def test_a_synchronized_batchnorm_run_is_looked_up_as_sync_batchnorm():
    env = Environment(versions={})
    sync = SmokeRun("batchnorm", "sync", 2, "gpu", "even", "nan")
    plain = SmokeRun("batchnorm", "plain", 2, "gpu", "even", "nan")
    assert run_environment(env, sync).layers == ("sync_batchnorm",)
    assert run_environment(env, plain).layers == ("batchnorm",)


def test_a_new_row_flows_through_the_plan_the_options_the_gate_and_the_matrix(monkeypatch, capsys):
    monkeypatch.setitem(SMOKE_LAYERS, "made_up", SmokeLayer("made_up", data="vector", recurrent=True))
    assert parse_smoke_layers("made_up") == ("made_up",)
    assert parse_required_layers("made_up") == ("made_up",)
    specs = plan_runs(SmokeOptions(layers=("made_up",)), gpu_count=0)
    # recurrent-like: the uneven final batch is planned for it at the standard level
    assert {(s.layer, s.variant, s.scenario) for s in specs} == {
        ("made_up", "", "even"), ("made_up", "", "uneven_final_batch")}
    assert "made_up" in {s.layer for s in plan_runs(SmokeOptions(), gpu_count=0)}
    assert MultiWorkerPlan(2, ("made_up",)).runs() == [("made_up", "", "env")]
    assert run_environment(Environment(versions={}), SmokeRun("made_up", "", 2, "gpu", "even", "nan")).layers == (
        "made_up",)
    with pytest.raises(SystemExit):
        main(["smoke", "--help"])
    assert "attention,made_up" in capsys.readouterr().out.replace("\n", "").replace(" ", "")


def test_a_layer_outside_the_table_is_refused_by_both_layer_options():
    with pytest.raises(PlanError, match="unknown layer 'made_up'.*known: dense"):
        parse_smoke_layers("made_up")
    with pytest.raises(RequirementSyntaxError, match="unknown layer 'made_up'.*known layers: dense"):
        parse_required_layers("made_up")
    assert markdown_table().count("\n| `") == len(SMOKE_LAYERS)


def test_both_layer_options_read_names_alike():
    assert parse_smoke_layers("GRU, Dense") == ("gru", "dense")
    assert parse_required_layers("GRU, Dense") == ("gru", "dense")
