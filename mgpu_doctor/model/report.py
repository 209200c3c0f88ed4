"""The report: the one result object (checks, findings, smoke runs, facts) that every renderer draws;
not to be confused with `mgpu-doctor report`, the bug report (`renderers/bug_report.py`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mgpu_doctor.model.device_row import DeviceRow
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity
from mgpu_doctor.model.serde import lazy_types, to_jsonable
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.record import field, record

if TYPE_CHECKING:
    from mgpu_doctor.model.drift import Drift
    from mgpu_doctor.model.fleet import Fleet
    from mgpu_doctor.model.hang import HangReading
    from mgpu_doctor.model.libraries import LibrariesView
    from mgpu_doctor.model.multiworker import MultiWorkerRun
    from mgpu_doctor.model.smoke_runs import SmokeRun

# Sections only `fleet`, `libs`, `check --baseline`, a smoke, a multi-worker smoke and `hang` fill:
# their types (modules of this package) are imported when a report is decoded (serde finds them
# through __getattr__), not on every run (`check --quick`).
LAZY_TYPES = {"Fleet": "mgpu_doctor.model.fleet", "LibrariesView": "mgpu_doctor.model.libraries",
              "Drift": "mgpu_doctor.model.drift", "MultiWorkerRun": "mgpu_doctor.model.multiworker",
              "SmokeRun": "mgpu_doctor.model.smoke_runs", "HangReading": "mgpu_doctor.model.hang"}


__getattr__ = lazy_types(__name__, LAZY_TYPES)


REPORT_SCHEMA_VERSION = 1
REPORT_KIND = "mgpu-doctor-report"


@record
class Report:
    """What was diagnosed and what the checks concluded.

    ``check`` diagnoses one machine: ``snapshot`` is set, ``fleet`` is None. ``fleet``
    compares nodes: ``fleet`` holds every node's snapshot and the compared facts, and
    ``snapshot`` is None.
    """

    schema_version: int
    kind: str
    tool_version: str
    command: str
    # "this machine", the file a snapshot was read from, "matrix query: ..." or "fleet of N nodes"
    source: str
    quick: bool
    # None for a `matrix query` (its facts are the query's) and a fleet (one snapshot per node).
    snapshot: Snapshot | None
    checks: list[CheckOutcome]
    notes: list[str] = field(default_factory=list)
    query: dict[str, str] = field(default_factory=dict)  # the facts a `matrix query` asked about
    fleet: Fleet | None = None
    # Smoke trainings (`smoke`, or `check` without --quick); their findings are in `checks` too.
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    # Multi-worker smoke trainings (`smoke --workers K` / `--tf-config`); their findings are in `checks`.
    multiworker_runs: list[MultiWorkerRun] = field(default_factory=list)
    # The --level that ran (quick, standard, long); "" where none applies (--from, fleet, matrix query).
    level: str = ""
    # The device table (NVML index, CUDA ordinal, TensorFlow device) of the machine diagnosed.
    devices: list[DeviceRow] = field(default_factory=list)
    # `libs`: every CUDA library, what TensorFlow was built for, what is in use, every copy found.
    libraries: LibrariesView | None = None
    # `check --baseline FILE`: what changed since a known-good run (its findings are in `checks` too).
    drift: Drift | None = None
    # How the user trains: declared (files, options, query terms) and observed facts; None: not
    # judged against one (fleet, libs before profiles existed).
    training: TrainingProfile | None = None
    # `hang`, `report --hang`: the running job's processes read while it hangs; the verdict is the
    # check `hang` in `checks`. None: no job was read.
    hang: HangReading | None = None

    @property
    def findings(self) -> list[Finding]:
        return [f for c in self.checks for f in c.findings if f.severity > Severity.OK]

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)

    @property
    def gate_worst(self) -> Severity:
        """The worst finding not covered by a current acknowledgement: what `--fail-on` looks at."""
        return max((f.severity for f in self.findings if f.gating), default=Severity.OK)

    @property
    def acknowledged(self) -> list[Finding]:
        return [f for f in self.findings if not f.gating]

    def count(self, status: CheckStatus) -> int:
        return sum(1 for c in self.checks if c.status is status)

    def to_json(self) -> str:
        return json.dumps(to_jsonable(self), indent=2) + "\n"


def new_report(
    command: str,
    source: str,
    checks: list[CheckOutcome],
    *,
    tool_version: str,
    snapshot: Snapshot | None = None,
    quick: bool = False,
    notes: list[str] | None = None,
    query: dict[str, str] | None = None,
    fleet: Fleet | None = None,
    smoke_runs: list[SmokeRun] | None = None,
    multiworker_runs: list[MultiWorkerRun] | None = None,
    devices: list[DeviceRow] | None = None,
    libraries: LibrariesView | None = None,
    level: str = "",
    drift: Drift | None = None,
    training: TrainingProfile | None = None,
    hang: HangReading | None = None,
) -> Report:
    """A report of this schema; a section not given is empty."""
    return Report(
        schema_version=REPORT_SCHEMA_VERSION, kind=REPORT_KIND, tool_version=tool_version,
        command=command, source=source, quick=quick, snapshot=snapshot, checks=checks,
        notes=list(notes or []), query=dict(query or {}), fleet=fleet, smoke_runs=list(smoke_runs or []),
        multiworker_runs=list(multiworker_runs or []), devices=list(devices or []), libraries=libraries,
        level=level, drift=drift, training=training, hang=hang,
    )
