"""pytest plugin (entry point ``pytest11``): inert unless a test or an option asks for it.

- ``@pytest.mark.mgpu(gpus=2, layers=["gru"], tensorflow=">=2.16")`` skips the test (fails it
  with ``--mgpu-strict``) when this environment cannot run it, saying why and what to do;
- ``--mgpu-check`` runs ``mgpu-doctor check --quick`` once per session and puts its summary in
  the pytest header;
- ``--mgpu-from FILE`` judges against a saved snapshot or report instead of this machine.

Nothing from mgpu-doctor is imported, and nothing is gathered, until one of those is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

MARKER_HELP = ("mgpu(gpus=1, layers=(), tensorflow=''): run only where mgpu-doctor finds at least `gpus` "
               "usable GPUs, these layers passing their smoke trainings and TensorFlow matching the spec")


class _Facts:
    """The snapshot and quick report, gathered at most once per session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._report: Any = None

    def report(self) -> Any:
        if self._report is None:
            from pathlib import Path

            from mgpu_doctor.checks import CHECKS
            from mgpu_doctor.diagnose import DiagnoseOptions, diagnose
            from mgpu_doctor.errors import BadInput

            source = self.config.getoption("mgpu_from")
            baseline = self.config.getoption("mgpu_baseline")
            options = DiagnoseOptions(command="pytest", checks=CHECKS, quick=not source,
                                      from_file=Path(source) if source else None, redact=False,
                                      baseline=Path(baseline) if baseline else None)
            try:
                # A saved report's smoke runs are replayed, so layers can be verified from it.
                self._report = diagnose(options).report
            except BadInput as exc:
                from_baseline = baseline and str(exc).startswith("--baseline")
                option = "--mgpu-baseline" if from_baseline else "--mgpu-from"
                raise pytest.UsageError(f"{option}: {str(exc).removeprefix('--baseline ')}") from None
        return self._report


_FACTS = pytest.StashKey[_Facts]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mgpu-doctor")
    group.addoption("--mgpu-check", action="store_true",
                    help="run `mgpu-doctor check --quick` once and show its summary in the header")
    group.addoption("--mgpu-strict", action="store_true",
                    help="fail, instead of skip, tests marked mgpu that this environment cannot run")
    group.addoption("--mgpu-from", metavar="FILE",
                    help="judge mgpu markers against this snapshot or report instead of this machine")
    group.addoption("--mgpu-baseline", metavar="FILE",
                    help="with --mgpu-check: also show what changed since this known-good snapshot or report")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[_FACTS] = _Facts(config)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not config.getoption("mgpu_check"):
        return None
    from mgpu_doctor.model.findings import Severity
    from mgpu_doctor.renderers.common import summary_line

    report = config.stash[_FACTS].report()
    lines = [f"mgpu-doctor ({report.source}, quick): {summary_line(report)}"]
    lines += [f"  {f.severity.value}: {f.title}" for f in report.findings if f.severity >= Severity.WARNING
              and not f.code.startswith("drift.")]
    if report.drift is not None:
        lines.append(f"mgpu-doctor drift since {report.drift.baseline}: {len(report.drift.rows)} change(s)")
        lines += [f"  {r.severity.value}: {r.code}: {r.label}: {r.then} -> {r.now}"
                  for r in report.drift.rows]
    return lines


_PROBLEMS = pytest.StashKey[str]()
_BAD_MARKER = pytest.StashKey[str]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("mgpu") is not None]
    if not marked:
        return  # no facts gathered, nothing imported
    report = config.stash[_FACTS].report()
    snapshot, runs = report.snapshot, report.smoke_runs
    for item in marked:
        marker = item.get_closest_marker("mgpu")
        assert marker is not None
        try:
            problems = unmet_requirements(marker.args, marker.kwargs, snapshot, runs)
        except ValueError as exc:
            item.stash[_BAD_MARKER] = f"@pytest.mark.mgpu: {exc}"
            continue
        if not problems:
            continue
        message = "mgpu-doctor: " + "; ".join(problems)
        item.stash[_PROBLEMS] = message
        if not config.getoption("mgpu_strict"):
            item.add_marker(pytest.mark.skip(reason=message))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Bad marker arguments, and unmet requirements under --mgpu-strict, fail the test itself."""
    for key in (_BAD_MARKER, _PROBLEMS):
        if key in item.stash:
            pytest.fail(item.stash[key], pytrace=False)


def unmet_requirements(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], snapshot: Any, smoke_runs: Any = None
) -> list[str]:
    """Each requirement of a marker that the snapshot (and smoke runs) do not meet, as 'title. Fix: fix'.

    Raises ValueError for marker arguments that do not parse.
    """
    from mgpu_doctor.checks.base import run_check
    from mgpu_doctor.environment.resolve import resolve
    from mgpu_doctor.gate.requirements import (
        Requirements,
        RequirementSyntaxError,
        layer_outcomes,
        parse_gpus,
        parse_layers,
        parse_tensorflow_spec,
        requirement_checks,
    )
    from mgpu_doctor.model.findings import Severity

    unknown = set(kwargs) - {"gpus", "layers", "tensorflow"}
    if args or unknown:
        raise ValueError(f"takes only gpus=, layers=, tensorflow= keywords "
                         f"(got {', '.join(map(repr, args)) or ', '.join(sorted(unknown))})")
    try:
        req = Requirements(
            gpus=parse_gpus(kwargs.get("gpus", 1)),
            tensorflow=parse_tensorflow_spec(kwargs["tensorflow"]) if kwargs.get("tensorflow") else "",
            layers=parse_layers(kwargs["layers"]) if kwargs.get("layers") else (),
        )
    except RequirementSyntaxError as exc:
        raise ValueError(str(exc)) from None
    problems = []
    env = resolve(snapshot)
    for check in requirement_checks(req, layer_outcomes(smoke_runs)):
        for f in run_check(check, env).findings:
            if f.severity >= Severity.ERROR:
                problems.append(f"{f.title}. Fix: {f.fix}" if f.fix else f.title)
    return problems
