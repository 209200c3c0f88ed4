"""`mgpu-doctor fleet`: compare the snapshots of the nodes of one job and find what differs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mgpu_doctor.cli.common import emit
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.options import add_output_options, add_redact_option, output_options, path_text
from mgpu_doctor.diagnose import fleet
from mgpu_doctor.model.redact import Identity, mask_snapshot, redact_snapshot
from mgpu_doctor.model.snapshot import Snapshot, SnapshotLoadError, load_snapshot


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fleet", help="compare the snapshots of several nodes (one per node)",
        description="Compare the snapshots of the nodes of one training job (`mgpu-doctor "
        "snapshot` on each node): print every fact that differs and what breaks or slows "
        "synchronous training because of it.")
    p.add_argument("snapshots", nargs="+", type=path_text, metavar="SNAPSHOT",
                   help="snapshot files, one per node (at least 2)")
    add_output_options(p)
    add_redact_option(p)
    p.set_defaults(run=run)


def load_all(paths: list[str], redact: bool = True) -> list[tuple[str, Snapshot]]:
    """Each node's snapshot, its credentials masked (written elsewhere, perhaps by another tool or
    with --no-redact) and, unless ``redact`` is off, redacted as `check --from` redacts: host names
    hashed (the same name the same hash, so the nodes are still told apart), user names, home
    directories and GPU UUIDs replaced, only allow-listed environment variables kept."""
    if len(paths) < 2:
        raise UsageError(f"fleet compares at least 2 snapshots (one per node), got {len(paths)}: "
                         "collect one with `mgpu-doctor snapshot` on each node")
    loaded = []
    for path in paths:
        try:
            snapshot = mask_snapshot(load_snapshot(Path(path)))
            loaded.append((path, redact_snapshot(snapshot, Identity.current()) if redact else snapshot))
        except SnapshotLoadError as exc:
            raise UsageError(str(exc)) from None
    return loaded


def run(args: argparse.Namespace) -> int:
    return emit(fleet(load_all(args.snapshots, args.redact)), output_options(args))
