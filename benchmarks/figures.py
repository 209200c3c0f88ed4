"""The last figures of a benchmark, written where the documentation's claims are checked against
them: ``benchmarks/results/NAME.json`` (committed; tests/test_timing_claims.py reads it).

Each file says when, on what and how loaded the machine was, beside the figures themselves, so a
claim in the docs ("`--quick` takes about 0.4 s") is a rounding of a measured number, never a
number typed from memory.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def write_figures(name: str, figures: dict[str, float], command: str, results: Path = RESULTS) -> Path:
    """Write ``results/NAME.json`` (replacing the last one) and return its path."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    record = {
        "benchmark": name,
        "command": command,
        "date": _dt.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {platform.system()}, "
                   f"Python {platform.python_version()}",
        "load_average_1min": round(os.getloadavg()[0], 2),
        "figures": {k: round(v, 4) for k, v in figures.items()},
    }
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"figures written to {path}", file=sys.stderr)
    return path
