"""What the command line asks of the smoke trainings, apart from the engine that runs them.

The CLI builds (and checks) a :class:`SmokeRequest` even for `check --quick`, which trains
nothing: keeping it here lets the quick check leave the runner, the rules and the worker
plumbing unimported.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mgpu_doctor.record import record, replace

if TYPE_CHECKING:  # annotations only: the quick check builds no SmokeOptions (see cli/options.py)
    from mgpu_doctor.model.user_model import ModelObservation
    from mgpu_doctor.smoke.plan import SmokeOptions

DEFAULT_STALL_TIMEOUT_S = 120.0  # a first step on a GPU can compile kernels for a minute


def smoke_backend(asked: str | None, environ: Mapping[str, str]) -> str:
    """The Keras 3 backend the smoke trains on: jax where ``--backend`` (the training profile's
    option) says jax, or, without it, where KERAS_BACKEND=jax; else tensorflow."""
    said = asked if asked else environ.get("KERAS_BACKEND", "")
    return "jax" if said.strip().lower() == "jax" else "tensorflow"


@record
class SmokeRequest:
    """The smoke trainings asked for: what to train, when to call a hang, where to log runs."""

    options: SmokeOptions
    stall_timeout_s: float
    results_path: Path | None = None
    redact: bool = True  # the results file as every output: identities redacted, credentials masked


def after_model(options: SmokeOptions, observation: ModelObservation | None) -> tuple[SmokeOptions, str]:
    """The smoke options once the user's model was built in its own child: where building it (or
    calling ``--data``) failed, its runs are dropped, with the reason. Each run would call the same
    function again, fail the same way (or allocate the same 10 GB again, or hang for a stall timeout
    each) and turn one failure of the user's code into a list of run failures."""
    if observation is None or not options.user_model or observation.stage == "done":
        return options, ""
    what = _STAGE_FAILED.get(observation.stage, f"building your model failed ({observation.stage})")
    return (replace(options, user_model="", user_data=""),
            f"Your model's smoke runs were not started: {what} when the doctor first built it in a child "
            "of its own (the `user-model` finding says how); each run would only fail the same way.")


_STAGE_FAILED = {
    "tensorflow": "TensorFlow did not import", "import": "your module did not import",
    "build": "your model function raised", "returned": "your model function returned no Keras model",
    "hang": "your code did not return in time", "crash": "the child building your model crashed",
    "child": "the child building your model failed", "data": "your --data function failed",
}
