"""A fleet's compared facts, as a report holds them: the nodes, one row per fact with each node's
value, and how a value reads for people. ``fleet/`` decides which facts are compared and judges them."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record

Value = str | Unavailable
RowStatus = Literal["same", "differs", "incomplete", "unavailable"]


@record
class Node:
    """One node of the fleet: its name (the snapshot's hostname), the file and the facts."""

    name: str
    source: str
    snapshot: Snapshot


@record
class FactRow:
    """One compared fact across the fleet; ``values`` maps node name to value.

    ``status``: ``same`` (known and equal everywhere), ``differs`` (at least two known
    values), ``incomplete`` (equal where known, unknown on some nodes: cannot be compared
    there) or ``unavailable`` (known on no node).
    """

    key: str
    label: str
    status: RowStatus
    values: dict[str, Value]

    def groups(self) -> list[tuple[Value, list[str]]]:
        """Distinct values with the nodes holding each: the most common known value first,
        unknown values (per reason and detail) last."""
        by_value: dict[Value, list[str]] = {}
        for node, value in self.values.items():
            by_value.setdefault(value, []).append(node)
        return sorted(by_value.items(),
                      key=lambda kv: (isinstance(kv[0], Unavailable), -len(kv[1]), str(kv[0])))

    def majority(self) -> str | None:
        """The most common known value (ties: the first in sort order), None when unknown."""
        known = [v for v in self.values.values() if isinstance(v, str)]
        if not known:
            return None
        counts = Counter(known)
        return sorted(counts, key=lambda v: (-counts[v], v))[0]

    def nodes_not_on(self, value: str) -> list[str]:
        return [n for n, v in self.values.items() if isinstance(v, str) and v != value]


@record
class Fleet:
    """The nodes and every compared fact; rows in the order of the fact table."""

    nodes: list[Node]
    rows: list[FactRow]

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def row(self, key: str) -> FactRow | None:
        return next((r for r in self.rows if r.key == key), None)

    def rows_under(self, prefix: str) -> list[FactRow]:
        return [r for r in self.rows if r.key.startswith(prefix)]

    @property
    def differences(self) -> list[FactRow]:
        """Rows a person must look at: values that differ, or that are unknown somewhere."""
        return [r for r in self.rows if r.status in ("differs", "incomplete")]


MAX_NODES_LISTED = 8


def describe(value: Value) -> str:
    """A compared value for people: the value, or "unknown (reason: why)"."""
    if isinstance(value, Unavailable):
        detail = value.detail.strip().splitlines()[0] if value.detail.strip() else ""
        return f"unknown ({value.reason}{': ' + detail if detail else ''})"
    return value


def list_nodes(names: list[str]) -> str:
    if len(names) <= MAX_NODES_LISTED:
        return ", ".join(names)
    return ", ".join(names[:MAX_NODES_LISTED]) + f" and {len(names) - MAX_NODES_LISTED} more"
