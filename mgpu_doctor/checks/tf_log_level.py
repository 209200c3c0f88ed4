"""The `tensorflow-log-level` check: a log level that hides why a CUDA library did not load."""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_env, need_machine
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity

VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
# TensorFlow logs a CUDA or cuDNN library it cannot load as a WARNING ("Could not load dynamic
# library ...", "Cannot dlopen some GPU libraries"); level 2 filters INFO and WARNING, 3 ERROR too.
HIDES_WARNINGS = 2
LOG_LEVEL_THREAD = "https://github.com/tensorflow/tensorflow/issues/7652"
DLOPEN_WARNINGS_THREAD = "https://github.com/tensorflow/tensorflow/issues/54499"

CODES = ("tensorflow.log-level-ok", "tensorflow.log-level-hides-loading-errors")


def check_tensorflow_log_level(env: ResolvedEnvironment) -> list[Finding]:
    snapshot = need_machine(env)
    if not env.tensorflow.known:  # no TensorFlow (or no working Python) here: nothing logs
        raise CheckSkipped(f"no TensorFlow here ({env.tensorflow.why_unknown()})")
    need_env(snapshot, VARIABLE)
    value = snapshot.env.get(VARIABLE)
    if value is None:
        return [Finding("tensorflow.log-level-ok", Severity.OK, f"{VARIABLE} not set")]
    try:
        level = int(value.strip())
    except ValueError:
        raise CheckSkipped(f"{VARIABLE}={value!r} is not a number") from None
    if level < HIDES_WARNINGS:
        return [Finding("tensorflow.log-level-ok", Severity.OK, f"{VARIABLE}={level}")]
    hidden = "warnings and errors" if level > HIDES_WARNINGS else "warnings"
    return [Finding(
        "tensorflow.log-level-hides-loading-errors", Severity.INFO,
        f"{VARIABLE}={level} hides TensorFlow's {hidden}, among them why a CUDA or cuDNN library "
        "did not load: a bug report needs them",
        [f"{VARIABLE}: {value} (2 hides INFO and WARNING messages, 3 also ERROR)",
         "TensorFlow reports a GPU library it cannot load ('Could not load dynamic library ...', "
         "'Cannot dlopen some GPU libraries') as a warning, then trains on the CPU"],
        fix=f"When GPUs go missing or for a bug report, run with {VARIABLE}=0 and keep what it prints: "
        f"{VARIABLE}=0 python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"",
        links=[LOG_LEVEL_THREAD, DLOPEN_WARNINGS_THREAD],
    )]
