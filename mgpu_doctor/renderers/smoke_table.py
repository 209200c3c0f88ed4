"""The smoke table, one row per training: the support report and the HTML report show it."""

from __future__ import annotations

from mgpu_doctor.model.smoke_runs import SmokeRun

SMOKE_HEADERS = ["Layer", "Devices", "Scenario", "Global batch", "Status", "Loss per epoch", "Step (ms)",
                 "Speedup", "Keras"]
SIMULATED_LINE = "Simulated on logical CPU devices: says nothing about GPUs or NCCL."


def smoke_rows(runs: list[SmokeRun]) -> list[list[str]]:
    """A row of cells (SMOKE_HEADERS) per run."""
    return [[_layer(r), f"{r.devices}x {r.device_kind}",
             r.scenario.replace("_", " "), f"{r.global_batch}", r.status,
             " ".join("nan" if v is None else f"{v:.4g}" for v in r.losses) or "-",
             f"{r.median_step_s * 1000:.1f}" if r.median_step_s is not None else "-",
             f"{r.speedup:.2f}x" if r.speedup is not None else "-",
             r.framework or "-"] for r in runs]


def _layer(run: SmokeRun) -> str:
    """The layer, and its model size where it is not the smoke's own (x1): "dense x4"."""
    return f"{run.layer_variant} x{run.model_size}" if run.model_size != 1 else run.layer_variant
