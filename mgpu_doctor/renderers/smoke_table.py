"""The smoke table, one row per training: the support report and the HTML report show it."""

from __future__ import annotations

from mgpu_doctor.smoke.model import SmokeRun

SMOKE_HEADERS = ["Layer", "Devices", "Scenario", "Global batch", "Status", "Loss per epoch", "Step (ms)",
                 "Speedup", "Keras"]
SIMULATED_LINE = "Simulated on logical CPU devices: says nothing about GPUs or NCCL."


def smoke_rows(runs: list[SmokeRun]) -> list[list[str]]:
    """A row of cells (SMOKE_HEADERS) per run."""
    return [[f"{r.layer}-{r.variant}" if r.variant else r.layer, f"{r.devices}x {r.device_kind}",
             r.scenario.replace("_", " "), f"{r.global_batch}", r.status,
             " ".join("nan" if v is None else f"{v:.4g}" for v in r.losses) or "-",
             f"{r.median_step_s * 1000:.1f}" if r.median_step_s is not None else "-",
             f"{r.speedup:.2f}x" if r.speedup is not None else "-",
             r.framework or "-"] for r in runs]
