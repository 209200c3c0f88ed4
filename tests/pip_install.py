"""One `pip install` for the test suite's cached environments (tests/tf_envs.py, tests/cuda_wheels.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path


def pip_install(cmd: list[str], requirements: tuple[str, ...] | list[str], scratch: Path,
                unavailable: type[Exception], timeout_s: float) -> float:
    """Run ``cmd`` (a pip install of ``requirements``); the seconds it took. On a timeout or a
    failure ``scratch`` (the half-installed target) is removed and ``unavailable`` raised with the
    end of pip's message: the tests skip (or fail under CI) with it."""
    start = time.monotonic()
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise unavailable(f"installing {' '.join(requirements)} took over {exc.timeout} s") from exc
    if result.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise unavailable(f"pip install {' '.join(requirements)} failed: {result.stderr.strip()[-500:]}")
    return round(time.monotonic() - start, 1)
