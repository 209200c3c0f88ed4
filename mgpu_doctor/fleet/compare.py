"""Compare the snapshots of the nodes of one training job, fact by fact (pure functions).

Which facts are compared, and how each is read from a snapshot, is the explicit table
:data:`mgpu_doctor.fleet.facts.COMPARED_FACTS`; this module only lines the values up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable

Value = str | Unavailable
T = TypeVar("T")
RowStatus = Literal["same", "differs", "incomplete", "unavailable"]


@dataclass(frozen=True)
class Node:
    """One node of the fleet: its name (the snapshot's hostname), the file and the facts."""

    name: str
    source: str
    snapshot: Snapshot


@dataclass(frozen=True)
class Fact:
    """One compared fact: a stable key, a label for people, and how to read it."""

    key: str
    label: str
    extract: Callable[[ResolvedEnvironment], Value]


@dataclass(frozen=True)
class FactFamily:
    """Facts that come as a mapping (env vars, packages, libraries): one row per name.

    A name present on some nodes and not on others shows ``missing`` there (a real value:
    "not set" differs from "1"); the whole mapping being unavailable on a node makes every
    name unknown there.
    """

    key: str
    label: str
    extract: Callable[[ResolvedEnvironment], Mapping[str, str] | Unavailable]
    missing: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


def node_names(sources: list[tuple[str, Snapshot]]) -> list[str]:
    """A unique name per node: the hostname, else the file name; clashes get the file added."""
    base = [snap.host.hostname.strip() or _file_name(src) for src, snap in sources]
    counts = Counter(base)
    names = [f"{name} ({_file_name(src)})" if counts[name] > 1 else name
             for name, (src, _) in zip(base, sources, strict=True)]
    # Two files with the same name (dir-a/snap.json, dir-b/snap.json): fall back to the paths.
    if len(set(names)) < len(names):
        names = [f"{name} ({src})" if counts[name] > 1 else name
                 for name, (src, _) in zip(base, sources, strict=True)]
    return names


def build_fleet(sources: list[tuple[str, Snapshot]], facts: tuple[Fact | FactFamily, ...]) -> Fleet:
    """Line up every fact of ``facts`` over the snapshots (given as ``(file, snapshot)``)."""
    nodes = [Node(name, src, snap) for name, (src, snap) in zip(node_names(sources), sources, strict=True)]
    envs = {n.name: resolve(n.snapshot) for n in nodes}  # each node's versions, decided once
    rows: list[FactRow] = []
    for fact in facts:
        if isinstance(fact, Fact):
            values = {name: _safe(fact.extract, env) for name, env in envs.items()}
            rows.append(_row(fact.key, fact.label, values))
        else:
            rows.extend(_family_rows(fact, envs))
    return Fleet(nodes, rows)


def _family_rows(family: FactFamily, envs: dict[str, ResolvedEnvironment]) -> list[FactRow]:
    mappings = {name: _safe(family.extract, env) for name, env in envs.items()}
    names = sorted({k for m in mappings.values() if not isinstance(m, Unavailable) for k in m})
    rows = []
    for name in names:
        values: dict[str, Value] = {}
        for node, mapping in mappings.items():
            values[node] = mapping if isinstance(mapping, Unavailable) else mapping.get(name, family.missing)
        rows.append(_row(f"{family.key}.{name}", f"{family.label} {name}", values))
    return rows


def _row(key: str, label: str, values: dict[str, Value]) -> FactRow:
    known = {v for v in values.values() if isinstance(v, str)}
    unknown = any(isinstance(v, Unavailable) for v in values.values())
    status: RowStatus
    if len(known) > 1:
        status = "differs"
    elif not known:
        status = "unavailable"
    else:
        status = "incomplete" if unknown else "same"
    return FactRow(key, label, status, values)


def _safe(extract: Callable[[ResolvedEnvironment], T], env: ResolvedEnvironment) -> T | Unavailable:
    # The table is data anyone can extend: one broken extractor must not hide the others.
    try:
        return extract(env)
    except Exception as exc:
        return Unavailable("failed", f"reading this fact failed: {type(exc).__name__}: {exc}",
                           "extractor-error")


def _file_name(source: str) -> str:
    return source.rsplit("/", 1)[-1]


def row_evidence(row: FactRow) -> list[str]:
    """'label: value on node-a, node-b' lines, the most common value first."""
    return [f"{row.label}: {describe(value)} on {list_nodes(nodes)}" for value, nodes in row.groups()]
