"""The user's own model (``--model MODULE:FUNCTION``), built and read in a child process.

The child (``child_scripts/model_probe.py``) imports the function, calls it inside a
MirroredStrategy's scope and writes back class and option names only. Its failures (the user's
exception, a hang, a crash, something that is not a Keras model) come back as a
:class:`ModelObservation` that says which, in the user's own words and stack; the doctor never
raises for them.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgpu_doctor.childproc import ChildOutcome
from mgpu_doctor.interpreter import Interpreter

DEFAULT_MODEL_TIMEOUT_S = 300.0  # importing TensorFlow and the user's module, building the model
FUNCTION_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class BadModelReference(ValueError):
    """A ``--model`` / ``--data`` value that is not ``MODULE:FUNCTION`` (the message says which)."""


@dataclass(frozen=True)
class ModelRequest:
    """What ``--model``, ``--data`` and ``--model-path`` name."""

    model: str  # "package.module:function"
    data: str = ""  # "" or "package.module:function"
    path: str = ""  # os.pathsep-separated directories put first on the child's sys.path
    timeout_s: float = DEFAULT_MODEL_TIMEOUT_S

    def to_child(self) -> dict[str, str]:
        return {"model": self.model, "data": self.data, "path": self.path}


def check_reference(option: str, value: str) -> str:
    """``value`` if it reads ``MODULE:FUNCTION``; else BadModelReference naming the option."""
    text = value.strip()
    if not FUNCTION_REF.match(text):
        raise BadModelReference(f"{option} takes MODULE:FUNCTION (e.g. mypkg.models:build), got {value!r}")
    return text


@dataclass(frozen=True)
class ModelObservation:
    """What the child saw: the model's facts (``stage`` "done"), or how it failed.

    ``stage``: done; data (the model was read, the data function failed); tensorflow, import,
    build (the user's code raised there), returned (no Keras model), hang, crash, child (the child
    itself failed). ``facts``/``data`` are the child's names (see model_probe.py).
    """

    request: ModelRequest
    stage: str
    framework: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    error_type: str = ""
    error_message: str = ""
    stack: str = ""  # the user's traceback, or every thread's stack at a hang
    returned: str = ""  # the class of what the function returned, when it was no model
    duration_s: float = 0.0

    @property
    def seen(self) -> bool:
        return self.stage in ("done", "data")


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
                                stack=outcome.stacks or outcome.stderr_tail, duration_s=took)
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
        stack=str(error.get("traceback", "")), returned=str(returned.get("class", "")), duration_s=took,
    )


def _mapping(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}
