"""``mgpu-doctor fleet``: compare the snapshots of the nodes of one training job.

:mod:`~mgpu_doctor.fleet.facts` lists what is compared, :mod:`~mgpu_doctor.fleet.compare`
lines it up, :mod:`~mgpu_doctor.fleet.checks` turns differences into findings.

May import: errors, record, process, model, environment, checks.
"""

from __future__ import annotations

from mgpu_doctor.fleet.compare import Fact, FactFamily, FactRow, Fleet, Node, build_fleet

__all__ = ["Fact", "FactFamily", "FactRow", "Fleet", "Node", "build_fleet"]
