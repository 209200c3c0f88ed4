"""One story: the sources of a version that disagree (a half-finished upgrade, a shadowing copy).

The resolved environment takes the value observed running (the TensorFlow child's import);
this check says when the installed metadata, or what the versions predict, says otherwise.
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.facts_access import need_machine
from mgpu_doctor.environment.keras_view import KerasFamily
from mgpu_doctor.environment.readings import Origin, ResolvedVersion
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.model.findings import Finding, Severity

SHADOW_HINT = ("check PYTHONPATH, the user site-packages (~/.local/lib/python*/site-packages) and "
               "`python -c 'import tensorflow, keras; print(tensorflow.__file__, keras.__file__)'`")


CODES = (
    "versions.agree",
    "versions.tensorflow-differs",
    "versions.keras-differs",
    "versions.tf-keras-differs",
    "versions.tf-keras-not-as-predicted",
)


def check_versions_agree(env: ResolvedEnvironment) -> list[Finding]:
    """Installed metadata against the imported module; predicted tf.keras against the observed one."""
    need_machine(env)
    if not env.tensorflow.known or env.tensorflow.origin is not Origin.IMPORTED:
        raise CheckSkipped("TensorFlow was not imported: only the installed metadata is known")
    findings = []
    uses = env.tf_keras_is.family if env.tf_keras_is is not None else None

    def worst_if(family: KerasFamily) -> Severity:  # the package tf.keras is: an error
        return Severity.ERROR if uses is family else Severity.WARNING

    for value, severity in ((env.tensorflow, Severity.ERROR), (env.keras, worst_if(KerasFamily.KERAS3)),
                            (env.tf_keras, worst_if(KerasFamily.TF_KERAS))):
        finding = _disagreement(value, severity)
        if finding is not None:
            findings.append(finding)
    predicted, observed = env.tf_keras_predicted, env.tf_keras_is
    if (predicted is not None and observed is not None and observed.origin is Origin.IMPORTED
            and predicted.family is not observed.family):
        findings.append(Finding(
            "versions.tf-keras-not-as-predicted", Severity.WARNING,
            f"tf.keras is {observed.family.value}, but the versions installed predict "
            f"{predicted.family.value}",
            [f"observed: {observed.describe()}", f"predicted: {predicted.describe()}"],
            fix="Code written for one Keras breaks under the other. With TensorFlow < 2.16 keep Keras 2 "
            "(pip install 'keras<3' matching TensorFlow's minor); with 2.16+ choose explicitly: Keras 3, "
            "or tf-keras with TF_USE_LEGACY_KERAS=1 set in the training job's environment.",
        ))
    if not findings:
        findings.append(Finding(
            "versions.agree", Severity.OK,
            f"TensorFlow {env.tensorflow.text}",
            [env.tensorflow.describe()] + [r.describe() for r in env.tensorflow.others],
        ))
    return findings


def _disagreement(value: ResolvedVersion, severity: Severity) -> Finding | None:
    chosen = value.chosen
    if chosen is None or chosen.origin is not Origin.IMPORTED:
        return None
    other = [r for r in value.disagreeing() if r.origin is Origin.INSTALLED]
    if not other:
        return None
    name = value.key
    return Finding(
        f"versions.{name}-differs", severity,
        f"{name} {chosen.text} is imported, but the installed metadata says {other[0].text}: "
        "a half-finished upgrade or a second copy on sys.path",
        [f"imported: {chosen.describe()}"] + [f"installed: {r.describe()}" for r in other],
        fix=f"Reinstall one {name} cleanly: `pip uninstall -y {name}` (repeat until pip finds none), then "
        f"`pip install {name}=={chosen.text}` (or the version you meant); {SHADOW_HINT}.",
    )
