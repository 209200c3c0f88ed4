"""The `snapshot-values` check: values no machine can have (a damaged or edited snapshot).

A negative size, count or duration, or a temperature below absolute zero, is not a fact about a
machine: a snapshot that holds one was damaged (cut and pasted, edited by hand, written by a
broken tool). The other checks would show it as a fact ("0.5 GiB of -80.0 GiB"); this one says the
snapshot is damaged and names every such field, so nobody acts on the rest unwarned.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.record import fields, is_record

CODES = ("snapshot.damaged",)
ABSOLUTE_ZERO_C = -273.15
# The few numbers that may be below 0: sysfs writes -1 for "no NUMA node".
_LOWEST = {"numa_node": -1, "temperature_c": ABSOLUTE_ZERO_C}
_SHOWN = 12  # fields listed in the evidence; the rest counted


def check_snapshot_values(snapshot: Snapshot) -> list[Finding]:
    impossible = list(_impossible(snapshot, "snapshot"))
    if not impossible:
        return []
    evidence = impossible[:_SHOWN]
    if len(impossible) > _SHOWN:
        evidence.append(f"... and {len(impossible) - _SHOWN} more")
    first = impossible[0].split(":", 1)[0]
    return [Finding(
        "snapshot.damaged", Severity.ERROR,
        f"The snapshot is damaged: {first} holds a value no machine has"
        + (f" ({len(impossible)} such fields)" if len(impossible) > 1 else ""),
        evidence,
        fix="Gather the snapshot again on the machine (`mgpu-doctor snapshot -o FILE`) and send the "
        "file as written, not edited or pasted; the other checks' findings from these values are "
        "not to be trusted.",
    )]


def _impossible(value: Any, path: str, name: str = "") -> Iterator[str]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        lowest = _LOWEST.get(name, 0)
        if isinstance(value, float) and math.isnan(value):
            yield f"{path}: {value} (not a number)"
        elif value < lowest:
            what = "below absolute zero" if name == "temperature_c" else "below 0"
            yield f"{path}: {value} ({what})"
        return
    if is_record(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _impossible(getattr(value, f.name), f"{path}.{f.name}", f.name)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _impossible(item, f"{path}[{i}]", name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _impossible(item, f"{path}.{key}", str(key))
