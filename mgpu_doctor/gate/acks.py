"""The acknowledge file: findings a team knows about and accepts, each with a reason and an expiry.

```toml
[[acknowledge]]
code = "gpu.pcie-width-degraded"  # a finding code, or: known_issue = "<known-issue id>"
reason = "GPU 3 riser replacement ordered (INFRA-1234)"
expires = 2026-12-31              # a TOML date (or "2026-12-31"); holds through that day
```

Acknowledged findings are still reported, marked with the reason, but do not fail the gate.
An expired acknowledgement fails it again. A code renamed since the file was written (see
:mod:`mgpu_doctor.model.codes`) still matches, and the report says its new name; so does a known
issue merged into another entry (its ``replaces``), named by its id or in any code that carries
one (``known-issue.ID``, ``smoke.known-issue.ID``, ``hang.known-issue.ID``, ...): the
acknowledgement holds for that entry.
Every problem in the file is one line naming the file, the entry and the field.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mgpu_doctor.matrix.toml_files import TOMLDecodeError, load_toml
from mgpu_doctor.model.codes import canonical, known_issue_of
from mgpu_doctor.model.findings import Acknowledgement, CheckOutcome, Finding
from mgpu_doctor.process.inputs import InputError
from mgpu_doctor.record import record, replace

TABLE = "acknowledge"
TRAINING_TABLE = "training"  # the training profile (mgpu_doctor.training.declared) shares the file
ENTRY_KEYS = ("code", "known_issue", "reason", "expires")
# Findings of the `known-issues` check carry the issue id after this prefix in their code.
KNOWN_ISSUE_CODE_PREFIX = "known-issue."


class AckFileError(ValueError):
    """The acknowledge file is unreadable or has a bad entry; the message is one line."""


@record
class AckEntry:
    code: str  # "" when it names a known issue
    known_issue: str  # "" when it names a finding code
    reason: str
    expires: _dt.date
    source: str  # "FILE: acknowledge[N]"

    def matches(self, finding: Finding, replaced: Mapping[str, str] | None = None) -> bool:
        """Whether it names this finding; ``replaced``: known-issue ids merged into another entry,
        with the entry each became (an acknowledgement of the old id holds for that entry)."""
        if self.code:
            code = canonical(self.code)
            named = known_issue_of(code)
            if named is not None and replaced:
                code = named[0] + merged(named[1], replaced)
            return finding.code == code
        return known_issue_id(finding) == merged(self.known_issue, replaced or {})

    def named_issue(self) -> str:
        """The known-issue id it names, by itself or in a code ("" when none)."""
        named = known_issue_of(canonical(self.code)) if self.code else None
        return named[1] if named is not None else self.known_issue

    @property
    def renamed_to(self) -> str | None:
        """The current name of the code this entry names, when it names an old one."""
        new = canonical(self.code) if self.code else self.code
        return new if new != self.code else None


def merged(issue_id: str, replaced: Mapping[str, str]) -> str:
    """The entry a known-issue id is now: the one it was merged into, else itself."""
    return replaced.get(issue_id, issue_id)


def merged_notes(entries: list[AckEntry], replaced: Mapping[str, str]) -> list[str]:
    """One note per entry that names a known issue merged into another: it holds for that one."""
    return [f"Acknowledge file {e.source} names known issue {e.named_issue()!r}, merged into "
            f"{replaced[e.named_issue()]!r} (one cause): it applies to that entry; write the new id."
            for e in entries if e.named_issue() in replaced]


def known_issue_id(finding: Finding) -> str | None:
    if finding.code.startswith(KNOWN_ISSUE_CODE_PREFIX):
        return finding.code[len(KNOWN_ISSUE_CODE_PREFIX):]
    return None


def renamed_notes(entries: list[AckEntry]) -> list[str]:
    """One note per entry that names a code by its old name: it matches, but should be updated."""
    return [f"Acknowledge file {e.source} names {e.code!r}, now called {e.renamed_to!r}: it still "
            "matches; write the new name." for e in entries if e.renamed_to]


def load_ack_file(path: Path) -> list[AckEntry]:
    try:
        data = load_toml(path)
    except FileNotFoundError:
        raise AckFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AckFileError(f"{path}: is a directory, not an acknowledge file") from None
    except TOMLDecodeError as exc:
        raise AckFileError(f"{path}: not valid TOML: {exc}") from None
    except InputError as exc:
        raise AckFileError(str(exc)) from None
    except OSError as exc:
        raise AckFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_acks(data, str(path))


def parse_acks(data: dict[str, Any], source: str) -> list[AckEntry]:
    unknown = [k for k in data if k not in (TABLE, TRAINING_TABLE)]
    if unknown:
        raise AckFileError(f"{source}: unknown top-level key {unknown[0]!r} (expected [[{TABLE}]] tables "
                           f"and a [{TRAINING_TABLE}] table)")
    raw = data.get(TABLE, [])
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise AckFileError(f"{source}: '{TABLE}' must be an array of tables ([[{TABLE}]])")
    return [_entry(e, f"{source}: {TABLE}[{i + 1}]") for i, e in enumerate(raw)]


def _entry(raw: dict[str, Any], where: str) -> AckEntry:
    for key in raw:
        if key not in ENTRY_KEYS:
            raise AckFileError(f"{where}: unknown field {key!r} (fields: {', '.join(ENTRY_KEYS)})")
    code, issue = raw.get("code", ""), raw.get("known_issue", "")
    for key, value in (("code", code), ("known_issue", issue)):
        if not isinstance(value, str):
            raise AckFileError(f"{where}: field {key!r} must be a string")
    if bool(code.strip()) == bool(issue.strip()):
        raise AckFileError(f"{where}: give exactly one of 'code' (a finding code) or 'known_issue' (an id)")
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise AckFileError(f"{where}: field 'reason' is missing or empty (say why it is acceptable)")
    return AckEntry(code.strip(), issue.strip(), reason.strip(), _date(raw.get("expires"), where),
                    where)


def _date(value: Any, where: str) -> _dt.date:
    if value is None:
        raise AckFileError(f"{where}: field 'expires' is missing (a date such as 2026-12-31)")
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise AckFileError(f"{where}: field 'expires' is not a date: {value!r} (write 2026-12-31)")


def apply_acks(checks: list[CheckOutcome], entries: list[AckEntry], today: _dt.date,
               replaced: Mapping[str, str] | None = None) -> list[CheckOutcome]:
    """Pure: mark each finding an entry matches (the first matching entry wins); ``replaced``: the
    known-issue ids merged into another entry, with the one each became."""
    out = []
    for outcome in checks:
        findings = [_acknowledged(f, entries, today, replaced) for f in outcome.findings]
        out.append(replace(outcome, findings=findings))
    return out


def unused_entries(checks: list[CheckOutcome], entries: list[AckEntry],
                   replaced: Mapping[str, str] | None = None) -> list[AckEntry]:
    return [e for e in entries if not any(e.matches(f, replaced) for c in checks for f in c.findings)]


def _acknowledged(finding: Finding, entries: list[AckEntry], today: _dt.date,
                  replaced: Mapping[str, str] | None) -> Finding:
    for entry in entries:
        if entry.matches(finding, replaced):
            ack = Acknowledgement(entry.reason, entry.expires.isoformat(), entry.source,
                                  expired=today > entry.expires)
            return replace(finding, acknowledgement=ack)
    return finding
