"""Known issues against an environment: matches, does not, or cannot tell, with the evidence.

An :class:`Environment` is what is known about one setup: versions and machine facts from a
snapshot, from a `matrix query`, or from an entry's example; usage (layers, strategy, scenario)
from a query or a smoke run. Anything not known is None and never counts as a match.

Verdicts:
- ``matches``: every version and machine condition holds; usage conditions hold or, when the
  usage is not known (a plain `check` cannot see the model), the finding says "if ...".
- ``does not match``: some known fact is outside the entry.
- ``cannot tell``: nothing known contradicts the entry, something known agrees with it, and a
  fact it needs is missing (TensorFlow not imported, no GPU): reported as info.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mgpu_doctor.findings import Finding, Severity
from mgpu_doctor.inputs import shorten
from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.known_issues import (
    ANY_STRATEGY,
    BACKENDS,
    CPU_VENDORS,
    ENV_KEYS,
    INTERCONNECTS,
    LAYERS,
    PLATFORMS,
    SCENARIOS,
    STRATEGIES,
    USAGES,
    VERSION_KEYS,
    KnownIssue,
    Problem,
)
from mgpu_doctor.resolve import KerasFamily, ResolvedEnvironment
from mgpu_doctor.versions import Tri, parse_specifier, parse_version, range_in, version_in

REPORT_COMMAND = "mgpu-doctor report -o mgpu-report.md"


@dataclass(frozen=True)
class Environment:
    """What is known about one setup; None (or a missing version) means not known.

    ``versions`` holds exact versions; ``ranges`` what is only predicted as a range (Keras 3
    with TensorFlow 2.16+ when no Keras was named), used where no exact version is known.
    ``sources`` says where a version came from when that is worth showing (a prediction).
    """

    versions: dict[str, str] = field(default_factory=dict)  # tensorflow -> "2.12.0"
    gpus: int | None = None  # GPUs per worker
    workers: int | None = None
    compute_capabilities: tuple[str, ...] | None = None  # one per GPU: "7.5"
    gpu_names: tuple[str, ...] | None = None
    platform: str | None = None
    cpu_vendor: str | None = None
    interconnect: str | None = None
    backend: str | None = None
    layers: tuple[str, ...] | None = None
    usage: tuple[str, ...] | None = None
    strategy: str | None = None
    scenario: str | None = None
    # Why a fact is missing, for the evidence of "cannot tell": key -> reason.
    missing: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, str] = field(default_factory=dict)  # keras -> ">=3"
    sources: dict[str, str] = field(default_factory=dict)  # cuda -> "TensorFlow 2.12's tested build"


class Verdict(enum.Enum):
    MATCHES = "matches"
    NO_MATCH = "does not match"
    CANNOT_TELL = "cannot tell"


@dataclass(frozen=True)
class Assessment:
    """One entry against one environment, with a line of evidence per requirement."""

    issue: KnownIssue
    verdict: Verdict
    agrees: tuple[str, ...]  # requirements the environment meets
    unknown: tuple[str, ...]  # machine facts the entry needs that are not known
    usage_unknown: tuple[str, ...]  # "if your model uses ..." lines
    disagrees: tuple[str, ...]
    version_agrees: bool = False  # some version the entry names is known and in its range


class BadEnvironment(ValueError):
    """A `key==value` or example environment that cannot be understood (the message says why)."""


class _Recorder:
    def __init__(self) -> None:
        self.agrees: list[str] = []
        self.unknown: list[str] = []
        self.usage: list[str] = []
        self.disagrees: list[str] = []

    def __call__(self, answer: Tri, yes: str, no: str, missing: str, is_usage: bool = False) -> None:
        if answer is Tri.YES:
            self.agrees.append(yes)
        elif answer is Tri.NO:
            self.disagrees.append(no)
        elif is_usage:
            self.usage.append(missing)
        else:
            self.unknown.append(missing)


def assess(issue: KnownIssue, env: Environment) -> Assessment:
    record = _Recorder()
    _assess_versions(issue, env, record)
    version_agrees = bool(record.agrees)
    _assess_machine(issue, env, record)
    _assess_usage(issue, env, record)
    if record.disagrees:
        verdict = Verdict.NO_MATCH
    elif record.unknown:
        verdict = Verdict.CANNOT_TELL
    else:
        verdict = Verdict.MATCHES
    return Assessment(issue, verdict, tuple(record.agrees), tuple(record.unknown), tuple(record.usage),
                      tuple(record.disagrees), version_agrees)


def _assess_versions(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    for key, text in issue.affects.items():
        spec = parse_specifier(text)
        have = env.versions.get(key)
        origin = f" ({env.sources[key]})" if key in env.sources else ""
        if have is None and key in env.ranges:
            predicted = env.ranges[key]
            record(range_in(parse_specifier(predicted), spec), f"{key} {predicted}{origin} is in {text}",
                   f"{key} {predicted}{origin} is not in {text}",
                   f"{key} {text}: only {predicted} is known{origin}")
            continue
        answer = version_in(have, spec)
        if have is None:
            missing = f"{key} {text}: {env.missing.get(key, 'not known')}"
        else:
            missing = f"{key} {have}{origin} cannot be placed against {text}"
        record(answer, f"{key} {have}{origin} is in {text}", f"{key} {have}{origin} is not in {text}",
               missing)


def _assess_machine(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    c = issue.conditions
    for low, high, have, unit in ((c.min_gpus, c.max_gpus, env.gpus, "GPU(s)"),
                                  (c.min_workers, c.max_workers, env.workers, "worker(s)")):
        if low is None and high is None:
            continue
        wanted = _count_range(low, high, unit)
        key = "gpus" if unit == "GPU(s)" else "workers"
        if have is None:
            record(Tri.UNKNOWN, "", "", f"{wanted}: {unit[:-3]} count {env.missing.get(key, 'not known')}",
                   is_usage=key == "workers")
        else:
            ok = (low is None or have >= low) and (high is None or have <= high)
            record(_tri(ok), f"{have} {unit}, {wanted}", f"{have} {unit}, needs {wanted}", "")
    if c.compute_capability is not None:
        spec = parse_specifier(c.compute_capability)
        if not env.compute_capabilities:
            record(Tri.UNKNOWN, "", "", f"compute capability {c.compute_capability}: "
                   f"{env.missing.get('compute_capability', 'not known')}")
        else:
            answers = [version_in(cc, spec) for cc in env.compute_capabilities]
            answer = (Tri.YES if Tri.YES in answers else Tri.UNKNOWN if Tri.UNKNOWN in answers else Tri.NO)
            shown = ", ".join(sorted(set(env.compute_capabilities)))
            record(answer, f"compute capability {shown} is in {c.compute_capability}",
                   f"compute capability {shown} is not in {c.compute_capability}",
                   f"compute capability {shown} cannot be placed against {c.compute_capability}")
    if c.gpu_names:
        wanted_names = " or ".join(c.gpu_names)
        if env.gpu_names is None:
            record(Tri.UNKNOWN, "", "", f"GPU {wanted_names}: {env.missing.get('gpu_name', 'not known')}")
        else:
            hit = sorted({n for n in env.gpu_names for w in c.gpu_names if w.lower() in n.lower()})
            record(_tri(bool(hit)), f"GPU {', '.join(hit)}",
                   f"GPU {', '.join(sorted(set(env.gpu_names))) or '(none)'}, not {wanted_names}", "")
    for name, wanted_value, have_value in (("platform", c.platform, env.platform),
                                            ("CPU vendor", c.cpu_vendor, env.cpu_vendor),
                                            ("interconnect", c.interconnect, env.interconnect),
                                            ("backend", c.backend, env.backend)):
        if wanted_value is None:
            continue
        if have_value is None:
            key = name.lower().replace(" ", "_")
            record(Tri.UNKNOWN, "", "", f"{name} {wanted_value}: {env.missing.get(key, 'not known')}")
        else:
            record(_tri(have_value == wanted_value), f"{name} {have_value}",
                   f"{name} {have_value}, not {wanted_value}", "")


def _assess_usage(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    """How the model is trained: never known from a machine, so "if you ..." unless named."""
    c = issue.conditions
    if c.layers:
        wanted_layers = " or ".join(vocab.LAYERS.get(x, x) for x in c.layers)
        if env.layers is None:
            record(Tri.UNKNOWN, "", "", f"if your model uses {wanted_layers} layers", is_usage=True)
        else:
            hit = sorted(set(c.layers) & set(env.layers))
            record(_tri(bool(hit)), f"layers {', '.join(hit)}",
                   f"layers {', '.join(env.layers) or '(none)'}, not {' or '.join(c.layers)}", "")
    for tag in c.usage:
        if env.usage is None:
            record(Tri.UNKNOWN, "", "", f"if you {vocab.usage_phrase(tag)}", is_usage=True)
        else:
            record(_tri(tag in env.usage), f"usage {tag}", f"usage {', '.join(env.usage) or '(none named)'}, "
                   f"not {tag}", "")
    if c.strategy:
        wanted = " or ".join(vocab.strategy_phrase(s) for s in c.strategy if s != ANY_STRATEGY) \
            or "a distribution strategy"
        if env.strategy is None:
            record(Tri.UNKNOWN, "", "", f"if you train with {wanted}", is_usage=True)
        else:
            ok = env.strategy in c.strategy or ANY_STRATEGY in c.strategy
            record(_tri(ok), f"strategy {env.strategy}",
                   f"strategy {env.strategy}, not {' or '.join(c.strategy)}", "")
    if c.scenario is not None:
        if env.scenario is None:
            record(Tri.UNKNOWN, "", "", f"if {vocab.SCENARIOS.get(c.scenario, c.scenario)}", is_usage=True)
        else:
            record(_tri(env.scenario == c.scenario), f"scenario {env.scenario}",
                   f"scenario {env.scenario}, not {c.scenario}", "")


def describe_usage(name: str, value: str) -> str:
    if name == "strategy":
        return vocab.strategy_phrase(value)
    return vocab.SCENARIOS.get(value, value)


def _tri(ok: bool) -> Tri:
    return Tri.YES if ok else Tri.NO


def _count_range(low: int | None, high: int | None, unit: str) -> str:
    if low and high:
        return f"{low} {unit}" if low == high else f"{low} to {high} {unit[:-3]}s"
    return f"at least {low} {unit}" if low else f"at most {high} {unit}"


def worth_reporting(a: Assessment) -> bool:
    """Matches, or cannot tell while a version it names is known and agrees (an entry that names
    no version: while something known agrees). Two GPUs alone do not make an NCCL entry worth a
    line when the NCCL version is not known: that is noise on every multi-GPU query."""
    if a.verdict is Verdict.MATCHES:
        return True
    if a.verdict is not Verdict.CANNOT_TELL:
        return False
    return a.version_agrees if a.issue.affects else bool(a.agrees)


def finding_for(a: Assessment) -> Finding:
    """A finding for an assessment worth reporting (see :func:`worth_reporting`)."""
    issue = a.issue
    conditional = bool(a.usage_unknown)
    if a.verdict is Verdict.CANNOT_TELL:
        severity, prefix = Severity.INFO, "Cannot tell whether this known issue applies: "
    elif conditional:
        severity, prefix = Severity.INFO, "Known issue for these versions: "
    elif issue.symptom == "slow":
        severity, prefix = Severity.INFO, "Known issue applies (slowdown): "
    else:
        severity, prefix = Severity.WARNING, "Known issue applies: "
    evidence = [f"matches: {line}" for line in a.agrees]
    evidence += [f"not known: {line}" for line in a.unknown]
    evidence += [f"applies {line}" for line in a.usage_unknown]
    evidence.append(f"symptom: {issue.symptom}; confidence: {issue.confidence}"
                    + (f"; fixed in {issue.fixed_in}" if issue.fixed_in else ""))
    evidence += [f"source: {s.title or s.kind} ({s.ref})" for s in issue.sources if not s.url and s.ref]
    return Finding(
        code=f"known-issue.{issue.id}",
        severity=severity,
        title=prefix + issue.title,
        evidence=evidence,
        fix=issue.workaround,
        links=[s.url for s in issue.sources if s.url],
    )


def known_issue_findings(
    issues: tuple[KnownIssue, ...] | list[KnownIssue], env: Environment
) -> list[Finding]:
    """The findings of every entry worth reporting, most severe first (stable order otherwise)."""
    found = [finding_for(a) for a in (assess(i, env) for i in issues) if worth_reporting(a)]
    return sorted(found, key=lambda f: f.severity, reverse=True)


# --- environments from a resolved environment (a machine's or a query's) ---------------------


def environment_from_resolved(env: ResolvedEnvironment) -> Environment:
    """What the matrix matches, from the one resolved environment (versions decided there)."""
    versions: dict[str, str] = {}
    ranges: dict[str, str] = {}
    sources: dict[str, str] = {}
    missing: dict[str, str] = dict(env.machine.missing)
    for key, value in env.versions().items():
        if value.known and value.chosen is not None:
            versions[key] = value.text
            if not value.observed:
                sources[key] = f"{value.chosen.origin.value}" + \
                    (f" {value.chosen.where}" if value.chosen.where else "")
        elif value.range:
            ranges[key] = value.range
            sources[key] = value.range_origin
        else:
            missing[key] = str(value.missing) if value.missing is not None else "not known"
    if env.tf_keras_is is not None and env.tf_keras_is.family is KerasFamily.TF_KERAS and "keras" in versions:
        # the `keras` package is installed but tf.keras is tf-keras: a Keras 3 entry is not known
        # to apply (only if the model imports keras directly), so it is not reported as matching
        missing["keras"] = (f"tf.keras is {env.tf_keras_is.describe()}, not the keras package "
                            f"{versions.pop('keras')}")
        sources.pop("keras", None)
    m, u = env.machine, env.usage
    return Environment(
        versions=versions, gpus=m.gpus, workers=m.workers, compute_capabilities=m.compute_capabilities,
        gpu_names=m.gpu_names, platform=m.platform, cpu_vendor=m.cpu_vendor, interconnect=m.interconnect,
        backend=m.backend, layers=u.layers, usage=u.usage, strategy=u.strategy, scenario=u.scenario,
        missing=missing, ranges=ranges, sources=sources,
    )


# --- environments from text: `matrix query` arguments and entry examples --------------------

_CHOICES: dict[str, tuple[str, ...]] = {
    "strategy": tuple(s for s in STRATEGIES if s != ANY_STRATEGY), "scenario": SCENARIOS,
    "platform": PLATFORMS, "cpu_vendor": CPU_VENDORS, "interconnect": INTERCONNECTS, "backend": BACKENDS,
}
_LISTS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    # key -> (Environment field, allowed words or None for free text)
    "layers": ("layers", LAYERS), "usage": ("usage", USAGES),
    "compute_capability": ("compute_capabilities", None), "gpu_name": ("gpu_names", None),
}


def environment_from_mapping(values: Mapping[str, Any]) -> Environment:
    """An environment from ``{"tensorflow": "1.12", "gpus": 2, "layers": ["gru"]}``.

    ``workers=K`` means multi-worker training over K workers (strategy multi_worker_mirrored
    unless another strategy is named); no ``backend`` means Keras 3's default, tensorflow.
    Raises :class:`BadEnvironment` naming the key for anything it cannot use.
    """
    versions: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in ENV_KEYS:
            raise BadEnvironment(f"unknown key {key!r}; known: {', '.join(ENV_KEYS)}")
        if key in VERSION_KEYS:
            text = str(value).strip()
            if parse_version(text) is None:
                raise BadEnvironment(f"{key}: {shorten(text)} is not a version")
            versions[key] = text
        elif key in ("gpus", "workers"):
            kwargs[key] = _count(key, value)
        elif key in _LISTS:
            attr, allowed = _LISTS[key]
            items = value if isinstance(value, list) else str(value).split(",")
            words = [str(v).strip() for v in items if str(v).strip()]
            if allowed is not None:
                words = [w.lower() for w in words]
                for word in words:
                    if word not in allowed:
                        raise BadEnvironment(f"{key}: {word!r} is not one of {', '.join(allowed)}")
            if key == "compute_capability":
                for cc in words:
                    if parse_version(cc) is None:
                        raise BadEnvironment(f"compute_capability: {cc!r} is not like 7.5")
            kwargs[attr] = tuple(words)
        else:
            text = str(value).strip().lower()
            if text not in _CHOICES[key]:
                raise BadEnvironment(f"{key}: {text!r} is not one of {', '.join(_CHOICES[key])}")
            kwargs[key] = text
    if "workers" in kwargs and "strategy" not in kwargs:
        kwargs["strategy"] = "multi_worker_mirrored"
    # As on `check` (KERAS_BACKEND unset): Keras 3 runs on TensorFlow unless told otherwise.
    kwargs.setdefault("backend", vocab.DEFAULT_BACKEND)
    return Environment(versions=versions, **kwargs)


def _count(key: str, value: Any) -> int:
    text = str(value).strip()
    if (isinstance(value, bool) or not (isinstance(value, int) or text.isdigit()) or len(text) > 9
            or int(text) < 1):
        what = "GPUs" if key == "gpus" else "workers"
        raise BadEnvironment(f"{key}: {shorten(value)} is not a number of {what}")
    return int(text)


def parse_query(terms: list[str]) -> tuple[Environment, dict[str, str]]:
    """``tensorflow==1.12 gpus=2 layers=gru,lstm`` -> the environment and the terms as given."""
    values: dict[str, Any] = {}
    given: dict[str, str] = {}
    for term in terms:
        if "==" in term:
            key, _, value = term.partition("==")
            key = key.strip().lower()
            if key not in VERSION_KEYS:
                hint = f"; use {key}=VALUE" if key in ENV_KEYS else ""
                raise BadEnvironment(f"{term!r}: {key!r} is not a version key "
                                     f"({', '.join(VERSION_KEYS)}){hint}")
        elif "=" in term:
            key, _, value = term.partition("=")
            key = key.strip().lower()
            if key in VERSION_KEYS:
                raise BadEnvironment(f"{term!r}: write versions with '==' ({key}=={value})")
        else:
            raise BadEnvironment(f"{term!r}: expected KEY==VERSION or KEY=VALUE")
        if not value.strip():
            raise BadEnvironment(f"{term!r}: no value after '='")
        if key in values:
            raise BadEnvironment(f"{term!r}: {key} given twice")
        values[key] = value.strip()
        given[key] = value.strip()
    return environment_from_mapping(values), given


def example_problems(issue: KnownIssue) -> list[Problem]:
    """Examples that do not behave as the entry says: a matching one that does not match fully
    (usage included), or a non-matching one that matches or cannot be told."""
    problems = []
    for i, example in enumerate(issue.examples):
        name = f"examples[{i}]"
        try:
            env = environment_from_mapping(example.env)
        except BadEnvironment as exc:
            problems.append(Problem(issue.origin, issue.id, f"{name}.env", str(exc)))
            continue
        a = assess(issue, env)
        fully = a.verdict is Verdict.MATCHES and not a.usage_unknown
        if example.matches and not fully:
            why = "; ".join(a.disagrees or a.unknown or a.usage_unknown)
            problems.append(Problem(issue.origin, issue.id, name,
                                    f"should match its own entry but {a.verdict.value}: {why}"))
        if not example.matches and a.verdict is not Verdict.NO_MATCH:
            problems.append(Problem(issue.origin, issue.id, name,
                                    f"should not match its own entry but {a.verdict.value}"))
    return problems
