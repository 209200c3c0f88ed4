"""What `smoke --model` on a healthy model of tests/user_models/model_kinds.py must end with, on
every TensorFlow: shared by tests/test_user_model.py (Keras 3) and tests/test_tf_versions.py."""

from __future__ import annotations

from pathlib import Path

USER_MODELS = Path(__file__).parent / "user_models"
MODEL_KINDS = USER_MODELS / "model_kinds.py"
TRACED = "MODEL_KINDS_TRACED"  # model_kinds.TRACED: where its train_step says it was traced
# The runs of `smoke --model` at the standard level: 1 vs 2 devices, the uneven last batch, the
# checkpoint round trip.
USER_MODEL_RUNS = {("even", 1), ("even", 2), ("uneven_final_batch", 2), ("checkpoint", 2)}


def trained_runs(report: dict, reload_fails_with: str = "") -> dict[tuple[str, int], dict]:
    """The user model's runs by (scenario, devices), after checking that the model was read and
    every run trained, with no error anywhere in the report (a warning may be a timing).

    ``reload_fails_with``: a real bug of that TensorFlow the checkpoint round trip meets: its reload
    fails (on some formats or device counts) with that text, the one error of the report."""
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["model"]["status"] == "passed", checks["model"]
    runs = {(r["scenario"], r["devices"]): r for r in report["smoke_runs"]}
    assert set(runs) == USER_MODEL_RUNS, sorted(runs)
    expected = {k: "load-failed" if reload_fails_with and k == ("checkpoint", 2) else "ok" for k in runs}
    assert {k: r["status"] for k, r in runs.items()} == expected, [
        (k, r["status"], r.get("error_message")) for k, r in runs.items()]
    severe = [(c["name"], f["code"], f["title"]) for c in report["checks"] for f in c["findings"]
              if f["severity"] in ("error", "crash")]
    if reload_fails_with:
        failed = [s for s in runs[("checkpoint", 2)]["checkpoint"] if not s["ok"] and not s["model_limit"]]
        assert failed and all(reload_fails_with in s["error"] for s in failed), failed
        assert [code for _, code, _ in severe] == ["smoke.model.load-failed"], severe
    else:
        assert not severe, severe
    return runs


def traced_in(path: Path) -> int:
    """How many processes traced the model's own train_step."""
    return len(set(path.read_text().split("\n")) - {""}) if path.exists() else 0


REPLICA_EFFECTS = "replica_effects"  # tests/user_models/replica_effects.py


def explained(function: str, devices: int, python: str, env: dict[str, str], scenarios: tuple[str, ...] = ("even",),
              data: str = f"{REPLICA_EFFECTS}:data", skip_single: bool = False) -> tuple[list, dict[str, object]]:
    """The runs of `smoke --model replica_effects:FUNCTION` in ``scenarios`` on 1 and ``devices``
    virtual CPU devices (compared), and their findings by code (the last of each code)."""
    from mgpu_doctor.smoke.plan import SmokeOptions, plan_runs
    from mgpu_doctor.smoke.rules import compare_with_single, smoke_outcomes
    from mgpu_doctor.smoke.runner import run_suite

    options = SmokeOptions(user_model=f"{REPLICA_EFFECTS}:{function}", user_data=data, model_path=str(USER_MODELS),
                           stock_layers=False, scenarios=scenarios, virtual_devices=devices)
    specs = [s for s in plan_runs(options, 0) if not (skip_single and s.devices == 1)]
    child = {**env, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    child.pop("TF2_BEHAVIOR", None)
    runs = compare_with_single(run_suite(specs, python=python, stall_timeout_s=300, env=child).runs)
    return runs, {f.code: f for o in smoke_outcomes(runs) for f in o.findings}


def check_expected_difference(python: str, env: dict[str, str]) -> None:
    """Plain BatchNormalization on 3 devices: a difference its 1-device split training measures, an info;
    a layer that reads the replica's id: a warning whose evidence says nothing explains it."""
    from pytest import approx

    (single, multi), found = explained("batchnorm", 3, python, env)
    assert single.status == multi.status == "ok", (single, multi)
    assert single.split_replicas == 3 and single.split_layers == ["BatchNormalization x2"], single
    # the split training is what the 3 replicas train: the same losses
    assert single.split_losses == approx(multi.losses, rel=1e-4)
    assert multi.loss_vs_single > 0.02 and multi.expected_loss_difference == approx(multi.loss_vs_single, rel=1e-3)
    assert "smoke.model.loss-mismatch" not in found
    assert found["smoke.model.expected-difference"].severity.value == "info"
    (single, multi), found = explained("replica_dependent", 3, python, env)
    assert single.split_layers == [] and single.split_losses == approx(single.losses, rel=1e-5)
    mismatch = found["smoke.model.loss-mismatch"]
    assert mismatch.severity.value == "warning" and multi.loss_vs_single > 0.1
    assert any(line.startswith("expected difference: 0.00%, no layer") for line in mismatch.evidence), mismatch


def check_loss_nan_located(python: str, env: dict[str, str]):
    """A custom loss's NaN (replica_effects.log_loss on 2 devices) is located in the loss, with its
    replica, step and batch; returns the findings by code for what else a caller checks."""
    [multi], found = explained("log_loss", 2, python, env, skip_single=True)
    origin = multi.nonfinite_origin
    assert multi.status == "nan" and origin is not None, multi
    assert (origin.kind, origin.name, origin.replica, origin.how) == ("loss", "poisson_log", 0, "replayed"), origin
    assert (origin.epoch, origin.step, origin.batch_shapes) == (1, 1, [[32, 6], [32, 6]])
    nan = found["smoke.model.nan"]
    assert "NaN in the loss poisson_log on replica 0 in step 1 of epoch 1" in nan.title, nan.title
    assert "replica 0 of 2, whose batch there was (32, 6)" in "\n".join(nan.evidence)
    return found
