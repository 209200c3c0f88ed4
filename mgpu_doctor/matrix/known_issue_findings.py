"""Known-issue assessments as findings: which are worth a line, and at which severity."""

from __future__ import annotations

import re

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.environment import Environment
from mgpu_doctor.matrix.known_issues import ANY_STRATEGY, VERSION_KEYS, KnownIssue
from mgpu_doctor.matrix.match import Assessment, Decider, Verdict, assess
from mgpu_doctor.matrix.ranges import Place
from mgpu_doctor.model.findings import Condition, Finding, Severity
from mgpu_doctor.model.training import OPTIONS
from mgpu_doctor.model.versions import parse_version

# The training facts an entry can wait on (the matching counts them as usage), with the option
# that declares each; gpus and backend are the machine's unless declared.
TRAINING_OPTIONS = {k: OPTIONS[k] for k in ("strategy", "usage", "layers", "scenario", "workers")}
# The strategies most multi-GPU training uses: an entry that needs one of them is decided by
# something rarer first (a usage, a layer), where it names one.
COMMON_STRATEGIES = ("mirrored", ANY_STRATEGY)
_FACTS = {"cpu_vendor": "CPU vendor", "cpu_arch": "CPU architecture",
          "peer_access": "GPU peer-to-peer access", "gpu_name": "GPU name", "gpus": "GPU count"}


def worth_reporting(a: Assessment) -> bool:
    """Matches, or cannot tell while a version it names is known and agrees (an entry that names
    no version: while something known agrees). Two GPUs alone do not make an NCCL entry worth a
    line when the NCCL version is not known: that is noise on every multi-GPU query."""
    if a.verdict is Verdict.MATCHES:
        return True
    if a.verdict is not Verdict.CANNOT_TELL:
        return False
    if a.unreported is Place.OLDER_REPORT:  # further past its last report: one line counts them
        return False
    if a.version_straddles:  # a version named short of its patch release: never dropped silently
        return True
    if a.unreported is not None:  # the next series, or between two reports: named when the entry's
        return not a.version_missing  # other versions are known (and agree: nothing disagrees)
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
        condition=deciding_condition(a) if severity is Severity.INFO else None,
    )


_TRAINING_KEYS = frozenset({*TRAINING_OPTIONS, "without_usage"})


def deciding_condition(a: Assessment) -> Condition | None:
    """The one fact that would decide an entry that applies only if ... (or cannot be told): for
    "cannot tell", the first machine fact not known; else the rarest training fact not known (an
    uncommon strategy, a usage, a layer, the scenario, the workers, then a common strategy)."""
    if a.verdict is Verdict.CANNOT_TELL:
        machine = [d for d in a.deciders if d.key not in _TRAINING_KEYS and not d.training]
        if machine:
            return _condition(machine[0])
    training = [d for d in a.deciders if d.key in _TRAINING_KEYS or d.training]
    if not training:
        return _unreported_condition(a)
    return _condition(min(training, key=lambda d: (_rank(d), a.deciders.index(d))))


# The condition key of an entry that only a report on these versions (or a fix) would decide.
REPORTED_KEY = "reported"


def _unreported_condition(a: Assessment) -> Condition | None:
    """A version past the last report (next series) or between two reports: what would decide it
    is a report on this version or a fix, nothing the user can declare."""
    if a.unreported is None or a.verdict is not Verdict.CANNOT_TELL:
        return None
    read = a.issue.reading(a.unreported_key)
    said = (f"reported on {read.shown()}" if a.unreported is Place.BETWEEN
            else f"reported up to {read.last_reported}, no fix known")
    return Condition(REPORTED_KEY, (f"{a.unreported_key} {said}",),
                     f"past what its sources report ({a.unreported_key} {said})", "", training=False)


def _rank(d: Decider) -> int:
    if d.key == "strategy":
        return 5 if any(s in COMMON_STRATEGIES for s in d.wanted) else 0
    return {"usage": 1, "without_usage": 1, "layers": 2, "scenario": 3, "workers": 4, "gpus": 6}[d.key]


def _condition(d: Decider) -> Condition:
    if d.key == "without_usage":  # the trigger is a setting left off: naming the usage decides it
        return Condition("usage", d.wanted, f"unless you {vocab.usage_phrase(d.wanted[0])}",
                         f"{TRAINING_OPTIONS['usage']} {d.wanted[0]} (or your whole --usage list)",
                         training=True)
    if d.key == "gpus" and d.training:  # this machine has none: the training's count decides it
        count = re.search(r"\d+", d.wanted[0])
        return Condition("gpus", d.wanted, f"when training on {d.wanted[0]}",
                         f"{OPTIONS['gpus']} {count.group(0) if count else 'N'}", training=True)
    if d.key not in TRAINING_OPTIONS:
        what = f"{d.key} version" if d.key in VERSION_KEYS else _FACTS.get(d.key, d.key.replace("_", " "))
        return Condition(d.key, d.wanted, f"without the {what} ({' or '.join(d.wanted)})", "", training=False)
    option = TRAINING_OPTIONS[d.key]
    words = [w for w in d.wanted if w != ANY_STRATEGY]
    if d.key == "usage":
        phrase = f"if you {vocab.usage_phrase(d.wanted[0])}"
    elif d.key == "layers":
        phrase = f"if your model uses {' or '.join(vocab.LAYERS.get(w, w) for w in words)} layers"
    elif d.key == "strategy":
        phrase = "if you train with " + (" or ".join(vocab.strategy_phrase(w) for w in words)
                                         or "a distribution strategy")
    elif d.key == "scenario":
        phrase = f"if {vocab.SCENARIOS.get(d.wanted[0], d.wanted[0])}"
    else:
        phrase = f"if you train on {d.wanted[0]}"
    values = " or ".join(words) or "(any)" if d.key != "workers" else "K"
    return Condition(d.key, d.wanted, phrase, f"{option} {values}", training=True)


# How many entries a "needs a TensorFlow version" finding names before "... and N more".
SHOWN_UNDECIDED = 15


def needs_tensorflow(a: Assessment, env: Environment) -> bool:
    """An entry not reported only because no TensorFlow version is known (a Keras-only query):
    it names a TensorFlow range, nothing known contradicts it, something known agrees, and the
    TensorFlow version is the only fact it lacks."""
    if a.verdict is not Verdict.CANNOT_TELL or worth_reporting(a) or not a.agrees:
        return False
    if "tensorflow" not in a.issue.affects or "tensorflow" in env.versions or "tensorflow" in env.ranges:
        return False
    return all(line.startswith("tensorflow ") for line in a.unknown)


def undecided_finding(undecided: list[Assessment]) -> Finding:
    """One line for the entries a TensorFlow version would decide, naming each."""
    shown = [f"{a.issue.id}: tensorflow {a.issue.affects['tensorflow']}" for a in undecided[:SHOWN_UNDECIDED]]
    more = len(undecided) - len(shown)
    return Finding(
        "matrix.needs-version", Severity.INFO,
        f"Cannot tell whether {len(undecided)} known issue(s) apply without a TensorFlow version",
        shown + ([f"... and {more} more"] if more > 0 else []),
        fix="Name the TensorFlow version too (tensorflow==X.Y.Z) to decide these entries.",
    )


def known_issue_findings(
    issues: tuple[KnownIssue, ...] | list[KnownIssue], env: Environment, older: list[str] | None = None
) -> list[Finding]:
    """The findings of every entry worth reporting, most severe first (stable order otherwise),
    then one line naming the entries that only a TensorFlow version would decide, then one counting
    those last reported on older releases (``older``: its lines, when the caller has them already;
    else from ``issues``)."""
    assessments = [assess(i, env) for i in issues]
    found = [finding_for(a) for a in assessments if worth_reporting(a)]
    undecided = [a for a in assessments if needs_tensorflow(a, env)]
    more = older_lines(assessments)  # the given lines are in order already: sort only to merge
    older = sorted({*(older or ()), *more}, key=_older_order) if more and older else (older or more)
    return sorted(found, key=lambda f: f.severity, reverse=True) + (
        [undecided_finding(undecided)] if undecided else []) + ([older_finding(older)] if older else [])


def older_lines(assessments: list[Assessment]) -> list[str]:
    """The entries :func:`reported_older` counts, one line each, most recent report first."""
    return sorted((f"{a.issue.id}: {a.unreported_key} reported up to "
                   f"{a.issue.reading(a.unreported_key).last_reported}"
                   for a in assessments if reported_older(a)), key=_older_order)


def _older_order(line: str) -> tuple[tuple[int, ...], str]:
    """Most recent report first, then by id: the same order whichever entries were read first."""
    version = parse_version(line.rpartition(" reported up to ")[2].removesuffix(".x"))
    return (tuple(-p for p in version.release) if version is not None else (), line)


def reported_older(a: Assessment) -> bool:
    """An entry left out of the findings only because a known version lies further past its last
    report than the next series, with no fix known, its other versions known: counted in one line
    (:func:`older_finding`)."""
    return a.verdict is Verdict.CANNOT_TELL and a.unreported is Place.OLDER_REPORT and not a.version_missing


def older_finding(shown: list[str]) -> Finding:
    """One line for the entries last reported on older releases than the next series, no fix known.

    A release series later than the one after an entry's last report has had months of users
    without a report the mining found: such an entry may still apply, or may have been fixed
    without a release note naming it. Each on its own line would bury the entries that do apply
    (a TensorFlow 2.21 query would list every entry of the 1.x era), so they are one info line,
    the :data:`SHOWN_UNDECIDED` most recently reported named in the evidence (`-v` shows them),
    then how many more: naming thousands (a team's big matrix) would cost every run their lines.
    """
    more = len(shown) - SHOWN_UNDECIDED
    return Finding(
        "matrix.reported-older", Severity.INFO,
        f"{len(shown)} known issue(s) were last reported on older releases, with no fix known",
        shown[:SHOWN_UNDECIDED] + ([f"... and {more} more, reported on older releases still"]
                                   if more > 0 else []),
        fix="Nothing to do unless your training shows one of these symptoms: then `mgpu-doctor matrix show "
            "ID` has its workaround (these versions are past every report the matrix knows).",
    )
