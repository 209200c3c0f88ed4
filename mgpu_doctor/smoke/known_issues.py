"""Smoke-training results against the known issues: is a failure we just saw a known one?

Written against a small protocol (the attributes of the smoke runner's ``SmokeRun``) so that
this module does not depend on the smoke package; :func:`smoke_findings` is pure.

Their severity is a warning: the failed run's own finding is already the error; these say
whether it is known (and its workaround) or new (and how to report it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.evidence_findings import signature_finding
from mgpu_doctor.matrix.known_issue_findings import worth_reporting
from mgpu_doctor.matrix.known_issues import KnownIssue, known_issue_line
from mgpu_doctor.matrix.match import Verdict, assess
from mgpu_doctor.matrix.ranges import range_texts
from mgpu_doctor.matrix.signatures import signature_hits
from mgpu_doctor.model.evidence import EvidenceLine, evidence_lines, failures
from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for
from mgpu_doctor.model.smoke_runs import USAGE_SCENARIOS
from mgpu_doctor.model.versions import below, parse_specifier
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.layers import matrix_terms
from mgpu_doctor.smoke.plan import USER_MODEL

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
# Statuses no known issue explains: a good run, one the kernel's OOM killer ended, and one this
# TensorFlow could not train (a usage scenario whose API it lacks).
NOT_THE_LAYERS_FAULT = ("ok", "oom", "skipped")
# What a passing run of a usage scenario can rule out here: entries whose symptom would have shown.
FAILURE_SYMPTOMS = ("hang", "crash", "error", "nan", "wrong-result")


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
CODES = ("smoke.known-issue.ID", "smoke.not-in-matrix.RUN", "smoke.not-reproduced.ID", "smoke.own-error.RUN")


def error_lines(run: SmokeRunLike) -> list[EvidenceLine]:
    """The lines of a run's error (the tail of its stderr, its traceback, its exception) that may
    show the failure, unnumbered: they are matched against the known issues' signatures."""
    def text(name: str) -> str:
        value = getattr(run, name, "")
        return value if isinstance(value, str) else ""

    error_type, message, trace = text("error_type"), text("error_message"), text("traceback")
    said = f"{error_type}: {message}" if error_type and not message.startswith(error_type) else message
    parts = [text("stderr_tail"), trace] + ([said] if said.strip() and said.strip() not in trace else [])
    # a checkpoint run's save, load or resume failed in its own step
    parts += [step.error for step in getattr(run, "checkpoint", None) or () if getattr(step, "error", "")]
    # a multi-worker run: each worker's own error and stderr
    for worker in getattr(run, "worker_outcomes", None) or ():
        kind, said = getattr(worker, "error_type", ""), getattr(worker, "error_message", "")
        parts += [getattr(worker, "stderr_tail", ""), f"{kind}: {said}" if kind and said else said]
    # all of the run's own error is evidence (a message's later lines name no error word)
    lines = "\n".join(p for p in parts if p).splitlines()
    return [replace(e, line=0) for e in evidence_lines(lines, keep_all=True)]


def run_environment(environment: Environment, run: SmokeRunLike, strategy: str = "mirrored") -> Environment:
    """The machine's environment narrowed to what one run exercised."""
    layers: tuple[str, ...] | None = matrix_terms(run.layer, run.variant)
    # Plain model.fit exercises none of the ways of training entries depend on; the checkpoint
    # scenarios name theirs (save_model, load_weights, checkpoint).
    usage = getattr(run, "usage", ())
    if run.layer == USER_MODEL:  # the user's model: what the training profile knows of it
        layers, usage = environment.layers, environment.usage
    # the checkpoint and usage scenarios train on full batches: "even" in the matrix's words; the
    # uneven scenario adds one sample to full batches (smoke/plan.py): its last batch holds one
    scenario = "final_batch_of_one" if run.scenario == "uneven_final_batch" else \
        run.scenario if run.scenario in vocab.SCENARIOS else "even"
    env = replace(environment, gpus=run.devices, layers=layers, scenario=scenario,
                  strategy=strategy, usage=tuple(usage) if isinstance(usage, tuple) else None)
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
        scenario = run.scenario.replace("_", "-")  # codes are lowercase words joined by hyphens
        code_tail = f"{run.layer}-{run.variant}-{run.devices}{run.device_kind}-{scenario}"
        lines = error_lines(run)
        hits = signature_hits(issues, lines, "its error")
        shown = [f for f in (signature_finding(h, env) for h in hits) if f is not None]
        if shown:  # what the run printed names the cause, whatever the versions say
            findings.extend(replace(f, code=f"smoke.{f.code}", title=f"Smoke training {what}: {run.status}; "
                                    f"{f.title[:1].lower()}{f.title[1:]}") for f in shown)
            continue
        errored = raised(run)
        if errored and run.layer == USER_MODEL:  # the user's code failed in its own words
            findings.append(_own_error_finding(run, what, lines, code_tail))
            continue
        # An entry whose lines the run did not print is not what the run shows; one whose sources
        # show no line cannot be told apart by it.
        candidates = [i for i in issues if i.symptom in symptoms
                      and not (errored and any(sig.text for sig in i.signatures))]  # frames: a hang's
        known = [a for a in (assess(i, env) for i in candidates) if a.verdict is Verdict.MATCHES]
        # "still happens" is said of the doctor's own models only, and never of a run whose error
        # no entry's line names: the user's model fails for its own reasons too
        still = [] if known or errored or run.layer == USER_MODEL else still_happening(candidates, env)
        if still:
            findings.extend(_still_finding(issue, newer, what, run.status) for issue, newer in still)
            continue
        if known:
            for a in known:
                issue = a.issue
                own = run.layer == USER_MODEL
                findings.append(Finding(
                    code=f"smoke.known-issue.{issue.id}",
                    severity=Severity.WARNING,
                    title=f"Smoke training {what}: {run.status}; "
                    + ("a known issue could explain it: " if own else "a known issue: ") + issue.title,
                    evidence=[known_issue_line(issue.id)]
                    + [f"matches: {line}" for line in a.agrees]
                    + [f"unchecked: {line}" for line in a.usage_unknown]
                    + [f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                       + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else "")]
                    + (["your model's own loss and layers can make the same symptom: the smoke does not "
                        "tell the two apart"] if own else []),
                    fix=issue.workaround,
                    links=[s.url for s in issue.sources if s.url],
                ))
            continue
        versions = ", ".join(f"{k} {v}" for k, v in sorted(env.versions.items()))
        own_words = [f"its error: {f.line.text}" for f in failures(lines)][-1:]
        findings.append(Finding(
            code=f"smoke.not-in-matrix.{code_tail}",
            severity=Severity.WARNING,
            title=f"Smoke training {what}: {run.status}; not in the matrix of known issues",
            evidence=[f"status: {run.status}", *own_words, f"versions: {versions or 'not known'}",
                      f"no known issue with symptom {' or '.join(symptoms)} matches this run"
                      + (", and no known issue's line matches its error" if errored else "")]
            + (["your model's own loss and layers make NaN too (a mean over a replica that the uneven final "
                "batch leaves empty is 0 / 0): the smoke does not locate it"]
               if run.layer == USER_MODEL and run.status in ("nan", "diverged") else []),
            fix=f"Run `{REPORT_COMMAND}` and attach mgpu-report.md to a new issue (TensorFlow or "
            "Keras, whichever the stack points to): it holds the versions, the GPUs and the "
            "smoke results. Meanwhile try the run's layer/strategy on one GPU to narrow it down.",
        ))
    return findings


def raised(run: SmokeRunLike) -> bool:
    """Whether the run, a checkpoint step of it or a worker of it failed with an error message."""
    steps = getattr(run, "checkpoint", None) or ()
    workers = getattr(run, "worker_outcomes", None) or ()
    return bool(getattr(run, "error_type", "") or getattr(run, "error_message", "")
                or any(getattr(step, "error", "") for step in steps)
                or any(getattr(worker, "error_message", "") for worker in workers))


def _own_error_finding(run: SmokeRunLike, what: str, lines: list[EvidenceLine], code_tail: str) -> Finding:
    """The user's model failed with an error no known issue prints: that error, in its own words."""
    failed = failures(lines)
    last = failed[-1] if failed else None
    error_type, message = getattr(run, "error_type", ""), getattr(run, "error_message", "")
    said = last.line.text if last is not None else f"{error_type}: {message.strip().splitlines()[-1:]}"
    frame = next((f.frame_text for f in reversed(failed) if f.frame_text), "")
    where = f"raised in your code ({frame})" if frame else "your model's training raised it"
    return Finding(
        code=f"smoke.own-error.{code_tail}",
        severity=Severity.WARNING,
        title=f"Smoke training {what}: {run.status}; {where}, and no known issue prints it: {said[:120]}",
        evidence=[f"its error: {said}"] + ([f"your code: {frame}"] if frame else [])
        + ["no known issue's line matches it; an error of your model is not blamed on entries by versions "
           "alone (`mgpu-doctor matrix query` lists the entries for your versions)"],
        fix="Fix it in your model's code or data (run the model function once by itself to see it), then "
            "run the smoke again; if it only fails on several devices, check that the model and optimizer "
            f"are created inside `strategy.scope()`, and `{REPORT_COMMAND}` holds what an issue needs.",
    )


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
        for view in issue.views():  # each alternative of its affects
            newer = [f"{key} {have}" for key, text in view.affects.items() if (have := env.versions.get(key))
                     and below(parse_specifier(range_texts(text)[-1]), have)]
            if not newer:
                continue
            unversioned = replace(view, affects={k: v for k, v in view.affects.items()
                                                 if f"{k} {env.versions.get(k)}" not in newer})
            if assess(unversioned, env).verdict is Verdict.MATCHES:
                found.append((view, newer))
                break
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
    passed = {run.name: run for run in runs if run.status == "ok" and run.scenario in USAGE_SCENARIOS
              and run.devices > 1}
    out = []
    for outcome in outcomes:
        run = by_name.get(outcome.name)
        if run is None and outcome.name in passed:
            more = not_reproduced(issues, environment, passed[outcome.name], strategy)
            out.append(replace(outcome, findings=outcome.findings + more) if more else outcome)
            continue
        if run is None:
            out.append(outcome)
            continue
        findings = sorted(outcome.findings + smoke_findings(issues, environment, [run], strategy),
                          key=lambda f: f.severity, reverse=True)
        out.append(replace(outcome, findings=findings, status=status_for(findings)))
    return out


def not_reproduced(
    issues: tuple[KnownIssue, ...] | list[KnownIssue] | Sequence[KnownIssue],
    environment: Environment,
    run: SmokeRunLike,
    strategy: str = "mirrored",
) -> list[Finding]:
    """A usage scenario that trained on N devices: the entries that need its way of training and
    would have failed it here (they match, or cannot be told only for facts the run lacks) are "not
    reproduced here" (info): the `check` line "applies if you ..." has an answer from this stack."""
    env = run_environment(environment, run, strategy)
    usage = set(getattr(run, "usage", ()) or ())
    found = []
    for issue in issues:
        if issue.symptom not in FAILURE_SYMPTOMS or not usage & set(issue.conditions.usage):
            continue
        a = assess(issue, env)
        if not worth_reporting(a):
            continue
        kind = "simulated CPU" if run.device_kind == "cpu-virtual" else run.device_kind.upper()
        evidence = [known_issue_line(issue.id), f"trained: {run.layer} on {run.devices} {kind} device(s), "
                    f"{run.scenario.replace('_', ' ')}: {run.status}"]
        evidence += [f"matches: {line}" for line in a.agrees]
        evidence += [f"not known: {line}" for line in a.unknown]
        if run.device_kind == "cpu-virtual":
            evidence.append("simulated on CPU devices: a cause in the GPU stack (CUDA, cuDNN, NCCL) "
                            "cannot show here")
        found.append(Finding(
            code=f"smoke.not-reproduced.{issue.id}",
            severity=Severity.INFO,
            title=f"Not reproduced here: {issue.title}",
            evidence=evidence,
            fix=f"Nothing to do while this passes; if your training still shows the {issue.symptom}, "
                f"the entry's workaround: {issue.workaround}",
            links=[src.url for src in issue.sources if src.url],
        ))
    return found
