"""The figures of a thread or paste corpus for its dev split, its held-out split(s) and all of it (a held-out
set is never used to tune the doctor: its figures say whether a rule generalises; a later, fresh held-out set
carries its own split name and gets its own column)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = dict[str, Any]


def split_names(rows: list[Row]) -> list[str]:
    """"dev" and "heldout" first (always, even when empty), then any other split in the order rows name it."""
    names = ["dev", "heldout"]
    for row in rows:
        if row["split"] not in names:
            names.append(row["split"])
    return names


def by_split(rows: list[Row], figures: Callable[[list[Row]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {name: figures([r for r in rows if r["split"] == name]) for name in split_names(rows)}
    out["all"] = figures(rows)
    return out
