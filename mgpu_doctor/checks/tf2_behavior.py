"""The `tf2-behavior` check: TF2_BEHAVIOR turns TensorFlow 1.x into its TensorFlow 2 mode.

TensorFlow 1.15 reads TF2_BEHAVIOR when it is imported (tensorflow_core/python/tf2.py: any value but
"0" enables it): eager execution by default, resource variables, control flow v2, tensor equality.
Graph-mode code written for 1.x then behaves differently, and so do the doctor's own 1.x probes and
smoke trainings, which inherit the variable like the user's training. TensorFlow 2's own import sets
TF2_BEHAVIOR=1 in its process, so a notebook or test session that imported TensorFlow 2 hands it to
every TensorFlow 1.x process it starts.
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_env, need_machine
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity

VARIABLE = "TF2_BEHAVIOR"
MIGRATION_GUIDE = "https://www.tensorflow.org/guide/migrate"

CODES = ("tensorflow.tf2-behavior-ok", "tensorflow.tf2-behavior-on-tf1")


def check_tf2_behavior(env: ResolvedEnvironment) -> list[Finding]:
    snapshot = need_machine(env)
    version = env.tensorflow.version
    if version is None:
        missing = env.tensorflow.missing
        raise CheckSkipped(f"no TensorFlow version known ({env.tensorflow.why_unknown()})",
                           fact_failed=missing is not None and missing.reason == "failed")
    if version.major >= 2:
        raise CheckSkipped(f"TensorFlow {env.tensorflow.text} always runs in its TF2 mode")
    need_env(snapshot, VARIABLE)
    value = snapshot.env.get(VARIABLE)
    if value is None or value == "0":
        return [Finding("tensorflow.tf2-behavior-ok", Severity.OK,
                        f"TensorFlow {env.tensorflow.text} runs in its 1.x mode ({VARIABLE} "
                        f"{'not set' if value is None else '=0'})")]
    return [Finding(
        "tensorflow.tf2-behavior-on-tf1", Severity.INFO,
        f"{VARIABLE}={value} turns TensorFlow {env.tensorflow.text} into its TensorFlow 2 mode: eager "
        "execution, resource variables and control flow v2 instead of graphs and sessions",
        [f"{VARIABLE}: {value!r} (TensorFlow 1.15 enables its 2.x behaviour for any value but '0')",
         "TensorFlow 2's own import sets TF2_BEHAVIOR=1 in its process: a notebook or script that "
         "imported TensorFlow 2 passes it to every TensorFlow 1.x process it starts",
         "the doctor's TensorFlow 1.x probes and smoke trainings ran with it too, as your training would"],
        fix=f"If your code is TensorFlow 1.x graph code, start it without the variable (unset {VARIABLE}, "
        f"or `env -u {VARIABLE} python train.py` from a process that imported TensorFlow 2). Keep it only "
        "if you migrate to TensorFlow 2 behaviour on purpose.",
        links=[MIGRATION_GUIDE],
    )]
