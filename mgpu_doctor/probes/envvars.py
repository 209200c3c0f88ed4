"""Environment variables from an allow-list only: never the whole environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from mgpu_doctor.process.masking import is_allowed, mask_env_value


def gather_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Allow-listed variables, credential-looking values masked (even with --no-redact)."""
    env = os.environ if environ is None else environ
    return {name: mask_env_value(name, env[name]) for name in sorted(env) if is_allowed(name)}
