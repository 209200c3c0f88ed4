"""Held-out benchmark: does `check --from PASTE` name the cause of failures in threads it never saw?

Runs `python -m mgpu_doctor check --from FILE --format json` on every paste listed in
benchmarks/heldout/threads.toml and compares the known-issue findings with the thread's `expected` entry.

    python benchmarks/heldout_bench.py          # table, then the figures for dev, heldout and all
    python benchmarks/heldout_bench.py --json   # the same figures as JSON (and the rows)

Counted per thread:
  named       a finding with code known-issue.<expected>, at any severity (info included)
  named_warn  the same at warning or higher (the doctor says the entry applies, not only that it may)
  rejected    exit code 2 and "not a paste" in the output: the doctor read nothing in the paste
  wrong       a known-issue.* finding at warning or higher whose id is not the expected one
Standard library only (tomllib: Python 3.11+).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib
from corpus_split import by_split  # benchmarks/, beside this script

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "heldout"
REPO = HERE.parent
SEVERITY_RANK = {"ok": 0, "info": 1, "warning": 2, "error": 3, "crash": 4}
PREFIX = "known-issue."
TIMEOUT_S = 60
# How a report names a mechanism class (threads.toml `generic`): a finding at warning or higher with
# one of these codes, or whose evidence says what the line means in these words.
MECHANISMS = {
    "soname-load": ({"pasted.library-not-loaded", "libraries.missing", "libraries.soname-minor"},
                    "a shared library could not be loaded"),
    "cudnn-mismatch": ({"pasted.runtime-mismatch", "pasted.runtime-older-than-build", "libraries.older-minor",
                        "libraries.major-mismatch"}, "cudnn (or cublas) could not start"),
    "oom": (set(), "the gpu ran out of memory"),
    "nccl": (set(), "nccl, which exchanges the gradients"),
    "grpc": (set(), "a worker of the cluster went away"),
    "perreplica": (set(), "a per-replica value"),
    "driver-too-old": ({"driver.too-old", "pasted.cuinit-failed"}, "the driver is older than"),
}


def as_read(thread: dict, folder: Path, tmp: Path) -> Path:
    """The thread as a support engineer reads it: its title, then its opening text."""
    paste = tmp / thread["file"]
    paste.write_text(f"{thread.get('title', '')}\n\n{(folder / thread['file']).read_text(encoding='utf-8')}")
    return paste


def run_doctor(paste: Path) -> dict:
    """One doctor run on one paste: exit code, known-issue findings, whether it was rejected."""
    cmd = [sys.executable, "-m", "mgpu_doctor", "check", "--from", str(paste), "--format", "json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"rc": None, "timeout": True, "rejected": False, "findings": [], "error": "timeout",
                "serious": []}
    rejected = proc.returncode == 2 and "not a paste" in (proc.stdout + proc.stderr)
    findings: list[tuple[str, str]] = []
    serious: list[tuple[str, str]] = []  # (code, evidence text) of every finding at warning or higher
    error = ""
    if not rejected:
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            error = (proc.stderr.strip().splitlines() or ["no JSON output"])[-1][:200]
        else:
            for check in report.get("checks", []):
                for finding in check.get("findings", []):
                    code = finding.get("code", "")
                    if SEVERITY_RANK.get(finding.get("severity", ""), 0) >= SEVERITY_RANK["warning"]:
                        serious.append((code, " ".join(finding.get("evidence", [])).lower()))
                    if code.startswith(PREFIX):
                        findings.append((code[len(PREFIX):], finding.get("severity", "")))
    return {"rc": proc.returncode, "timeout": False, "rejected": rejected, "findings": findings,
            "error": error, "serious": serious}


def score(thread: dict, result: dict) -> dict:
    expected = thread.get("expected", "")
    at_warn = [i for i, sev in result["findings"] if SEVERITY_RANK.get(sev, 0) >= SEVERITY_RANK["warning"]]
    named_any = bool(expected) and any(i == expected for i, _ in result["findings"])
    named_warn = bool(expected) and expected in at_warn
    wrong = sorted({i for i in at_warn if i != expected})
    generic = thread.get("generic", "")
    codes, words = MECHANISMS.get(generic, (set(), "\0"))
    mechanism = bool(generic) and any(code in codes or words in text for code, text in result["serious"])
    return {
        "generic": generic,
        "mechanism_named": mechanism,
        "file": thread["file"],
        "split": thread.get("split", ""),
        "expected": expected,
        "established": bool(thread.get("established")),
        "rc": result["rc"],
        "rejected": result["rejected"],
        "timeout": result["timeout"],
        "error": result["error"],
        "known_issue_findings": len(result["findings"]),
        "named": named_any,
        "named_warn": named_warn,
        "wrong": wrong,
    }


def figures(rows: list[dict]) -> dict:
    with_expected = [r for r in rows if r["expected"]]
    return {
        "threads": len(rows),
        "established": sum(r["established"] for r in rows),
        "with_expected": len(with_expected),
        "named": sum(r["named"] for r in with_expected),
        "named_at_warning": sum(r["named_warn"] for r in with_expected),
        "rejected_not_a_paste": sum(r["rejected"] for r in rows),
        "wrong_entry_at_warning": sum(bool(r["wrong"]) for r in rows),
        "with_mechanism": sum(bool(r["generic"]) for r in rows),
        "mechanism_named": sum(r["mechanism_named"] for r in rows),
        "timeouts_or_errors": sum(bool(r["timeout"] or r["error"]) for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures (and rows) as JSON")
    parser.add_argument("--corpus", type=Path, default=CORPUS / "threads.toml")
    args = parser.parse_args(argv)

    data = tomllib.loads(args.corpus.read_text(encoding="utf-8"))
    threads = data.get("thread", [])
    with tempfile.TemporaryDirectory() as tmp:
        rows = [score(t, run_doctor(as_read(t, args.corpus.parent, Path(tmp)))) for t in threads]
    splits = by_split(rows, figures)

    if args.json:
        print(json.dumps({"figures": splits, "rows": rows}, indent=2))
        return 0

    width = max(len(r["file"]) for r in rows) if rows else 10
    print(f"{'file':<{width}}  {'split':<7}  {'expected':<55}  named  rc  notes")
    for r in rows:
        named = "-" if not r["expected"] else (
            "warn" if r["named_warn"] else ("info" if r["named"] else "no"))
        notes = []
        if r["rejected"]:
            notes.append("rejected: not a paste")
        if r["timeout"]:
            notes.append("timeout")
        if r["error"]:
            notes.append("error: " + r["error"])
        if r["wrong"]:
            notes.append("wrong at warning+: " + ", ".join(r["wrong"]))
        if r["generic"]:
            notes.append(f"{r['generic']}: {'named' if r['mechanism_named'] else 'not named'}")
        if r["known_issue_findings"]:
            notes.append(f"{r['known_issue_findings']} known-issue findings")
        print(f"{r['file']:<{width}}  {r['split']:<7}  {r['expected'] or '-':<55}  {named:<5}  "
              f"{'' if r['rc'] is None else r['rc']:<2}  {'; '.join(notes)}")
    print()
    labels = [
        ("threads", "threads"),
        ("established", "threads with an established cause"),
        ("with_expected", "threads with an expected entry"),
        ("named", "  of those, the doctor names it (any severity)"),
        ("named_at_warning", "  of those, named at warning or higher"),
        ("rejected_not_a_paste", "pastes rejected (exit 2, not a paste)"),
        ("wrong_entry_at_warning", "threads with a wrong entry at warning or higher"),
        ("with_mechanism", "threads whose failure has a mechanism class"),
        ("mechanism_named", "  of those, the class named at warning or higher"),
        ("timeouts_or_errors", "timeouts or unreadable output"),
    ]
    print(f"{'figure':<50} {'dev':>5} {'heldout':>8} {'all':>5}")
    for key, label in labels:
        print(f"{label:<50} {splits['dev'][key]:>5} {splits['heldout'][key]:>8} {splits['all'][key]:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
