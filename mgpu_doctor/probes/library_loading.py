"""Load each library copy with ctypes in a child process and ask it for its version; a copy that
fails to load (or kills the child) records the loader's error instead.
"""

from __future__ import annotations

import json
import os

from mgpu_doctor.model.snapshot import LibraryCopy
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import replace

LOAD_TIMEOUT_S = 20.0
LOAD_STALL_S = 10.0
# Libraries the ctypes child asks for a version (cuDNN's sub-libraries are big and have none).
LOADABLE = ("cuda", "cudart", "cublas", "cublasLt", "cufft", "curand", "cusolver", "cusparse", "cudnn",
            "nccl", "nvrtc", "nvJitLink")


def load_library_versions(copies: list[LibraryCopy], interpreter: Interpreter) -> list[LibraryCopy]:
    """Load each library in a child process and record its version or the loader's error.

    Each round loads at most one file per soname, so two copies of one library never meet in a
    process. A load that crashes or hangs marks that file and the round goes on in a new child.
    Each file is opened by ``path``, as the loader finds it, not by its resolved target: a
    RUNPATH's ``$ORIGIN`` is the directory of the path opened (a ``libcudnn.so.9`` symlinked
    away from its sub-libraries aborts there, and so it must here).
    """
    pending = [c for c in copies if c.name in LOADABLE]
    results: dict[str, dict[str, str]] = {}
    while pending:
        batch: list[LibraryCopy] = []
        taken: set[str] = set()
        rest: list[LibraryCopy] = []
        for copy in pending:
            (rest if copy.soname in taken else batch).append(copy)
            taken.add(copy.soname)
        while batch:
            done = _run_batch(batch, interpreter)
            results.update(done)
            batch = [c for c in batch if c.path not in results]
        pending = rest
    out = []
    for copy in copies:
        entry = results.get(copy.path)
        if entry is None:
            out.append(copy)
            continue
        versions = dict(copy.versions)
        if entry.get("version"):
            versions["ctypes"] = entry["version"]
        out.append(replace(copy, versions=versions, load_error=entry.get("error", "")))
    return out


def _run_batch(batch: list[LibraryCopy], interpreter: Interpreter) -> dict[str, dict[str, str]]:
    import tempfile  # here: only a run that loads libraries needs it (the quick check loads none)

    jobs = [{"path": c.path, "name": c.name} for c in batch]
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="mgpu-doctor-libs-", delete=False) as fh:
        json.dump(jobs, fh)
        jobs_file = fh.name
    try:
        outcome = interpreter.run_script("library_versions.py", jobs_file, timeout_s=LOAD_TIMEOUT_S,
                                         stall_timeout_s=LOAD_STALL_S)
    finally:
        os.unlink(jobs_file)
    got: dict[str, dict[str, str]] = {}
    raw = outcome.result.get("results", {}) if isinstance(outcome.result, dict) else {}
    for path, entry in raw.items():
        if isinstance(entry, dict):
            got[str(path)] = {str(k): str(v) for k, v in entry.items()}
    if not (isinstance(outcome.result, dict) and outcome.result.get("done")):
        # The first file without a final result is the one the child was busy with when it died.
        culprit = next((c for c in batch if c.path not in got or "calling" in got[c.path]), None)
        if culprit is not None:
            calling = got.get(culprit.path, {}).get("calling", "")
            doing = f"it loaded, but {calling}()" if calling else "loading it"
            said = library_said(outcome.stderr)
            error = f"{doing} {outcome.failure_summary()}" + (f": {said}" if said else "")
            got[culprit.path] = {"error": error}
    return {path: entry for path, entry in got.items() if "calling" not in entry}


FAULTHANDLER_START = ("Fatal Python error", "Current thread", "Thread 0x")
SAID_MAX_CHARS = 400


def library_said(stderr: str) -> str:
    """What a library printed before it killed the child, without faulthandler's stack dump.

    cuDNN prints why it aborts ("Unable to load any of {libcudnn_graph.so.9.3.0, ...}") and
    then calls abort(); those words are the useful part of the error.
    """
    lines: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(FAULTHANDLER_START):
            break
        if line.strip():
            lines.append(line.strip())
    text = "; ".join(lines[-2:])
    return text if len(text) <= SAID_MAX_CHARS else text[:SAID_MAX_CHARS - 3] + "..."
