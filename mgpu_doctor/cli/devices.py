"""`mgpu-doctor devices`: a fast GPU table from NVML alone."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mgpu_doctor.cli.output import out
from mgpu_doctor.gathering import device_table
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.renderers.common import DEVICE_HEADERS, device_cells, printable
from mgpu_doctor.renderers.tables import table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("devices", help="list GPUs from NVML (fast, no TensorFlow)")
    p.add_argument("--format", choices=["human", "json"], default="human")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, nvml_module: Any = None) -> int:
    found = device_table(nvml_module)
    nvml, rows = found.nvml, found.rows
    if args.format == "json":
        data = {"nvml": to_jsonable(nvml), "devices": to_jsonable(rows)}
        out(json.dumps(data, indent=2) + "\n")
        return 0
    if isinstance(nvml, Unavailable):
        _show(f"No GPU: NVML {nvml.reason}: {nvml.detail.splitlines()[0] if nvml.detail else ''}")
        return 0
    if not rows:
        _show("No GPU: NVML reports no GPU")
        return 0
    _show(f"Driver {nvml.driver_version}, CUDA {nvml.cuda_driver_version}")
    cells = [device_cells(r) for r in rows]
    _show(table([[c[k] for k in DEVICE_HEADERS] for c in cells], list(DEVICE_HEADERS.values())))
    if nvml.partial_error:
        _show(f"Incomplete: {nvml.partial_error}")
    return 0


def _show(text: str) -> None:
    """A line of the table: what the driver says is shown, never obeyed by the terminal."""
    print(printable(text))
