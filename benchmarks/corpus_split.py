"""The figures of a thread or paste corpus for its dev split, its held-out split and all of it (the
held-out third is never used to tune the doctor: its figures say whether a rule generalises)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = dict[str, Any]


def by_split(rows: list[Row], figures: Callable[[list[Row]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "dev": figures([r for r in rows if r["split"] == "dev"]),
        "heldout": figures([r for r in rows if r["split"] == "heldout"]),
        "all": figures(rows),
    }
