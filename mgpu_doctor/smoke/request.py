"""What the command line asks of the smoke trainings, apart from the engine that runs them.

The CLI builds (and checks) a :class:`SmokeRequest` even for `check --quick`, which trains
nothing: keeping it here lets the quick check leave the runner, the rules and the worker
plumbing unimported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mgpu_doctor.smoke.plan import SmokeOptions

DEFAULT_STALL_TIMEOUT_S = 120.0  # a first step on a GPU can compile kernels for a minute


def smoke_backend(asked: str | None, environ: Mapping[str, str]) -> str:
    """The Keras 3 backend the smoke trains on: jax where ``--backend`` (the training profile's
    option) says jax, or, without it, where KERAS_BACKEND=jax; else tensorflow."""
    said = asked if asked else environ.get("KERAS_BACKEND", "")
    return "jax" if said.strip().lower() == "jax" else "tensorflow"


@dataclass(frozen=True)
class SmokeRequest:
    """The smoke trainings asked for: what to train, when to call a hang, where to log runs."""

    options: SmokeOptions
    stall_timeout_s: float
    results_path: Path | None = None
    redact: bool = True  # the results file as every output: identities redacted, credentials masked
