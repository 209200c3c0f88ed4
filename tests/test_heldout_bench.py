"""The held-out benchmark's mechanism classes stay in step with what the doctor says: a class it
counts by words is one whose words the doctor's own mechanism texts hold (a rewording would
otherwise drop the class from the figures without a test going red)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from mgpu_doctor.matrix.mechanisms import MECHANISMS

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def bench_mechanisms() -> dict[str, tuple[set[str], str]]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("heldout_bench").MECHANISMS
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_every_class_counted_by_words_is_said_by_a_mechanism() -> None:
    said = [m.what.lower() for m in MECHANISMS]
    unsaid = {name: words for name, (_, words) in bench_mechanisms().items()
              if not any(words in text for text in said)}
    assert not unsaid
