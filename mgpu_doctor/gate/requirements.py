"""Requirements as gates: `--require-gpus N`, `--require-tensorflow SPEC`, `--require-layers a,b`.

Each requirement becomes a :class:`~mgpu_doctor.checks.base.Check` built from the command line,
so it is reported (and put in JUnit) like any other check. A requirement that is not met is an
error finding; one that cannot be verified (no NVML, TensorFlow not imported, the smoke
trainings did not run) is an error too, never a silent pass.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from packaging.specifiers import SpecifierSet

from mgpu_doctor.checks.base import Check
from mgpu_doctor.checks.facts_access import need_machine
from mgpu_doctor.environment.readings import Origin
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.environment.visibility import visible_gpus
from mgpu_doctor.model.findings import Finding, Section, Severity
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import Tri, parse_specifier, version_in
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.record import record
from mgpu_doctor.smoke.layers import layer_names

FULL_CHECK_FIX = "Run `mgpu-doctor check` without --quick (it imports TensorFlow in a child process)."


class RequirementSyntaxError(ValueError):
    """A requirement on the command line (or in a pytest marker) that does not parse."""


class LayerOutcome(str, enum.Enum):
    """What the smoke training of one layer concluded."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not run"


@record
class Requirements:
    gpus: int | None = None
    tensorflow: str = ""  # a PEP 440 specifier, "" for none
    layers: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.gpus is None and not self.tensorflow and not self.layers


def parse_gpus(text: str | int) -> int:
    if len(str(text).strip()) > 9:
        raise RequirementSyntaxError(f"--require-gpus wants a number of GPUs, got {shorten(text)}")
    try:
        n = int(text)
    except (TypeError, ValueError):
        raise RequirementSyntaxError(f"--require-gpus wants a whole number, got {shorten(text)}") from None
    if n < 1:
        raise RequirementSyntaxError(f"--require-gpus wants at least 1, got {n}")
    return n


def parse_tensorflow_spec(text: str) -> str:
    spec = text.strip()
    if not spec:
        raise RequirementSyntaxError("--require-tensorflow wants a version specifier such as '>=2.16'")
    if spec[0].isdecimal():
        raise RequirementSyntaxError(
            f"--require-tensorflow {text!r} has no operator: write '>={spec}' or '=={spec}.*'"
        )
    try:
        parse_specifier(spec)
    except ValueError as exc:
        raise RequirementSyntaxError(f"--require-tensorflow: {exc}") from None
    return spec


def parse_layers(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else list(value)
    layers = tuple(dict.fromkeys(n.strip().lower() for n in names if n.strip()))
    known = layer_names()
    if not layers:
        raise RequirementSyntaxError(f"--require-layers wants layer names ({', '.join(known)})")
    unknown = [n for n in layers if n not in known]
    if unknown:
        raise RequirementSyntaxError(
            f"--require-layers: unknown layer {unknown[0]!r}; known layers: {', '.join(known)}"
        )
    return layers


def layer_outcomes(runs: Sequence[Any] | None) -> dict[str, LayerOutcome] | None:
    """Per layer: passed when every smoke run of it (all variants and scenarios) ended ``ok``.

    None when no smoke training ran at all (``--quick``, ``--no-smoke``, TensorFlow missing).
    """
    if not runs:
        return None
    verdict: dict[str, LayerOutcome] = {}
    for run in runs:
        ok = run.status == "ok"
        if verdict.get(run.layer) is not LayerOutcome.FAILED:
            verdict[run.layer] = LayerOutcome.PASSED if ok else LayerOutcome.FAILED
    return verdict


REQUIREMENTS = Section.REQUIREMENTS
GPUS_CODES = ("require.gpus-met", "require.gpus-missing", "require.gpus-nvml-only", "require.gpus-unverified")
TENSORFLOW_CODES = ("require.tensorflow-met", "require.tensorflow-version", "require.tensorflow-missing",
                    "require.tensorflow-broken", "require.tensorflow-unverified")
LAYERS_CODES = ("require.layers-met", "require.layers-failed", "require.layers-unverified")
# The gates by name, with the finding codes each can emit.
GATE_CODES = {"require-gpus": GPUS_CODES, "require-tensorflow": TENSORFLOW_CODES,
              "require-layers": LAYERS_CODES}


REQUIREMENT_CHECKS = ("require-gpus", "require-tensorflow", "require-layers")  # the names below


def requirement_checks(
    req: Requirements, layer_outcomes: Mapping[str, LayerOutcome] | None
) -> tuple[Check, ...]:
    """The checks for the requirements asked for; ``layer_outcomes`` is None when no smoke ran."""
    checks = []
    if req.gpus is not None:
        checks.append(Check("require-gpus", f"At least {req.gpus} GPU(s) usable (--require-gpus)",
                            partial(check_gpus, req.gpus), section=REQUIREMENTS, codes=GPUS_CODES))
    if req.tensorflow:
        checks.append(Check("require-tensorflow", f"TensorFlow {req.tensorflow} (--require-tensorflow)",
                            partial(check_tensorflow, req.tensorflow), section=REQUIREMENTS,
                            codes=TENSORFLOW_CODES))
    if req.layers:
        outcomes = layer_outcomes
        checks.append(Check("require-layers",
                            f"Layers {', '.join(req.layers)} train on the GPUs (--require-layers)",
                            lambda _snapshot: layer_findings(req.layers, outcomes), section=REQUIREMENTS,
                            codes=LAYERS_CODES))
    return tuple(checks)


def check_gpus(required: int, env: ResolvedEnvironment) -> list[Finding]:
    """Count the GPUs training will get: TensorFlow's own list when known, else NVML's visible ones."""
    snapshot = need_machine(env)
    tf, nvml = snapshot.tensorflow, snapshot.nvml
    tf_devices = tf.physical_devices if not isinstance(tf, Unavailable) else tf
    if not isinstance(tf_devices, Unavailable):
        n = sum(1 for d in tf_devices if d.device_type == "GPU")
        evidence = [f"TensorFlow sees {n} GPU(s)"]
        if n >= required:
            return [Finding("require.gpus-met", Severity.OK, f"TensorFlow sees {n}", evidence)]
        return [_gpus_missing(required, n, evidence)]
    if isinstance(nvml, Unavailable):
        return [Finding(
            "require.gpus-unverified", Severity.ERROR,
            f"Requirement of {required} GPU(s) not verified: neither NVML nor TensorFlow answered",
            [f"NVML: {nvml}", f"TensorFlow: {tf_devices}"],
            fix="Check that `nvidia-smi` works here; " + FULL_CHECK_FIX,
        )]
    cvd = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    n = len(visible_gpus(nvml.gpus, cvd, snapshot.env.get("CUDA_DEVICE_ORDER")).visible)
    evidence = [f"NVML: {len(nvml.gpus)} GPU(s), {n} visible to CUDA "
                f"(CUDA_VISIBLE_DEVICES={cvd!r})" if cvd is not None else
                f"NVML: {len(nvml.gpus)} GPU(s) (CUDA_VISIBLE_DEVICES not set)",
                f"TensorFlow's view: {tf_devices}"]
    if n < required:
        return [_gpus_missing(required, n, evidence)]
    # NVML alone cannot promise that TensorFlow will use them: say so, visibly.
    return [Finding(
        "require.gpus-nvml-only", Severity.INFO,
        f"{n} GPU(s) visible through NVML; TensorFlow's own view was not checked", evidence,
        fix=FULL_CHECK_FIX,
    )]


def _gpus_missing(required: int, n: int, evidence: list[str]) -> Finding:
    return Finding(
        "require.gpus-missing", Severity.ERROR, f"{required} GPU(s) required, {n} usable", evidence,
        fix="Run on a machine (or request a job) with enough GPUs, check CUDA_VISIBLE_DEVICES, "
        "and see the other findings for GPUs TensorFlow cannot use.",
    )


def check_tensorflow(spec_text: str, env: ResolvedEnvironment) -> list[Finding]:
    """The TensorFlow version as resolved: the imported one, else (with --quick) the installed one."""
    spec = SpecifierSet(spec_text)
    tf = env.tensorflow
    snapshot = env.snapshot
    probe = snapshot.tensorflow if snapshot is not None else None
    if tf.origin is Origin.IMPORTED:
        return _version_finding(spec, tf.text, "imported", [f"TensorFlow {tf.describe()}"])
    if not tf.known:
        return [Finding(
            "require.tensorflow-missing", Severity.ERROR,
            f"TensorFlow {spec} required, but no TensorFlow distribution is installed",
            [f"TensorFlow: {probe if probe is not None else tf.describe()}"],
            fix=f"pip install 'tensorflow{spec}' in the environment you train with.",
        )]
    name = env.tensorflow_distribution or "tensorflow"
    evidence = [f"installed: {name} {tf.text}",
                f"TensorFlow: {probe if probe is not None else tf.describe()}"]
    if isinstance(probe, Unavailable) and probe.reason != "skipped":
        return [Finding(
            "require.tensorflow-broken", Severity.ERROR,
            f"TensorFlow {spec} required: {name} {tf.text} is installed but does not import", evidence,
            fix="See the `tensorflow-import` check for why it fails.",
        )]
    return _version_finding(spec, tf.text, "installed (not imported)", evidence)


def _version_finding(spec: SpecifierSet, version: str, how: str, evidence: list[str]) -> list[Finding]:
    verdict = version_in(version, spec)
    if verdict is Tri.YES:
        severity = Severity.OK if how == "imported" else Severity.INFO
        title = (f"TensorFlow {version}" if severity is Severity.OK
                 else f"TensorFlow {version} {how} satisfies {spec}")
        return [Finding("require.tensorflow-met", severity, title,
                        evidence, fix="" if severity is Severity.OK else FULL_CHECK_FIX)]
    if verdict is Tri.NO:
        return [Finding(
            "require.tensorflow-version", Severity.ERROR,
            f"TensorFlow {spec} required, {version} {how}", evidence,
            fix=f"pip install 'tensorflow{spec}' (with the matching keras / tf-keras) in the "
            "environment you train with.",
        )]
    return [Finding(
        "require.tensorflow-unverified", Severity.ERROR,
        f"TensorFlow {spec} required; cannot tell whether {version} satisfies it", evidence,
        fix="Pre-release and nightly builds sit between releases: pin a released version, or "
        "relax the requirement.",
    )]


def layer_findings(
    required: tuple[str, ...], outcomes: Mapping[str, LayerOutcome] | None
) -> list[Finding]:
    """Pure: the verdict on ``--require-layers`` from the smoke outcome of each layer."""
    if outcomes is None:
        return [Finding(
            "require.layers-unverified", Severity.ERROR,
            f"Layers {', '.join(required)} not verified: the smoke trainings did not run",
            [f"required: {', '.join(required)}"],
            fix="Run `mgpu-doctor check` without --quick: it trains each layer on the GPUs.",
        )]
    failed = [n for n in required if outcomes.get(n) is LayerOutcome.FAILED]
    not_run = [n for n in required if outcomes.get(n, LayerOutcome.NOT_RUN) is LayerOutcome.NOT_RUN]
    evidence = [f"{n}: {outcomes.get(n, LayerOutcome.NOT_RUN).value}" for n in required]
    findings = []
    if failed:
        findings.append(Finding(
            "require.layers-failed", Severity.ERROR,
            f"Required layer(s) failed their smoke training: {', '.join(failed)}", evidence,
            fix="See the smoke results for what happened and the matching known issues for a workaround.",
        ))
    if not_run:
        findings.append(Finding(
            "require.layers-unverified", Severity.ERROR,
            f"Required layer(s) not verified: no smoke training ran for {', '.join(not_run)}", evidence,
            fix="Run `mgpu-doctor check` without --quick (and without skipping those layers).",
        ))
    if not findings:
        findings.append(Finding("require.layers-met", Severity.OK,
                                "every smoke training of them ended ok", evidence))
    return findings
