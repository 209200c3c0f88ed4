"""README "Comparing the nodes of a cluster", Slurm: the TF_CONFIG recipe (one task per node,
TF_CONFIG built from the allocation) runs the multi-worker smoke across the two nodes."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest

from mgpu_doctor.multiworker.launcher import DIE_STEP_ENV, DIE_TASK_ENV
from tests.slurm.conftest import NODES
from tests.slurm.readme import tf_config_recipe

pytestmark = pytest.mark.slow
STALL_TIMEOUT_S = 15


def run_recipe(cluster, recipe: str, cwd: Path, env_prefix: str = "") -> tuple[int, str, dict]:
    """The recipe inside a two-node allocation; (exit status, stderr, each node's JSON report)."""
    done = cluster.run("ctl", f"{env_prefix}salloc --nodes=2 bash -c {shlex.quote(recipe)}",
                       cwd=cwd, timeout=240)
    reports = {}
    for node in NODES:
        text = (cwd / f"smoke-{node}.json").read_text()
        assert text, f"{node} wrote no report:\n{done.stderr}{cluster.logs()}"
        reports[node] = json.loads(text)
    return done.returncode, done.stderr, reports


def multiworker(report: dict) -> tuple[dict, dict]:
    (check,) = [c for c in report["checks"] if c["name"].startswith("smoke/multiworker/")]
    (run,) = report["multiworker_runs"]
    return check, run


def test_readme_tf_config_recipe_trains_tf_keras_on_both_nodes(slurm_cluster, tmp_path):
    recipe = tf_config_recipe()
    assert "TF_USE_LEGACY_KERAS=1 mgpu-doctor smoke" in recipe
    code, stderr, reports = run_recipe(slurm_cluster, recipe, tmp_path)
    assert code == 0, stderr
    weights = []
    for index, node in enumerate(NODES):
        check, run = multiworker(reports[node])
        assert check["name"] == f"smoke/multiworker/dense/task{index}-of-2", check
        assert check["status"] == "passed" and run["status"] == "ok", check
        (outcome,) = run["worker_outcomes"]
        assert outcome["task_index"] == index and outcome["keras"].startswith("tf_keras ")
        assert run["weights_identical"] is True and run["max_weight_difference"] == 0.0
        assert json.loads(run["tf_config"])["task"]["index"] == index
        weights.append(outcome["loss"])
    assert weights[0] == weights[1]  # one model, trained together: the same loss on both nodes


def test_readme_tf_config_recipe_with_keras3_reports_the_known_failure_on_both_nodes(slurm_cluster,
                                                                                        tmp_path):
    recipe = tf_config_recipe().replace("TF_USE_LEGACY_KERAS=1 mgpu-doctor", "mgpu-doctor")
    code, stderr, reports = run_recipe(slurm_cluster, recipe, tmp_path)
    assert code == 1, stderr
    assert stderr.count("srun: error: node") == 2 and "Exited with exit code 1" in stderr, stderr
    for node in NODES:
        check, _ = multiworker(reports[node])
        assert check["status"] == "failed"
        assert [f["code"] for f in check["findings"]] == ["multiworker.keras3-fit-unsupported"]


def test_a_node_killed_mid_run_fails_the_other_node_and_srun(slurm_cluster, tmp_path):
    """node2's worker is SIGKILLed at training step 3 (the doctor's test fault injection): node1
    learns it within --stall-timeout + a few seconds and both tasks exit 1 through srun."""
    recipe = tf_config_recipe().replace("mgpu-doctor smoke",
                                        f"mgpu-doctor smoke --stall-timeout {STALL_TIMEOUT_S}")
    started = time.monotonic()
    code, stderr, reports = run_recipe(slurm_cluster, recipe, tmp_path,
                                       env_prefix=f"{DIE_TASK_ENV}=1 {DIE_STEP_ENV}=3 ")
    took = time.monotonic() - started
    assert code == 1, stderr
    assert "node1: task 0: Exited with exit code 1" in stderr, stderr
    assert "node2: task 1: Exited with exit code 1" in stderr, stderr
    check2, run2 = multiworker(reports["node2"])
    assert [f["code"] for f in check2["findings"]][0] == "multiworker.dense.crash", check2
    check1, run1 = multiworker(reports["node1"])
    codes = [f["code"] for f in check1["findings"]]
    assert codes[0] in ("multiworker.dense.lost-peer", "multiworker.dense.error", "multiworker.dense.hang"), codes
    assert "task:1" in "\n".join(check1["findings"][0]["evidence"]), check1  # names the lost peer
    assert run1["duration_s"] < STALL_TIMEOUT_S + 10 and took < STALL_TIMEOUT_S + 30, (run1, took)
