"""The user's own model (``--model MODULE:FUNCTION``), built and read in a child process.

The child (``child_scripts/model_probe.py``) imports the function, calls it inside a
MirroredStrategy's scope and writes back class and option names only. Its failures (the user's
exception, a hang, a crash, something that is not a Keras model) come back as a
:class:`ModelObservation` that says which, in the user's own words and stack; the doctor never
raises for them.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mgpu_doctor.model.user_model import ModelObservation, ModelRequest
from mgpu_doctor.process.childproc import ChildOutcome
from mgpu_doctor.process.interpreter import Interpreter

__all__ = ["ModelObservation", "ModelRequest", "observation_from_outcome", "observe_model"]

def observe_model(request: ModelRequest, interpreter: Interpreter) -> ModelObservation:
    """Build the model in a child under ``request.timeout_s``; never raises for the user's code."""
    workdir = Path(tempfile.mkdtemp(prefix="mgpu-doctor-model-"))
    try:
        spec = workdir / "spec.json"
        spec.write_text(json.dumps(request.to_child()))
        outcome = interpreter.run_script("model_probe.py", str(spec), timeout_s=request.timeout_s)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return observation_from_outcome(request, outcome)


def observation_from_outcome(request: ModelRequest, outcome: ChildOutcome) -> ModelObservation:
    took = outcome.duration_s
    if outcome.timed_out or outcome.stalled:
        return ModelObservation(request, "hang", error_message=outcome.failure_summary(),
                                stack=outcome.stacks or outcome.stderr_tail, duration_s=took,
                                waiting_in=outcome.last_step)
    data = outcome.result if isinstance(outcome.result, dict) else None
    if data is None:
        stage = "crash" if outcome.signal_name else "child"
        return ModelObservation(request, stage, error_message=outcome.failure_summary(),
                                stack=outcome.stderr_tail, duration_s=took)
    error, returned = _mapping(data, "error"), _mapping(data, "returned")
    return ModelObservation(
        request, str(data.get("stage", "child")), framework=str(data.get("framework", "")),
        facts=_mapping(data, "facts"), data=_mapping(data, "data"),
        error_type=str(error.get("type", "")), error_message=str(error.get("message", "")),
        missing_module=str(error.get("missing_module") or "")[:200],
        stack=str(error.get("traceback", "")), returned=str(returned.get("class", "")), duration_s=took,
        threads=[str(t) for t in data.get("threads") or [] if isinstance(t, str)][:20],
    )


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}
