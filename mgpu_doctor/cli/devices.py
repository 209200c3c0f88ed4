"""`mgpu-doctor devices`: a fast GPU table from NVML alone."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tabulate import tabulate

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.gpus import device_rows
from mgpu_doctor.probes.envvars import gather_env
from mgpu_doctor.probes.host import gather_host
from mgpu_doctor.probes.nvml import gather_nvml
from mgpu_doctor.reporters.common import DEVICE_HEADERS
from mgpu_doctor.serde import to_jsonable
from mgpu_doctor.snapshot import Snapshot


def add_parser(sub: Any) -> None:
    p = sub.add_parser("devices", help="list GPUs from NVML (fast, no TensorFlow)")
    p.add_argument("--format", choices=["human", "json"], default="human")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, nvml_module: Any = None) -> int:
    from mgpu_doctor.facts import skipped
    from mgpu_doctor.snapshot import KIND, SCHEMA_VERSION

    nvml = gather_nvml(nvml_module)
    nothing = skipped("not gathered by `devices`")
    snap = Snapshot(SCHEMA_VERSION, KIND, "", "", gather_host(), nothing, nothing, gather_env(),
                    nvml, nothing)
    try:
        rows = device_rows(snap)
    except CheckSkipped as exc:
        rows = []
        reason = str(exc)
    else:
        reason = "" if rows else "NVML reports no GPU"
    if args.format == "json":
        sys.stdout.write(json.dumps({"nvml": to_jsonable(nvml), "devices": rows}, indent=2) + "\n")
        return 0
    if not rows:
        print(f"No GPU: {reason}")
        return 0
    print(f"Driver {nvml.driver_version}, CUDA {nvml.cuda_driver_version}"  # type: ignore[union-attr]
          if rows else "")
    print(tabulate([[r[k] for k in DEVICE_HEADERS] for r in rows],
                   headers=list(DEVICE_HEADERS.values()), disable_numparse=True))
    return 0
