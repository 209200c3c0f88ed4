"""Every finding code the doctor can emit, with what emits it: README's code table is made here.

The checks, gates and fleet checks declare their codes in their registries; the smoke
trainings' codes are listed here (``smoke/rules.py`` makes them). A test holds this table, the
codes the source makes and README's table in step (see CONTRIBUTING.md).
"""

from __future__ import annotations

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.checks.base import MOSTLY_SKIPPED_CODE, Scope
from mgpu_doctor.drift import compare as drift
from mgpu_doctor.fleet.checks import FLEET_CHECKS
from mgpu_doctor.gate.requirements import GATE_CODES
from mgpu_doctor.hang import verdict as hang
from mgpu_doctor.model.codes import RENAMED, crash_code
from mgpu_doctor.model.findings import MOSTLY_SKIPPED_CHECK
from mgpu_doctor.multiworker import findings as multiworker
from mgpu_doctor.pasted import findings as pasted
from mgpu_doctor.record import record
from mgpu_doctor.smoke import known_issues as smoke_matching
from mgpu_doctor.smoke import leak as leak_probe
from mgpu_doctor.training import code as user_code
from mgpu_doctor.training import observed as user_model

# What smoke/rules.py emits per run (LAYER: dense, lstm, ...).
SMOKE_CODES = (
    "smoke.LAYER.ok", "smoke.LAYER.hang", "smoke.LAYER.crash", "smoke.LAYER.error",
    "smoke.LAYER.out-of-memory", "smoke.LAYER.nan", "smoke.LAYER.diverged", "smoke.LAYER.replicas-differ",
    "smoke.LAYER.retried", "smoke.LAYER.intermittent-crash", "smoke.LAYER.loss-mismatch",
    "smoke.LAYER.expected-difference",
    "smoke.LAYER.uneven-final-batch", "smoke.LAYER.memory-growth", "smoke.LAYER.poor-scaling",
    "smoke.LAYER.save-failed", "smoke.LAYER.load-failed", "smoke.LAYER.reload-differs",
    "smoke.LAYER.format-unusable",
    "smoke.LAYER.resume-failed", "smoke.LAYER.input-bound", "smoke.LAYER.never-pays-off",
    "smoke.LAYER.pays-off", "smoke.LAYER.leak",
    "smoke.batchnorm.unsynced-statistics", "smoke.batch-indivisible", "smoke.scaling-map",
)


@record
class CodeRow:
    """One declared code (upper-case segments are placeholders) and what emits it."""

    code: str
    emitted_by: str
    renamed_from: tuple[str, ...] = ()


def declared_codes() -> list[CodeRow]:
    """Every declared code, once, in the order of the registries."""
    rows: list[tuple[str, str]] = []
    rows += [(code, f"`{c.name}`") for c in CHECKS for code in c.codes]
    rows += [(MOSTLY_SKIPPED_CODE, f"`{MOSTLY_SKIPPED_CHECK}` (most checks skipped)")]
    rows += [(crash_code("CHECK"), "any check that itself failed (a bug)")]
    rows += [(code, f"`{name}`") for name, codes in GATE_CODES.items() for code in codes]
    rows += [(code, "`--model`") for code in user_model.CODES]
    rows += [(code, "`--code PATH`, a paste's code blocks") for code in user_code.CODES]
    rows += [(code, "`smoke`") for code in SMOKE_CODES]
    rows += [(code, "`smoke` (looked up in the matrix)") for code in smoke_matching.CODES]
    rows += [(code, "`smoke --leak-probe`, `--level long` (looked up in the matrix)")
             for code in leak_probe.CODES]
    rows += [(code, "`smoke --workers`, `--tf-config`") for code in multiworker.CODES]
    rows += [(code, "`smoke --workers K --level long` (the resume test)")
             for code in multiworker.RESUME_CODES]
    rows += [(code, f"`fleet`: `{c.name}`") for c in FLEET_CHECKS for code in c.codes]
    rows += [(code, f"`check --from PASTE`: `{pasted.NAME}`") for code in pasted.CODES]
    rows += [(code, "`check --baseline FILE`: `drift`") for code in drift.CODES]
    rows += [(code, "`hang`, `report --hang`") for code in hang.CODES]
    emitters: dict[str, list[str]] = {}
    for code, by in rows:
        emitters.setdefault(code, [])
        if by not in emitters[code]:
            emitters[code].append(by)
    old = {new: tuple(o for o, n in RENAMED.items() if n == new) for new in set(RENAMED.values())}
    old[crash_code("CHECK")] = ("CHECK.crashed",)
    return [CodeRow(code, ", ".join(by), old.get(code, ())) for code, by in emitters.items()]


def all_declared() -> tuple[str, ...]:
    return tuple(r.code for r in declared_codes())


def markdown_table() -> str:
    """README's table of every code, sorted, with its former names."""
    lines = ["| code | emitted by | formerly |", "|---|---|---|"]
    for row in sorted(declared_codes(), key=lambda r: r.code):
        formerly = ", ".join(f"`{o}`" for o in row.renamed_from)
        lines.append(f"| `{row.code}` | {row.emitted_by} | {formerly} |")
    return "\n".join(lines) + "\n"



def check_reference() -> str:
    """The documentation's table of every registered check, in report order (docs/reference/checks.md)."""
    lines = ["| check | what it verifies | section | runs on | finding codes |", "|---|---|---|---|---|"]
    for check in CHECKS:
        versions_only = check.scope is Scope.VERSIONS
        where = "a machine and `matrix query`" if versions_only else "a machine (or its snapshot)"
        section = check.section.title if check.section is not None else ""
        codes = ", ".join(f"`{code}`" for code in check.codes)
        lines.append(f"| `{check.name}` | {check.title} | {section} | {where} | {codes} |")
    return "\n".join(lines) + "\n"
