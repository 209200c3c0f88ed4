"""One known issue against one :class:`~mgpu_doctor.matrix.environment.Environment`: matches,
does not, or cannot tell, with the evidence; and an entry's own examples run through the same.

Verdicts:
- ``matches``: every version and machine condition holds; usage conditions hold or, when the
  usage is not known (a plain `check` cannot see the model), the finding says "if ...".
- ``does not match``: some known fact is outside the entry.
- ``cannot tell``: nothing known contradicts the entry, something known agrees with it, and a
  fact it needs is missing (TensorFlow not imported, no GPU): reported as info.
"""

from __future__ import annotations

import enum

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.environment import BadEnvironment, Environment, environment_from_mapping
from mgpu_doctor.matrix.known_issues import ANY_STRATEGY, KnownIssue, Problem
from mgpu_doctor.matrix.ranges import PAST, Place, Reading
from mgpu_doctor.model.versions import Tri, parse_specifier, version_in
from mgpu_doctor.record import record, replace


class Verdict(enum.Enum):
    MATCHES = "matches"
    NO_MATCH = "does not match"
    CANNOT_TELL = "cannot tell"


@record
class Decider:
    """A fact an entry needs that is not known: its `matrix query` key (``usage``, ``layers``,
    ``strategy``, ``numpy``, ``platform``, ...) and what the entry wants (any of ``wanted``)."""

    key: str
    wanted: tuple[str, ...]
    training: bool = False  # a machine key (gpus) that is the training's here: declare it, not find it


@record
class Assessment:
    """One entry against one environment, with a line of evidence per requirement."""

    issue: KnownIssue
    verdict: Verdict
    agrees: tuple[str, ...]  # requirements the environment meets
    unknown: tuple[str, ...]  # machine facts the entry needs that are not known
    usage_unknown: tuple[str, ...]  # "if your model uses ..." lines
    disagrees: tuple[str, ...]
    version_agrees: bool = False  # some version the entry names is known and in its range
    # some version the entry names is known but cannot be placed against its range: a short version
    # ("1.12", "11") whose completions fall on both sides, a nightly between two releases
    version_straddles: bool = False
    deciders: tuple[Decider, ...] = ()  # the unknown facts behind `unknown` and `usage_unknown`
    # a known version past the last report of an entry with no fix known (Place.NEXT_SERIES,
    # Place.OLDER_REPORT), or between two reported ranges (Place.BETWEEN); None otherwise
    unreported: Place | None = None
    unreported_key: str = ""  # the version key placed so
    version_missing: bool = False  # a version it names is not known (or only as a range across its bound)


class _Recorder:
    def __init__(self) -> None:
        self.straddles = False
        self.agrees: list[str] = []
        self.unknown: list[str] = []
        self.usage: list[str] = []
        self.disagrees: list[str] = []
        self.deciders: list[Decider] = []
        self.unreported: Place | None = None
        self.unreported_key = ""
        self.version_missing = False

    def __call__(self, answer: Tri, yes: str, no: str, missing: str, is_usage: bool = False,
                 decider: Decider | None = None) -> None:
        if answer is Tri.UNKNOWN and decider is not None:
            self.deciders.append(decider)
        if answer is Tri.YES:
            self.agrees.append(yes)
        elif answer is Tri.NO:
            self.disagrees.append(no)
        elif is_usage:
            self.usage.append(missing)
        else:
            self.unknown.append(missing)


def assess(issue: KnownIssue, env: Environment) -> Assessment:
    """The entry against ``env``; an entry whose ``affects`` lists alternatives is assessed once
    per alternative (:func:`any_of`), its ``issue`` then the alternative that decides."""
    if issue.alternatives:
        return any_of([_assess_one(view, env) for view in issue.views()])
    return _assess_one(issue, env)


def any_of(alternatives: list[Assessment]) -> Assessment:
    """One entry's alternatives as OSV reads several ``affected`` records: it matches where one
    matches, is ruled out only where every one is, and is "cannot tell" otherwise; an alternative
    whose versions are not known is "cannot tell", never dropped. Of several that cannot be told,
    the one a finding would say most of: a known version that agrees (or straddles a bound), then
    one between or just past the reports, then one further past them."""
    matching = [a for a in alternatives if a.verdict is Verdict.MATCHES]
    if matching:
        return matching[0]
    open_ = [a for a in alternatives if a.verdict is Verdict.CANNOT_TELL]
    if open_:
        return min(open_, key=_telling)
    first = alternatives[0]
    return replace(first, disagrees=tuple(dict.fromkeys(line for a in alternatives for line in a.disagrees)))


def _telling(a: Assessment) -> int:
    if (a.version_agrees or a.version_straddles) and a.unreported is None:
        return 0
    if a.unreported in (Place.BETWEEN, Place.NEXT_SERIES) and not a.version_missing:
        return 1
    return 2 if a.unreported is Place.OLDER_REPORT and not a.version_missing else 3


def _assess_one(issue: KnownIssue, env: Environment) -> Assessment:
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
                      tuple(record.disagrees), version_agrees, version_straddles=record.straddles,
                      deciders=tuple(record.deciders), unreported=record.unreported,
                      unreported_key=record.unreported_key, version_missing=record.version_missing)


def _assess_versions(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    for key, text in issue.affects.items():
        read = issue.reading(key)
        have = env.versions.get(key)
        origin = f" ({env.sources[key]})" if key in env.sources else ""
        if have is None and key in env.ranges:
            predicted = env.ranges[key]
            place = read.place_range(parse_specifier(predicted))
            if not _placed_elsewhere(place, read, f"{key} {predicted}{origin}", record, key):
                record.version_missing = record.version_missing or place is Place.UNKNOWN
                record(_tri_of(place), f"{key} {predicted}{origin} is in {text}",
                       f"{key} {predicted}{origin} is not in {text}",
                       f"{key} {text}: only {predicted} is known{origin}", decider=Decider(key, (text,)))
            continue
        if have is None:
            record.version_missing = True
            record(Tri.UNKNOWN, "", "", f"{key} {text}: {env.missing.get(key, 'not known')}",
                   decider=Decider(key, (text,)))
            continue
        place = read.place(have)
        if _placed_elsewhere(place, read, f"{key} {have}{origin}", record, key):
            continue
        record.straddles = record.straddles or place is Place.UNKNOWN
        record(_tri_of(place), f"{key} {have}{origin} is in {text}", f"{key} {have}{origin} is not in {text}",
               f"{key} {have}{origin} cannot be placed against {text}", decider=Decider(key, (text,)))


def _placed_elsewhere(place: Place, read: Reading, have: str, record: _Recorder, key: str) -> bool:
    """A version past the last report with no fix known, or between two reported ranges: neither
    a match nor outside; recorded as "cannot tell" with what the sources do say."""
    if place in PAST or place is Place.BETWEEN:
        worse = _worse(record.unreported, place)
        if worse is not record.unreported:
            record.unreported, record.unreported_key = worse, key
    if place in PAST:
        record.unknown.append(f"{have}: reported up to {read.last_reported}, no fix known")
        return True
    if place is Place.BETWEEN:
        record.unknown.append(f"{have}: reported on {read.shown()}, not on this series")
        return True
    return False


def _worse(a: Place | None, b: Place) -> Place:
    """Of two keys placed past their reports, the one further from a report decides the line."""
    order = (Place.BETWEEN, Place.NEXT_SERIES, Place.OLDER_REPORT)
    return b if a is None or order.index(b) > order.index(a) else a


def _tri_of(place: Place) -> Tri:
    return Tri.YES if place is Place.IN else Tri.NO if place is Place.OUT else Tri.UNKNOWN


def _assess_machine(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    c = issue.conditions
    for low, high, have, unit in ((c.min_gpus, c.max_gpus, env.gpus, "GPU(s)"),
                                  (c.min_workers, c.max_workers, env.workers, "worker(s)")):
        if low is None and high is None:
            continue
        wanted = _count_range(low, high, unit)
        key = "gpus" if unit == "GPU(s)" else "workers"
        if have is None and key == "gpus" and env.gpus_of_training:
            record(Tri.UNKNOWN, "", "", f"when training on {wanted} ({env.missing.get(key, 'not known')})",
                   is_usage=True, decider=Decider(key, (wanted,), training=True))
        elif have is None:
            record(Tri.UNKNOWN, "", "", f"{wanted}: {unit[:-3]} count {env.missing.get(key, 'not known')}",
                   is_usage=key == "workers", decider=Decider(key, (wanted,)))
        else:
            ok = (low is None or have >= low) and (high is None or have <= high)
            came = f" ({env.sources[key]})" if key in env.sources else ""
            record(_tri(ok), f"{have} {unit}{came}, {wanted}", f"{have} {unit}{came}, needs {wanted}", "")
    if c.min_ranks is not None:
        _assess_ranks(c.min_ranks, env, record)
    if c.compute_capability is not None:
        spec = parse_specifier(c.compute_capability)
        if not env.compute_capabilities:
            record(Tri.UNKNOWN, "", "", f"compute capability {c.compute_capability}: "
                   f"{env.missing.get('compute_capability', 'not known')}",
                   decider=Decider("compute_capability", (c.compute_capability,)))
        else:
            answers = [version_in(cc, spec) for cc in env.compute_capabilities]
            answer = (Tri.YES if Tri.YES in answers else Tri.UNKNOWN if Tri.UNKNOWN in answers else Tri.NO)
            shown = ", ".join(sorted(set(env.compute_capabilities)))
            record(answer, f"compute capability {shown} is in {c.compute_capability}",
                   f"compute capability {shown} is not in {c.compute_capability}",
                   f"compute capability {shown} cannot be placed against {c.compute_capability}",
                   decider=Decider("compute_capability", (c.compute_capability,)))
    if c.gpu_names:
        wanted_names = " or ".join(c.gpu_names)
        if env.gpu_names is None:
            record(Tri.UNKNOWN, "", "", f"GPU {wanted_names}: {env.missing.get('gpu_name', 'not known')}",
                   decider=Decider("gpu_name", tuple(c.gpu_names)))
        else:
            hit = sorted({n for n in env.gpu_names for w in c.gpu_names if w.lower() in n.lower()})
            record(_tri(bool(hit)), f"GPU {', '.join(hit)}",
                   f"GPU {', '.join(sorted(set(env.gpu_names))) or '(none)'}, not {wanted_names}", "")
    for name, wanted_value, have_value in (("platform", c.platform, env.platform),
                                            ("CPU vendor", c.cpu_vendor, env.cpu_vendor),
                                            ("CPU arch", c.cpu_arch, env.cpu_arch),
                                            ("interconnect", c.interconnect, env.interconnect),
                                            ("peer access", c.peer_access, env.peer_access),
                                            ("backend", c.backend, env.backend)):
        if wanted_value is None:
            continue
        if have_value is None:
            key = name.lower().replace(" ", "_")
            record(Tri.UNKNOWN, "", "", f"{name} {wanted_value}: {env.missing.get(key, 'not known')}",
                   decider=Decider(key, (wanted_value,)))
        else:
            came = f" ({env.sources[name]})" if name == "backend" and name in env.sources else ""
            record(_tri(have_value == wanted_value), f"{name} {have_value}{came}",
                   f"{name} {have_value}{came}, not {wanted_value}", "")


def _assess_ranks(low: int, env: Environment, record: _Recorder) -> None:
    """NCCL's ranks in a multi-worker job: every GPU of every worker (workers x GPUs per worker)."""
    wanted = f"at least {low} ranks (GPUs over all workers)"
    if env.workers is None:
        record(Tri.UNKNOWN, "", "", f"{wanted}: worker count {env.missing.get('workers', 'not known')}",
               is_usage=True, decider=Decider("workers", (wanted,)))
    elif env.gpus is None:
        record(Tri.UNKNOWN, "", "", f"{wanted}: GPU count {env.missing.get('gpus', 'not known')}",
               decider=Decider("gpus", (wanted,)))
    else:
        ranks = env.workers * env.gpus
        shown = f"{env.workers} worker(s) x {env.gpus} GPU(s) = {ranks} ranks"
        record(_tri(ranks >= low), f"{shown}, {wanted}", f"{shown}, needs {wanted}", "")


def _assess_usage(issue: KnownIssue, env: Environment, record: _Recorder) -> None:
    """How the model is trained: never known from a machine, so "if you ..." unless named."""
    c = issue.conditions

    def origin(key: str) -> str:  # where a training fact came from (the profile), when known
        return f" ({env.sources[key]})" if key in env.sources else ""

    if c.layers:
        wanted_layers = " or ".join(vocab.LAYERS.get(x, x) for x in c.layers)
        if env.layers is None:
            record(Tri.UNKNOWN, "", "", f"if your model uses {wanted_layers} layers", is_usage=True,
                   decider=Decider("layers", tuple(c.layers)))
        else:
            hit = sorted(set(c.layers) & set(env.layers))
            have = f"{', '.join(env.layers) or '(none)'}{origin('layers')}"
            record(_tri(bool(hit)), f"layers {', '.join(hit)}{origin('layers')}",
                   f"layers {have}, not {' or '.join(c.layers)}", "")
    named_usage = env.usage or ()
    used = None if env.usage is None else vocab.with_broader(named_usage)
    for tag in c.usage:
        if used is None or (tag in env.usage_undecided and tag not in used):
            record(Tri.UNKNOWN, "", "", f"if you {vocab.usage_phrase(tag)}", is_usage=True,
                   decider=Decider("usage", (tag,)))
        else:
            cases = [w for w in named_usage if vocab.BROADER_USAGE.get(w) == tag and tag not in named_usage]
            named = f" (named as {cases[0]})" if cases else ""
            record(_tri(tag in used), f"usage {tag}{named}{origin('usage')}",
                   f"usage {', '.join(used) or '(none named)'}{origin('usage')}, not {tag}", "")
    for tag in c.without_usage:  # the trigger is a setting left off: known used, it does not apply
        if used is None or (tag in env.usage_undecided and tag not in used):
            record(Tri.UNKNOWN, "", "", f"unless you {vocab.usage_phrase(tag)}", is_usage=True,
                   decider=Decider("without_usage", (tag,)))
        else:
            record(_tri(tag not in used), f"usage without {tag}{origin('usage')}",
                   f"usage {tag}{origin('usage')}: the trigger is without it", "")
    if c.strategy:
        wanted = " or ".join(vocab.strategy_phrase(s) for s in c.strategy if s != ANY_STRATEGY) \
            or "a distribution strategy"
        if env.strategy is None:
            record(Tri.UNKNOWN, "", "", f"if you train with {wanted}", is_usage=True,
                   decider=Decider("strategy", tuple(c.strategy)))
        else:
            ok = env.strategy in c.strategy or ANY_STRATEGY in c.strategy
            record(_tri(ok), f"strategy {env.strategy}{origin('strategy')}",
                   f"strategy {env.strategy}{origin('strategy')}, not {' or '.join(c.strategy)}", "")
    if c.scenario is not None:
        # not known, or known only as the broader case (an uneven last batch for a last batch of one)
        if env.scenario is None or vocab.BROADER_SCENARIO.get(c.scenario) == env.scenario:
            record(Tri.UNKNOWN, "", "", f"if {vocab.SCENARIOS.get(c.scenario, c.scenario)}", is_usage=True,
                   decider=Decider("scenario", (c.scenario,)))
        else:
            ok = c.scenario in (env.scenario, vocab.BROADER_SCENARIO.get(env.scenario))
            named = f" (named as {env.scenario})" if ok and env.scenario != c.scenario else ""
            record(_tri(ok), f"scenario {c.scenario}{named}{origin('scenario')}",
                   f"scenario {env.scenario}{origin('scenario')}, not {c.scenario}", "")


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


def _only_unreported(a: Assessment) -> bool:
    """Cannot tell because a known version lies past the reports (or between two): not a match,
    whatever else is missing."""
    return a.verdict is Verdict.CANNOT_TELL and a.unreported is not None and not a.version_straddles


def example_problems(issue: KnownIssue) -> list[Problem]:
    """Examples that do not behave as the entry says: a matching one that does not match fully
    (usage included), or a non-matching one that matches or cannot be told (past the last report
    with no fix known, or between two reported ranges, is not a match: it is said as such)."""
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
        # past the last report with no fix known is not a match either: "reported up to X, no fix known"
        if not example.matches and a.verdict is not Verdict.NO_MATCH and not _only_unreported(a):
            problems.append(Problem(issue.origin, issue.id, name,
                                    f"should not match its own entry but {a.verdict.value}"))
    return problems
