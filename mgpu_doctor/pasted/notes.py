"""The report's notes on a paste: the parts recognised (with their lines) and what was not read."""

from __future__ import annotations

from mgpu_doctor.model.pasted import PastedFacts

PARTS_SHOWN = 12


def pasted_notes(pasted: PastedFacts) -> list[str]:
    notes = []
    for part in pasted.parts[:PARTS_SHOWN]:
        lines = f"line {part.first_line}" if part.first_line == part.last_line else \
            f"lines {part.first_line}-{part.last_line}"
        facts = "; ".join(part.facts[:6]) + ("; ..." if len(part.facts) > 6 else "")
        notes.append(f"Pasted {part.kind} ({lines}): {facts}")
        notes += [f"Pasted {part.kind}: could not read {u}" for u in part.unread]
    if len(pasted.parts) > PARTS_SHOWN:
        notes.append(f"Pasted: {len(pasted.parts) - PARTS_SHOWN} more part(s) recognised "
                     "(see the JSON report)")
    reasons: dict[str, list[str]] = {}  # "keras 2.4.3 (line 4: removed ...)" by why it is kept apart
    for entry in pasted.previous:
        where, _, why = entry.split(" (", 1)[1].rstrip(")").partition(": ")
        reasons.setdefault(why or "a set-up the text calls old or working", []).append(
            f"{entry.split(' (', 1)[0]} ({where})")
    for why, entries in reasons.items():
        notes.append(f"Pasted: kept apart as {why}, not what is installed: " + "; ".join(entries[:8])
                     + ("; ..." if len(entries) > 8 else ""))
    if pasted.other_lines:
        notes.append(f"Pasted: {pasted.other_lines} other non-blank line(s) are not an output "
                     "mgpu-doctor reads "
                     "(prose, code, tracebacks); every fact they do not state is 'not in the pasted text'")
    return notes
