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
