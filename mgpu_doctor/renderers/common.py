"""Pieces several renderers share: the summary line and the device table."""

from __future__ import annotations

import re

from mgpu_doctor.model.device_row import DeviceRow
from mgpu_doctor.model.findings import MOSTLY_SKIPPED_CHECK, CheckStatus, ConditionGroup, Finding, Severity
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.training import TrainingProfile, shown
from mgpu_doctor.model.unavailable import Unavailable

# What must not reach a terminal as it is: C0 controls but tab and line feed (ESC starts the escape
# sequences that clear the screen or set the title; CR rewrites a line), DEL, the C1 controls (CSI
# \x9b starts a sequence on some terminals) and the bidirectional overrides (text shown reversed).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character and escape-sequence introducer written out (``\\x1b``,
    ``\\u202e``): a value from a snapshot (a GPU name, a version, an environment variable) is shown,
    never obeyed by the terminal. Linear in the text."""
    return text.translate(_ESCAPES) if _UNPRINTABLE.search(text) else text


_ESCAPES = {code: (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
            for code in [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0), 0x200e, 0x200f,
                         *range(0x202a, 0x202f), *range(0x2066, 0x206a)]}


DEVICE_HEADERS = {
    "nvml": "NVML", "cuda": "CUDA", "tensorflow": "TensorFlow", "name": "GPU",
    "memory": "Memory", "cc": "CC", "bus": "PCI bus", "mig": "MIG",
}


def summary_counts(report: Report) -> dict[str, int]:
    return {status.value: report.count(status) for status in CheckStatus}


DRIFT_HEADERS = ["Severity", "Code", "What", "Then", "Now"]


def drift_heading(report: Report) -> str:
    assert report.drift is not None
    changes = len(report.drift.rows)
    return (f"{changes} change(s) since the baseline {report.drift.baseline} "
            f"(written {report.drift.baseline_created})"
            if changes else f"Nothing changed since the baseline {report.drift.baseline} "
            f"({report.drift.compared} facts, GPUs, checks and smoke runs compared)")


def drift_rows(report: Report) -> list[list[str]]:
    """The drift table, most severe first (Markdown and HTML show it before anything else)."""
    if report.drift is None:
        return []
    rows = sorted(report.drift.rows, key=lambda r: r.severity, reverse=True)
    return [[r.severity.value, r.code, r.label, r.then, r.now] for r in rows]


def summary_line(report: Report) -> str:
    counts = summary_counts(report)
    parts = [f"{n} {name}" for name, n in counts.items() if n]
    total = len(report.checks)
    if not total:
        return "0 checks ran"
    worst = report.worst
    verdict = "no problems found" if worst <= Severity.INFO else f"worst: {worst.value}"
    acknowledged = len(report.acknowledged)
    if acknowledged:
        verdict += f"; {acknowledged} acknowledged (worst not acknowledged: {report.gate_worst.value})"
    if any(c.name == MOSTLY_SKIPPED_CHECK for c in report.checks):
        failed = sum(1 for c in report.checks if c.status is CheckStatus.SKIPPED and c.fact_failed)
        verdict += f"; NOT VERIFIED: {failed} checks skipped because facts could not be gathered"
    return f"{total} checks: {', '.join(parts)}; {verdict}"


# How an unknown cell reads in the device table, by its cause.
_DEVICE_CELL = {"hidden": "-", "order-unknown": "?", "missing": "missing"}


def device_cells(row: DeviceRow) -> dict[str, str]:
    """A device row as table cells (keys of DEVICE_HEADERS)."""
    return {
        "nvml": str(row.nvml_index),
        "cuda": "hidden" if _cause(row.cuda_ordinal) == "hidden" else _cell(row.cuda_ordinal),
        "tensorflow": _tf_cell(row.tensorflow_device),
        "name": _fitted_cell(row.name),
        "memory": f"{row.memory_total_bytes / 2**30:.1f} GiB",
        "cc": _cell(row.compute_capability),
        "bus": _fitted_cell(row.pci_bus_id),
        "mig": "n/a" if isinstance(row.mig_mode, Unavailable) else ("on" if row.mig_mode else "off"),
    }


# A cell longer than this is cut: a table pads every row to its widest cell, so one 64 KiB GPU name
# (a damaged snapshot) would make every row of thousands 64 KiB long.
MAX_CELL = 80


def _fitted_cell(text: str) -> str:
    return text if len(text) <= MAX_CELL else f"{text[:MAX_CELL - 1]}…"


def device_table_rows(report: Report) -> list[dict[str, str]]:
    return [device_cells(row) for row in report.devices]


def _cause(value: object) -> str:
    return value.cause if isinstance(value, Unavailable) else ""


def _cell(value: object) -> str:
    if isinstance(value, Unavailable):
        return _DEVICE_CELL.get(value.cause, "n/a")
    return str(value)


def _tf_cell(value: str | Unavailable) -> str:
    if not isinstance(value, Unavailable):
        return value
    if value.cause in _DEVICE_CELL:
        return _DEVICE_CELL[value.cause]
    return {"absent": "(no TF)", "failed": "(TF failed)"}.get(value.reason, "(not probed)")


def exit_code_for(report: Report, fail_on: Severity) -> int:
    """1 when a finding at or above ``fail_on`` is not covered by a current acknowledgement."""
    return 1 if report.gate_worst >= fail_on else 0


def acknowledgement_line(finding: Finding) -> str:
    ack = finding.acknowledgement
    if ack is None:
        return ""
    if ack.expired:
        return f"acknowledgement EXPIRED on {ack.expires} ({ack.source}): {ack.reason}"
    return f"acknowledged until {ack.expires} ({ack.source}): {ack.reason}"


FLEET_HEADERS = ["Fact", "Value", "Nodes"]


def fleet_difference_rows(report: Report, max_nodes: int | None = None) -> list[list[str]]:
    """[fact, value, nodes] per distinct value of every differing or incomplete fact; the
    fact's label only on its first line."""
    if report.fleet is None:
        return []
    from mgpu_doctor.model.fleet import describe, list_nodes  # a fleet's report only

    rows = []
    for row in report.fleet.differences:
        for i, (value, nodes) in enumerate(row.groups()):
            shown = list_nodes(nodes) if max_nodes is not None else ", ".join(nodes)
            rows.append([row.label if i == 0 else "", describe(value), shown])
    return rows


def fleet_heading(report: Report) -> str:
    fleet = report.fleet
    if fleet is None:
        return ""
    compared = sum(1 for r in fleet.rows if r.status != "unavailable")
    if not fleet.differences:
        return f"All {len(fleet.nodes)} nodes agree on the {compared} facts compared."
    return (f"{len(fleet.differences)} of {compared} facts compared differ or are unknown on some "
            f"of the {len(fleet.nodes)} nodes:")


# --- the training profile and the conditional findings grouped by what would decide them -----

# What a group of conditional known issues depends on, by the key of their deciding fact.
CONDITION_TOPICS = {"strategy": "your strategy", "usage": "how you train", "layers": "your layers",
                    "scenario": "the last batch", "workers": "the workers", "gpus": "the GPUs you train on"}
# Machine facts in words, where the key does not read as one.
FACT_NAMES = {"cpu_vendor": "CPU vendor", "cpu_arch": "CPU architecture",
              "peer_access": "GPU peer-to-peer access", "gpu_name": "GPU name",
              "compute_capability": "compute capability", "gpus": "GPU count",
              "reported": "a report on these versions"}


def training_parts(profile: TrainingProfile | None) -> tuple[list[str], list[str], list[str]]:
    """The declared facts ("usage save_model (pyproject.toml: ...)"), the observed ones, and the
    unknown keys."""
    profile = profile or TrainingProfile()
    declared = [f"{k} {shown(k, getattr(profile.declared, k))} ({profile.declared_from.get(k, 'declared')})"
                for k in profile.declared.known()]
    observed = [f"{k} {shown(k, getattr(profile.observed, k))} ({profile.observed_from.get(k, 'observed')})"
                for k in profile.observed.known()]
    return declared, observed, list(profile.unknown())


def training_line(profile: TrainingProfile | None) -> str:
    """One line: what the training profile declares, observes, and leaves unknown."""
    declared, observed, unknown = training_parts(profile)
    return (f"Training: declared: {'; '.join(declared) or 'nothing'}; observed: "
            f"{'; '.join(observed) or 'nothing'}; unknown: {', '.join(unknown) or 'nothing'}")


def condition_keys(groups: list[ConditionGroup]) -> list[tuple[str, list[ConditionGroup]]]:
    """The groups merged by the key of their fact (training facts by key, machine facts as one
    "" key), in the order of their first group."""
    merged: dict[str, list[ConditionGroup]] = {}
    for g in groups:
        merged.setdefault(g.condition.key if g.condition.training else "", []).append(g)
    return list(merged.items())


def condition_head(key: str, groups: list[ConditionGroup], more: bool) -> tuple[str, list[str]]:
    """A key's line before its values ("3 more apply depending on how you train: --usage") and the
    values with their counts ("save_model (2)", "several_models")."""
    n = sum(len(g.findings) for g in groups)
    more_word = " more" if more else ""
    if not key:
        facts: dict[str, int] = {}
        for g in groups:
            facts[g.condition.key] = facts.get(g.condition.key, 0) + len(g.findings)
        return (f"{n}{more_word} cannot be told without:",
                [FACT_NAMES.get(k, k) + (f" ({c})" if c > 1 else "") for k, c in facts.items()])
    verb = "applies" if n == 1 else "apply"
    option = groups[0].condition.hint.split(" ", 1)[0]
    values = [g.condition.hint.partition(" ")[2] + (f" ({len(g.findings)})" if len(g.findings) > 1 else "")
              for g in groups]
    return f"{n}{more_word} {verb} depending on {CONDITION_TOPICS.get(key, key)}: {option}", values


def group_line(g: ConditionGroup) -> str:
    """One group: "2 apply if you save the distributed model (...): --usage save_model"."""
    n = len(g.findings)
    if not g.condition.training:
        return f"{n} cannot be told {g.condition.phrase}"
    return f"{n} {'applies' if n == 1 else 'apply'} {g.condition.phrase}" + \
        (f": {g.condition.hint}" if g.condition.hint else "")
