"""`mgpu-doctor devices`: a fast GPU table from NVML alone."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mgpu_doctor.cli.output import out
from mgpu_doctor.environment.devices import device_rows
from mgpu_doctor.model.serde import to_jsonable
from mgpu_doctor.model.snapshot import KIND, SCHEMA_VERSION, Snapshot
from mgpu_doctor.model.unavailable import Unavailable, skipped
from mgpu_doctor.probes.envvars import gather_env
from mgpu_doctor.probes.host import gather_host
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.renderers.common import DEVICE_HEADERS, device_cells
from mgpu_doctor.renderers.tables import table


def add_parser(sub: Any) -> None:
    p = sub.add_parser("devices", help="list GPUs from NVML (fast, no TensorFlow)")
    p.add_argument("--format", choices=["human", "json"], default="human")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, nvml_module: Any = None) -> int:
    nvml = gather_nvml(nvml_module)
    nothing = skipped("not gathered by `devices`")
    snap = Snapshot(SCHEMA_VERSION, KIND, "", "", gather_host(), nothing, nothing, gather_env(),
                    nvml, nothing)
    rows = device_rows(snap)
    if args.format == "json":
        data = {"nvml": to_jsonable(nvml), "devices": to_jsonable(rows)}
        out(json.dumps(data, indent=2) + "\n")
        return 0
    if isinstance(nvml, Unavailable):
        print(f"No GPU: NVML {nvml.reason}: {nvml.detail.splitlines()[0] if nvml.detail else ''}")
        return 0
    if not rows:
        print("No GPU: NVML reports no GPU")
        return 0
    print(f"Driver {nvml.driver_version}, CUDA {nvml.cuda_driver_version}")
    cells = [device_cells(r) for r in rows]
    print(table([[c[k] for k in DEVICE_HEADERS] for c in cells], list(DEVICE_HEADERS.values())))
    if nvml.partial_error:
        print(f"Incomplete: {nvml.partial_error}")
    return 0
