"""The user's own model (``--model MODULE:FUNCTION``) as data: what was asked for
(:class:`ModelRequest`) and what the child saw (:class:`ModelObservation`); the child runs in
``probes/user_model.py``, the facts are read in ``training/observed.py``."""

from __future__ import annotations

import re
from typing import Any

from mgpu_doctor.record import field, record

DEFAULT_MODEL_TIMEOUT_S = 300.0  # importing TensorFlow and the user's module, building the model
FUNCTION_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class BadModelReference(ValueError):
    """A ``--model`` / ``--data`` value that is not ``MODULE:FUNCTION`` (the message says which)."""



MODEL_CHECK = "model"  # the check that reports the user's model (`--model`), recorded or run

@record
class ModelRequest:
    """What ``--model``, ``--data`` and ``--model-path`` name."""

    model: str  # "package.module:function"
    data: str = ""  # "" or "package.module:function"
    path: str = ""  # os.pathsep-separated directories put first on the child's sys.path
    timeout_s: float = DEFAULT_MODEL_TIMEOUT_S
    # Where each of those directories came from ("DIR (--model-path)", "DIR (a src/ layout)"),
    # then the working directory: what a module not found was looked for in.
    searched: tuple[str, ...] = ()

    def to_child(self) -> dict[str, str]:
        return {"model": self.model, "data": self.data, "path": self.path}


def check_reference(option: str, value: str) -> str:
    """``value`` if it reads ``MODULE:FUNCTION``; else BadModelReference naming the option."""
    text = value.strip()
    if not FUNCTION_REF.match(text):
        raise BadModelReference(f"{option} takes MODULE:FUNCTION (e.g. mypkg.models:build), got {value!r}")
    return text


@record
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
    missing_module: str = ""  # an import that failed for a module not found: that module's name
    stack: str = ""  # the user's traceback, or every thread's stack at a hang
    returned: str = ""  # the class of what the function returned, when it was no model
    duration_s: float = 0.0
    waiting_in: str = ""  # at a hang: the step the child was in ("calling the data function")
    threads: list[str] = field(default_factory=list)  # non-daemon threads the user's code left running

    @property
    def seen(self) -> bool:
        return self.stage in ("done", "data")
