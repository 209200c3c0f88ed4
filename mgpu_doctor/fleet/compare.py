"""Compare the snapshots of the nodes of one training job, fact by fact (pure functions).

Which facts are compared, and how each is read from a snapshot, is the explicit table
:data:`mgpu_doctor.fleet.facts.COMPARED_FACTS`; this module only lines the values up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TypeVar

from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.model.fleet import FactRow, Fleet, Node, RowStatus, Value, describe, list_nodes
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.record import record

T = TypeVar("T")
# The data (Node, FactRow, Fleet) lives in mgpu_doctor.model.fleet; named here for fleet's readers.
__all__ = ["Fact", "FactFamily", "FactRow", "Fleet", "Node", "Value", "build_fleet", "describe",
           "list_nodes", "node_names", "row_evidence"]


@record
class Fact:
    """One compared fact: a stable key, a label for people, and how to read it."""

    key: str
    label: str
    extract: Callable[[ResolvedEnvironment], Value]


@record
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
