"""Smoke-training results against the known issues: is a failure we just saw a known one?

Written against a small protocol (the attributes of the smoke runner's ``SmokeRun``) so that
this module does not depend on the smoke package; :func:`smoke_findings` is pure.

Their severity is a warning: the failed run's own finding is already the error; these say
whether it is known (and its workaround) or new (and how to report it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import KnownIssue, known_issue_line
from mgpu_doctor.matrix.match import Verdict, assess
from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for
from mgpu_doctor.model.versions import below, parse_specifier
from mgpu_doctor.smoke.layers import matrix_terms

# Which symptoms explain a smoke status. A loss that diverges is how the NaN issues first show.
STATUS_SYMPTOMS: dict[str, tuple[str, ...]] = {
    "hang": ("hang",), "crash": ("crash",), "error": ("error",), "nan": ("nan",),
    "diverged": ("nan",),
    # the checkpoint scenarios (smoke/checkpoint.py): saving or loading raised, or gave other numbers
    "save-failed": ("error", "crash"), "load-failed": ("error", "crash"),
    "reload-differs": ("wrong-result",), "resume-failed": ("error", "wrong-result"),
}
REPORT_COMMAND = "mgpu-doctor report -o mgpu-report.md"
GPU_ONLY_KEYS = ("cuda", "cudnn", "nccl", "driver")
# Statuses no known issue explains: a good run, and one the kernel's OOM killer ended.
NOT_THE_LAYERS_FAULT = ("ok", "oom")


class SmokeRunLike(Protocol):
    """The attributes of one smoke training that matching needs."""

    @property
    def name(self) -> str: ...  # the name of its CheckOutcome

    @property
    def layer(self) -> str: ...  # dense, conv2d, lstm, gru, batchnorm, embedding, attention
    @property
    def variant(self) -> str: ...
    @property
    def devices(self) -> int: ...
    @property
    def device_kind(self) -> str: ...  # "gpu" or "cpu-virtual"
    @property
    def scenario(self) -> str: ...  # "even" or "uneven_final_batch"
    @property
    def status(self) -> str: ...  # ok, hang, crash, error, nan, diverged, oom


# The codes of the findings that look a failed smoke run up in the matrix.
CODES = ("smoke.known-issue.ID", "smoke.not-in-matrix.RUN")


def run_environment(environment: Environment, run: SmokeRunLike, strategy: str = "mirrored") -> Environment:
    """The machine's environment narrowed to what one run exercised."""
    layers = matrix_terms(run.layer, run.variant)
    # Plain model.fit exercises none of the ways of training entries depend on; the checkpoint
    # scenarios name theirs (save_model, load_weights, checkpoint).
    usage = getattr(run, "usage", ())
    env = replace(environment, gpus=run.devices, layers=layers, scenario=run.scenario,
                  strategy=strategy, usage=tuple(usage) if isinstance(usage, tuple) else ())
    workers = getattr(run, "workers", None)
    if isinstance(workers, int):
        env = replace(env, workers=workers)
    framework = getattr(run, "framework", "")
    if isinstance(framework, str) and framework.startswith("tf_keras") and "keras" in env.versions:
        # `smoke --workers --keras tf-keras` trains with tf-keras whatever this shell's
        # TF_USE_LEGACY_KERAS says: a Keras 3 entry does not explain what such a run did
        versions = dict(env.versions)
        keras = versions.pop("keras")
        env = replace(env, versions=versions, missing={
            **env.missing, "keras": f"the run's tf.keras was {framework}, not the keras package {keras}"})
    if run.device_kind != "gpu":
        # Virtual CPU devices use no CUDA, NCCL or GPU: GPU-only facts say nothing about the run.
        versions = {k: v for k, v in env.versions.items() if k not in GPU_ONLY_KEYS}
        missing = {**env.missing, **{k: "the run used virtual CPU devices" for k in GPU_ONLY_KEYS}}
        env = replace(env, versions=versions, compute_capabilities=None, interconnect=None, gpu_names=None,
                      missing={**missing, "compute_capability": "virtual CPU devices",
                               "interconnect": "virtual CPU devices", "gpu_name": "virtual CPU devices"})
    return env


def smoke_findings(
    issues: tuple[KnownIssue, ...] | list[KnownIssue],
    environment: Environment,
    runs: list[SmokeRunLike],
    strategy: str = "mirrored",
) -> list[Finding]:
    """One finding per failed run: the known issues that explain it, or "not in the matrix".

    ``strategy`` is how the smoke trainings distribute (tf.distribute.MirroredStrategy).
    """
    findings: list[Finding] = []
    for run in runs:
        if run.status in NOT_THE_LAYERS_FAULT:
            continue
        symptoms = STATUS_SYMPTOMS.get(run.status, (run.status,))
        env = run_environment(environment, run, strategy)
        layer = f"{run.layer} ({run.variant})" if run.variant else run.layer
        kind = "simulated CPU" if run.device_kind == "cpu-virtual" else run.device_kind.upper()
        what = (f"{layer} on {run.devices} {kind} device(s), "
                f"{run.scenario.replace('_', ' ')}")
        candidates = [i for i in issues if i.symptom in symptoms]
        known = [a for a in (assess(i, env) for i in candidates) if a.verdict is Verdict.MATCHES]
        scenario = run.scenario.replace("_", "-")  # codes are lowercase words joined by hyphens
        code_tail = f"{run.layer}-{run.variant}-{run.devices}{run.device_kind}-{scenario}"
        still = [] if known else still_happening(candidates, env)
        if still:
            findings.extend(_still_finding(issue, newer, what, run.status) for issue, newer in still)
            continue
        if known:
            for a in known:
                issue = a.issue
                findings.append(Finding(
                    code=f"smoke.known-issue.{issue.id}",
                    severity=Severity.WARNING,
                    title=f"Smoke training {what}: {run.status}; a known issue: {issue.title}",
                    evidence=[known_issue_line(issue.id)]
                    + [f"matches: {line}" for line in a.agrees]
                    + [f"unchecked: {line}" for line in a.usage_unknown]
                    + [f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                       + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else "")],
                    fix=issue.workaround,
                    links=[s.url for s in issue.sources if s.url],
                ))
            continue
        versions = ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items()))
        findings.append(Finding(
            code=f"smoke.not-in-matrix.{code_tail}",
            severity=Severity.WARNING,
            title=f"Smoke training {what}: {run.status}; not in the matrix of known issues",
            evidence=[f"status: {run.status}", f"versions: {versions or 'not known'}",
                      f"no known issue with symptom {' or '.join(symptoms)} matches this run"],
            fix=f"Run `{REPORT_COMMAND}` and attach mgpu-report.md to a new issue (TensorFlow or "
            "Keras, whichever the stack points to): it holds the versions, the GPUs and the "
            "smoke results. Meanwhile try the run's layer/strategy on one GPU to narrow it down.",
        ))
    return findings


def still_happening(
    issues: list[KnownIssue], env: Environment
) -> list[tuple[KnownIssue, list[str]]]:
    """Entries whose symptom and conditions this run meets, reported only for older versions than
    the ones here: the known problem is still there (or back). With the newer versions named.

    Only entries that name what the run trained (a layer, or the uneven final batch): a bare "it
    hung under MirroredStrategy" of an old release says nothing about a hang today.
    """
    found = []
    for issue in issues:
        if not (issue.conditions.layers or issue.conditions.scenario):
            continue
        newer = [f"{key} {env.versions[key]}" for key, text in issue.affects.items()
                 if key in env.versions and below(parse_specifier(text), env.versions[key])]
        if not newer:
            continue
        unversioned = replace(issue, affects={k: v for k, v in issue.affects.items()
                                              if f"{k} {env.versions.get(k)}" not in newer})
        if assess(unversioned, env).verdict is Verdict.MATCHES:
            found.append((issue, newer))
    return found


def _still_finding(issue: KnownIssue, newer: list[str], what: str, status: str) -> Finding:
    reported = ", ".join(f"{k} {v}" for k, v in issue.affects.items())
    here = ", ".join(newer)
    return Finding(
        code=f"smoke.known-issue.{issue.id}",
        severity=Severity.WARNING,
        title=f"Smoke training {what}: {status}; known issue {issue.id}, reported for {reported}, "
              f"still happens with {here} here: {issue.title}",
        evidence=[known_issue_line(issue.id),
                  f"reported for: {reported}", f"seen here with: {here}",
                  f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                  + (f"; said to be fixed in {issue.fixed_in}" if issue.fixed_in else "")],
        fix=f"{issue.workaround} It still happens with {here}: add that to the thread (`{REPORT_COMMAND}` "
            "holds the versions and the smoke results).",
        links=[s.url for s in issue.sources if s.url],
    )


def with_known_issues(
    outcomes: list[CheckOutcome],
    runs: Sequence[SmokeRunLike],
    issues: tuple[KnownIssue, ...] | list[KnownIssue],
    environment: Environment,
    strategy: str = "mirrored",
) -> list[CheckOutcome]:
    """Each failed run's outcome gains its known-issue (or not-in-the-matrix) findings."""
    by_name = {run.name: run for run in runs if run.status not in NOT_THE_LAYERS_FAULT}
    out = []
    for outcome in outcomes:
        run = by_name.get(outcome.name)
        if run is None:
            out.append(outcome)
            continue
        findings = sorted(outcome.findings + smoke_findings(issues, environment, [run], strategy),
                          key=lambda f: f.severity, reverse=True)
        out.append(replace(outcome, findings=findings, status=status_for(findings)))
    return out
