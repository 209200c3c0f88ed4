"""Known issues: the data model and loading from `known-issues/*.toml`."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.ranges import Reading, range_texts, reading, span, union_text
from mgpu_doctor.matrix.toml_files import DataFileError, read_versioned
from mgpu_doctor.model.distributions import TF_COMPANIONS
from mgpu_doctor.model.evidence import keeps
from mgpu_doctor.model.versions import Tri, parse_specifier, parse_version, range_in
from mgpu_doctor.record import field, record, replace

SCHEMA_VERSION = 1
# Open MPI and MPICH number their releases independently: one key each, never one `mpi` version.
MPI_KEYS = ("openmpi", "mpich")
# wrong-result: it runs, but gives other numbers than it should (a reloaded model that predicts
# differently, a resumed training that ends elsewhere).
SYMPTOMS = ("hang", "leak", "nan", "crash", "error", "slow", "wrong-result")
CONFIDENCES = ("confirmed", "reported")
VERSION_KEYS = ("tensorflow", "keras", "tf-keras", "python", "cuda", "cudnn", "nccl", "cublas", "driver",
                *TF_COMPANIONS, "jax", "jaxlib", "horovod", *MPI_KEYS, "ray")
LAYERS = tuple(vocab.LAYERS)
ANY_STRATEGY = vocab.ANY_STRATEGY
STRATEGIES = (*vocab.STRATEGIES, ANY_STRATEGY)
SCENARIOS = tuple(vocab.SCENARIOS)
USAGES = tuple(vocab.USAGES)
PLATFORMS = tuple(vocab.PLATFORMS)
CPU_VENDORS = tuple(vocab.CPU_VENDORS)
CPU_ARCHS = tuple(vocab.CPU_ARCHS)
INTERCONNECTS = tuple(vocab.INTERCONNECTS)
PEER_ACCESS = tuple(vocab.PEER_ACCESS)
BACKENDS = tuple(vocab.BACKENDS)
SOURCE_KINDS = ("issue", "pull-request", "commit", "release-note", "doc", "write-up")
CONDITION_KEYS = ("layers", "usage", "without_usage", "min_gpus", "max_gpus", "min_workers", "max_workers",
                  "min_ranks", "strategy", "scenario", "compute_capability", "gpu_names", "platform",
                  "cpu_vendor", "cpu_arch", "interconnect", "peer_access", "backend")
# Conditions on how the model is trained, which a machine's snapshot cannot show.
USAGE_KEYS = ("layers", "usage", "without_usage", "strategy", "scenario")
ISSUE_KEYS = ("id", "title", "symptom", "confidence", "summary", "workaround", "fixed_in",
              "range_closed", "affects", "conditions", "sources", "examples", "signatures", "replaces")
SIGNATURE_KEYS = ("text", "frames", "source", "identifies")
# The one wildcard of a signature: any text within the line (a version, a shape, a path).
WILDCARD = "\u2026"
SIGNATURE_MIN_LITERAL = 20  # literal characters: shorter pieces match too many lines
SIGNATURE_MAX_CHARS = 240
SOURCE_KEYS = ("url", "kind", "title", "verified", "ref", "note")
# Where a release fixes the bug an entry reports: an upper bound on these reads as "fixed in".
FIXED_BY_RELEASE = ("tensorflow", "keras", "tf-keras", "nccl")
# Sources that can name the release a fix is in: the release note, the merged change itself.
FIX_SOURCE_KINDS = ("release-note", "pull-request", "commit")
# A workaround when no source posted one: these words first, and generic advice after them marked.
NONE_POSTED = "None posted"
NONE_CONFIRMED = "None confirmed"  # the sources suggest something that nobody confirmed
GENERIC_ADVICE = "Generic advice:"
# The keys of `matrix query` and of an entry's examples.
ENV_KEYS = VERSION_KEYS + ("gpus", "workers", "layers", "usage", "strategy", "scenario",
                           "compute_capability", "gpu_name", "platform", "cpu_vendor", "cpu_arch",
                           "interconnect", "peer_access", "backend")
KNOWN_ISSUES_DIR = "known-issues"


# The patterns that read an entry's text are compiled on first use: the quick check loads the
# entries from the matrix index, already read, and never needs them (1.4 ms of every run).


@functools.cache
def frame_form() -> re.Pattern[str]:
    """A frame of a stack signature: a function, then its file in parentheses (a wildcard may
    stand anywhere)."""
    return re.compile(r"[^()\s][^()]*? \([^()]*\.(?:py|so)[^()]*\)")


@functools.cache
def _release_number() -> re.Pattern[str]:
    return re.compile(r"\d+\.\d+(?:\.\d+)?")


@functools.cache
def _status_prefix() -> re.Pattern[str]:
    """TensorFlow's status codes as its C++ code prints them before a message ("INVALID_ARGUMENT: ...")."""
    return re.compile(r"(?:invalid_argument|failed_precondition|internal|unavailable|resource_exhausted"
                      r"|unknown|aborted|out_of_range|unimplemented|not_found|cancelled|deadline_exceeded"
                      r"|permission_denied|already_exists|data_loss|unauthenticated): ")


@record
class Source:
    """Where an entry comes from. ``verified`` is true only when someone read it for the entry."""

    url: str
    kind: str
    title: str = ""
    verified: bool = False
    ref: str = ""  # for a write-up without a web address: where it can be found
    note: str = ""

    @property
    def cite(self) -> str:
        return self.url or self.ref


@record
class Conditions:
    """When an entry applies besides its versions; an unset condition holds everywhere."""

    layers: tuple[str, ...] = ()  # any one of them
    usage: tuple[str, ...] = ()  # all of them (vocabulary.USAGES)
    without_usage: tuple[str, ...] = ()  # none of them: the trigger is a setting left off (memory growth)
    min_gpus: int | None = None  # GPUs per worker
    max_gpus: int | None = None
    min_workers: int | None = None  # workers of a multi-worker job
    max_workers: int | None = None
    min_ranks: int | None = None  # GPUs over all workers (workers x GPUs per worker): NCCL's ranks
    strategy: tuple[str, ...] = ()  # any one of them; "any": any distribution strategy
    scenario: str | None = None
    compute_capability: str | None = None
    gpu_names: tuple[str, ...] = ()  # any one of them, a case-insensitive part of NVML's name
    platform: str | None = None
    cpu_vendor: str | None = None
    cpu_arch: str | None = None  # x86_64, aarch64
    interconnect: str | None = None
    peer_access: str | None = None  # NVML's P2P status between the GPUs
    backend: str | None = None  # Keras 3's backend


@record
class Signature:
    """A line the failure prints, as a source shows it, ``…`` standing for what varies.

    ``identifies``: the line alone names this cause; when many causes print it (an out-of-memory
    line, CUDNN_STATUS_INTERNAL_ERROR) it is false, and the entry is named only where the versions
    and conditions fit too.
    """

    text: str
    source: str  # the URL of the entry's source that shows the line
    identifies: bool = True
    # A stack signature instead of a line (``text`` is then ""): frames as py-spy prints them,
    # ``function (file…)``, that one thread of a hung process shows in this order, innermost first.
    frames: tuple[str, ...] = ()

    @property
    def pieces(self) -> tuple[str, ...]:
        """The literal pieces, lowercased with whitespace runs as one space, that a line must hold
        in this order."""
        return tuple(p for p in (" ".join(part.split()).lower() for part in self.text.split(WILDCARD)) if p)

    @property
    def forms(self) -> tuple[tuple[str, ...], ...]:
        """The pieces, and where the line starts with TensorFlow's status code (``INVALID_ARGUMENT:``,
        as its C++ log prints it) the pieces without it: Python shows the same error as
        ``InvalidArgumentError: ...`` or on a line of its own."""
        pieces = self.pieces
        status = _status_prefix().match(pieces[0]) if pieces else None
        if status is None or status.end() >= len(pieces[0]):
            return (pieces,)
        return (pieces, (pieces[0][status.end():], *pieces[1:]))


@record
class Example:
    """An environment (same keys as `matrix query`) the entry must match, or must not."""

    matches: bool
    env: dict[str, Any]


@record
class KnownIssue:
    """One known problem: when it happens (versions, conditions), what to do, who says so."""

    id: str
    title: str
    symptom: str
    confidence: str
    summary: str
    workaround: str
    # key -> PEP 440 specifier text; several ranges of one key (a list in the file) joined by
    # ranges.UNION. Read through :meth:`reading`, which says what the bounds mean.
    affects: dict[str, str]
    conditions: Conditions
    sources: tuple[Source, ...]
    examples: tuple[Example, ...] = ()
    fixed_in: str = ""
    origin: str = ""  # the file it came from
    signatures: tuple[Signature, ...] = ()
    # what a source says closes the range where it ends (the reporter: "2.5.0 works"), though no
    # fix is named: past its last report the entry is then outside, not "no fix known"
    range_closed: str = ""
    replaces: tuple[str, ...] = ()  # the ids of entries merged into this one
    # ``affects`` written as a list of tables: each alternative (all its keys hold), the entry
    # applying where one does (``affects`` is then the first); () for one table. Read through
    # :meth:`views`.
    alternatives: tuple[dict[str, str], ...] = ()
    # each key's range as OSV reads it, parsed when the entry is made (and pickled with it: a run
    # that reads the entry from the index parses no specifier)
    readings: dict[str, Reading] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fixed = bool(self.fixed_in.strip() or self.range_closed.strip())
        object.__setattr__(self, "readings", {k: reading(k, t, fixed) for k, t in self.affects.items()})

    def reading(self, key: str) -> Reading:
        """The range of ``key`` as OSV reads it (``mgpu_doctor.matrix.ranges``)."""
        return self.readings[key]

    def views(self) -> tuple[KnownIssue, ...]:
        """The entry once per alternative of its ``affects``, each with that alternative's ranges
        alone (the entry itself when it has one table): one of them matching is the entry matching,
        as OSV reads several ``affected`` records of one vulnerability."""
        if not self.alternatives:
            return (self,)
        return tuple(replace(self, affects=alt, alternatives=()) for alt in self.alternatives)


def known_issue_line(entry_id: str) -> str:
    """How a finding names the known-issue entry that explains it (smoke, multi-worker smoke)."""
    return f"known issue: {entry_id} (`mgpu-doctor matrix show {entry_id}`)"


class MatrixFileError(Exception):
    """A matrix file is unusable as a whole (unreadable, bad TOML, wrong schema)."""


@record
class Problem:
    """One thing wrong in a matrix directory, precise enough to fix without guessing."""

    file: str
    entry: str  # the issue id, or "" for the file as a whole
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file + (f" [{self.entry}]" if self.entry else "")
        return f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


@record(frozen=False)
class LoadResult:
    """The entries read so far and the problems found in them."""

    issues: list[KnownIssue] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return read_versioned(path, SCHEMA_VERSION)
    except DataFileError as exc:
        raise MatrixFileError(f"{exc.field} {exc}" if exc.field else str(exc)) from None


def load_known_issue_files(paths: list[Path]) -> LoadResult:
    """Every entry that is valid, and every problem found; one bad entry spoils only itself."""
    result = LoadResult()
    seen: dict[str, str] = {}
    primaries: dict[str, tuple[str, str]] = {}  # primary issue URL -> (first entry citing it, its note)
    where: dict[str, str] = {}  # entry id -> its file
    for path in paths:
        try:
            data = read_toml(path)
        except MatrixFileError as exc:
            result.problems.append(Problem(str(path), "", "", str(exc)))
            continue
        unknown = set(data) - {"schema_version", "issue"}
        for key in sorted(unknown):
            result.problems.append(Problem(str(path), "", key, "unknown top-level key"))
        entries = data.get("issue", [])
        if not isinstance(entries, list):
            result.problems.append(Problem(str(path), "", "issue", "must be an array of tables"))
            continue
        for index, raw in enumerate(entries):
            issue, problems = parse_issue(raw, str(path), index)
            result.problems.extend(problems)
            if issue is None:
                continue
            if issue.id in seen:
                result.problems.append(Problem(str(path), issue.id, "id",
                                               f"duplicate id (also in {seen[issue.id]})"))
                continue
            first = issue.sources[0]
            primary = first.url if first.kind == "issue" else ""
            retold = primaries.get(primary)
            if retold and not ("comment" in first.note and "comment" in retold[1]):
                result.problems.append(Problem(
                    str(path), issue.id, "sources[0].url",
                    f"the primary source of {retold[0]} too: one entry per upstream report (add it to that "
                    "entry as another source; two reports in one thread name their comments in the notes)"))
                continue
            seen[issue.id] = str(path)
            if primary:
                primaries.setdefault(primary, (issue.id, first.note))
            result.issues.append(issue)
            where[issue.id] = str(path)
    result.problems.extend(_shared_identifying_lines(result.issues, where))
    result.problems.extend(_replaced_ids(result.issues, where))
    return result


def _replaced_ids(issues: list[KnownIssue], where: dict[str, str]) -> list[Problem]:
    """An id merged into another entry (``replaces``) is gone: not an entry any more, and merged
    into one entry only (acknowledgements naming it apply to that one)."""
    problems = []
    merged_into: dict[str, str] = {}
    for issue in issues:
        for n, old in enumerate(issue.replaces):
            if old in where:
                problems.append(Problem(where[issue.id], issue.id, f"replaces[{n}]",
                                        f"{old!r} is still an entry ({where[old]}): remove it once merged "
                                        "here"))
            elif old in merged_into:
                problems.append(Problem(where[issue.id], issue.id, f"replaces[{n}]",
                                        f"{old!r} is replaced by {merged_into[old]!r} too: an id is merged "
                                        "into one entry"))
            else:
                merged_into[old] = issue.id
    return problems


def _shared_identifying_lines(issues: list[KnownIssue], where: dict[str, str]) -> list[Problem]:
    """A line two entries print names neither alone: an identifying line must be its entry's only."""
    printed: dict[str, list[str]] = {}
    for issue in issues:
        for sig in issue.signatures:
            if sig.text:
                printed.setdefault(" ".join(sig.text.lower().split()), []).append(issue.id)
    problems = []
    for issue in issues:
        for n, sig in enumerate(issue.signatures):
            others = [i for i in printed.get(" ".join(sig.text.lower().split()), []) if i != issue.id]
            if sig.text and sig.identifies and others:
                names = sorted(set(others))
                problems.append(Problem(
                    where[issue.id], issue.id, f"signatures[{n}].identifies",
                    f"{', '.join(names)} print{'s' if len(names) == 1 else ''} the same line: "
                    "a line two entries print names neither alone (identifies = false), or merge them "
                    "if they are one cause"))
    return problems


def parse_issue(raw: Any, file: str, index: int) -> tuple[KnownIssue | None, list[Problem]]:
    entry = raw.get("id", f"#{index + 1}") if isinstance(raw, dict) else f"#{index + 1}"
    problems: list[Problem] = []

    def bad(field_name: str, message: str) -> None:
        problems.append(Problem(file, str(entry), field_name, message))

    if not isinstance(raw, dict):
        bad("", "an [[issue]] must be a table")
        return None, problems
    for key in sorted(set(raw) - set(ISSUE_KEYS)):
        bad(key, "unknown field")
    text = {}
    for key in ("id", "title", "symptom", "confidence", "summary", "workaround"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            bad(key, "required, a non-empty string")
        text[key] = value if isinstance(value, str) else ""
    if text["id"] and not all(c.islower() or c.isdigit() or c == "-" for c in text["id"]):
        bad("id", "only lowercase letters, digits and '-'")
    _choice(text["symptom"], SYMPTOMS, "symptom", bad)
    _choice(text["confidence"], CONFIDENCES, "confidence", bad)
    fixed_in = raw.get("fixed_in", "")
    if not isinstance(fixed_in, str):
        bad("fixed_in", "must be a string")
        fixed_in = ""
    range_closed = raw.get("range_closed", "")
    if not isinstance(range_closed, str):
        bad("range_closed", "must be a string: what a source says closes the range")
        range_closed = ""
    replaces = _word_list(raw, "replaces", None, bad, where="replaces")
    alternatives = _alternatives(raw.get("affects", {}), bad)
    affects = alternatives[0] if alternatives else {}
    conditions = _conditions(raw.get("conditions", {}), bad)
    sources = _sources(raw.get("sources"), bad)
    examples = _examples(raw.get("examples", []), bad)
    signatures = _signatures(raw.get("signatures", []), sources, bad)
    if not problems:
        _as_sources_say(alternatives, fixed_in, text["workaround"], sources, bad)
    if problems:
        return None, problems
    return KnownIssue(
        id=text["id"], title=text["title"], symptom=text["symptom"],
        confidence=text["confidence"], summary=text["summary"], workaround=text["workaround"],
        affects=affects, conditions=conditions, sources=sources, examples=examples,
        fixed_in=fixed_in, origin=file, signatures=signatures, range_closed=range_closed,
        replaces=replaces, alternatives=alternatives if len(alternatives) > 1 else (),
    ), []


def _as_sources_say(alternatives: tuple[dict[str, str], ...], fixed_in: str, workaround: str,
                    sources: tuple[Source, ...], bad: Any) -> None:
    """The rules of "every entry as its sources say" that a machine can hold (matrices/README.md)."""
    for n, affects in enumerate(alternatives):
        where = "affects" if len(alternatives) == 1 else f"affects[{n}]"
        for key, text in ((k, t) for k, union in affects.items() for t in range_texts(union)):
            _bound_as_said(f"{where}.{key}", key, text, fixed_in, bad)
    _fix_and_workaround_as_said(fixed_in, workaround, sources, bad)


def _bound_as_said(where: str, key: str, text: str, fixed_in: str, bad: Any) -> None:
    """A range's bounds: a short version is its series, an upper bound on a release is a fix."""
    for one in parse_specifier(text):
        short = _short_bound(one.operator, one.version)
        if short:
            bad(where, short)
        # "<1.13.dev0" is "up to the last 1.12 release" (a series as the reporter wrote it), no fix;
        # a bound on cuDNN, CUDA, the driver or a companion package is a compatibility limit
        if (key in FIXED_BY_RELEASE and one.operator == "<" and not fixed_in.strip()
                and not one.version.endswith(".dev0")):
            bad(where, f"the upper bound {one} reads as a fix, but fixed_in is empty: name "
                "the release that fixed it in fixed_in, or bound by the last reported version (<=X.Y.Z, "
                "or <X.Y.dev0 for a series as written)")


def _fix_and_workaround_as_said(fixed_in: str, workaround: str, sources: tuple[Source, ...],
                                bad: Any) -> None:
    if fixed_in.strip():
        named = set(_release_number().findall(fixed_in))
        if not any(s.kind in FIX_SOURCE_KINDS for s in sources) and \
                not any(n in s.note for s in sources for n in named):
            bad("fixed_in", f"no source says so: cite a {', '.join(FIX_SOURCE_KINDS)}, or a source whose "
                f"note names the release ({', '.join(sorted(named)) or 'fixed_in names none'})")
    # "No fix in the thread. Try ..." hides our own advice behind the thread's silence
    says_none = re.match(r"(?i)(none|no (fix|workaround|cause))\b", workaround.strip()) is not None
    if says_none and not workaround.startswith((NONE_POSTED, NONE_CONFIRMED)):
        bad("workaround", f"when no source posted one, it starts with {NONE_POSTED!r} (or {NONE_CONFIRMED!r} "
            "when the sources suggest something nobody confirmed)")
    # "None posted (in the thread)." or "None confirmed ...", then, if anything, "From <source>: ..."
    # (what a source said) or "Generic advice (not from the thread): ..." (our own)
    for none in (NONE_POSTED, NONE_CONFIRMED):
        opening = re.match(re.escape(none) + r"[^.;(]*(?:\([^)]*\))?[^.;]*[.;]?\s*(.*)", workaround, re.S)
        rest = opening.group(1).strip() if opening else ""
        if rest and "From " not in rest and GENERIC_ADVICE.rstrip(":").lower() not in rest.lower():
            bad("workaround", f"after {none!r}, advice of our own is marked {GENERIC_ADVICE!r} (what a "
                "source said: 'From <source>: ...')")
    seen: set[str] = set()
    for i, src in enumerate(sources):
        if src.url and src.url in seen:
            bad(f"sources[{i}].url", "cited twice in this entry")
        seen.add(src.url)
        if src.url.startswith("https://github.com/"):
            wanted = {"issue": "/issues/", "pull-request": "/pull/", "commit": "/commit"}.get(src.kind)
            if wanted is not None and wanted not in src.url:
                bad(f"sources[{i}].url", f"a {src.kind} on GitHub is a {wanted.strip('/')} address: "
                    f"{src.url}")


def _short_bound(operator: str, text: str) -> str:
    """Why ``<=2.3`` / ``==2.10`` do not say what a reporter's "2.3" means (any 2.3.x), or ""."""
    if operator not in ("<=", "==") or text.endswith(".*") or not re.fullmatch(r"\d+(\.\d+)?", text):
        return ""
    major, _, minor = text.partition(".")
    series = f"{text}.x" if minor else f"{major}.x"
    after = f"{major}.{int(minor) + 1}" if minor else str(int(major) + 1)
    written = f"<{after}.dev0" if operator == "<=" else f"=={text}.*"
    return (f"{operator}{text} admits {text}.0 only, not the rest of {series}: write {written} for any "
            f"{series} as reported, or {operator}{text}.0")


def _choice(value: Any, allowed: tuple[str, ...], name: str, bad: Any) -> None:
    if value and value not in allowed:
        bad(name, f"{value!r} is not one of {', '.join(allowed)}")


def _alternatives(raw: Any, bad: Any) -> tuple[dict[str, str], ...]:
    """``affects``: one table (every key holds), or a list of tables, alternatives of which one
    holding is enough (one mechanism reported under TensorFlow's versions by one thread and under
    NCCL's by another). Each alternative names at least one range."""
    if not isinstance(raw, list):
        one = _affects(raw, bad, "affects")
        if not one and isinstance(raw, dict) and not raw:
            bad("affects", "at least one version range is required (an entry for every version "
                "would warn everyone)")
        return (one,) if one else ()
    if len(raw) < 2:
        bad("affects", "a list holds two or more alternative tables (one alternative is a table)")
        return ()
    out: list[dict[str, str]] = []
    for n, table in enumerate(raw):
        where = f"affects[{n}]"
        one = _affects(table, bad, where)
        if isinstance(table, dict) and not table:
            bad(where, "an alternative names at least one version range")
        elif one and one in out:
            bad(where, f"the same ranges as affects[{out.index(one)}]")
        out.append(one)
    return tuple(out)


def _affects(raw: Any, bad: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        bad(where, "must be a table (or a list of tables: alternatives)" if where == "affects"
            else "must be a table")
        return {}
    out = {}
    for key, value in raw.items():
        if key not in VERSION_KEYS:
            bad(f"{where}.{key}", f"unknown key; allowed: {', '.join(VERSION_KEYS)}")
            continue
        texts = value if isinstance(value, list) else [value]
        if not texts or not all(isinstance(t, str) for t in texts):
            bad(f"{where}.{key}", "must be a specifier string such as \">=2.0,<2.4\" (or a list of them: one "
                "cause reported on several series)")
            continue
        try:
            for text in texts:
                parse_specifier(text)
        except ValueError as exc:
            bad(f"{where}.{key}", str(exc))
            continue
        if isinstance(value, list) and not _disjoint_in_order(f"{where}.{key}", texts, bad):
            continue
        out[key] = union_text(texts)
    return out


def _disjoint_in_order(where: str, texts: list[str], bad: Any) -> bool:
    """A list of ranges is a union of reports: two or more, oldest first, none overlapping."""
    if len(texts) < 2:
        bad(where, "a list holds two or more ranges (one range is a string)")
        return False
    for earlier, later in zip(texts, texts[1:], strict=False):
        end, start = span(earlier).end, parse_version(_first_of(later))
        if end is None or start is None or start < end \
                or range_in(parse_specifier(earlier), parse_specifier(later)) is not Tri.NO:
            bad(where, f"{earlier!r} then {later!r}: the ranges of a list are oldest first, each "
                "bounded above, and do not overlap")
            return False
    return True


def _first_of(text: str) -> str:
    """The lower bound a range names ("" when none)."""
    return next((one.version.removesuffix(".*") for one in parse_specifier(text)
                 if one.operator in (">=", ">", "==", "~=")), "")


def _conditions(raw: Any, bad: Any) -> Conditions:
    if not isinstance(raw, dict):
        bad("conditions", "must be a table")
        return Conditions()
    for key in sorted(set(raw) - set(CONDITION_KEYS)):
        bad(f"conditions.{key}", f"unknown condition; allowed: {', '.join(CONDITION_KEYS)}")
    lists = {key: _word_list(raw, key, allowed, bad)
             for key, allowed in (("layers", LAYERS), ("usage", USAGES), ("without_usage", USAGES),
                                  ("strategy", STRATEGIES), ("gpu_names", None))}
    for word in sorted(set(lists["usage"]) & set(lists["without_usage"])):
        bad("conditions.without_usage", f"{word!r} is in usage too: the entry can never match")
    counts: dict[str, int | None] = {}
    for key in ("min_gpus", "max_gpus", "min_workers", "max_workers", "min_ranks"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            bad(f"conditions.{key}", "must be a positive integer")
            value = None
        counts[key] = value
    for low, high in (("min_gpus", "max_gpus"), ("min_workers", "max_workers")):
        if counts[low] and counts[high] and counts[low] > counts[high]:  # type: ignore[operator]
            bad(f"conditions.{high}", f"smaller than {low}: the entry can never match")
    strings: dict[str, str | None] = {}
    for key, allowed in (("scenario", SCENARIOS), ("platform", PLATFORMS), ("cpu_vendor", CPU_VENDORS),
                         ("cpu_arch", CPU_ARCHS), ("interconnect", INTERCONNECTS),
                         ("peer_access", PEER_ACCESS), ("backend", BACKENDS)):
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            bad(f"conditions.{key}", "must be a string")
            value = None
        _choice(value, allowed, f"conditions.{key}", bad)
        strings[key] = value
    cc = raw.get("compute_capability")
    if cc is not None and not isinstance(cc, str):
        bad("conditions.compute_capability", "must be a specifier string such as \"==7.5\"")
        cc = None
    if cc is not None:
        try:
            parse_specifier(cc)
        except ValueError as exc:
            bad("conditions.compute_capability", str(exc))
            cc = None
    return Conditions(
        layers=lists["layers"], usage=lists["usage"], without_usage=lists["without_usage"],
        strategy=lists["strategy"], gpu_names=lists["gpu_names"],
        min_gpus=counts["min_gpus"], max_gpus=counts["max_gpus"], min_workers=counts["min_workers"],
        max_workers=counts["max_workers"], min_ranks=counts["min_ranks"], scenario=strings["scenario"],
        compute_capability=cc,
        platform=strings["platform"], cpu_vendor=strings["cpu_vendor"], cpu_arch=strings["cpu_arch"],
        interconnect=strings["interconnect"],
        peer_access=strings["peer_access"], backend=strings["backend"],
    )


def _word_list(raw: dict[str, Any], key: str, allowed: tuple[str, ...] | None, bad: Any,
               where: str = "") -> tuple[str, ...]:
    """A list of words (a single string is a list of one), each from ``allowed`` when given."""
    value = raw.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        bad(where or f"conditions.{key}", "must be a list of non-empty strings")
        return ()
    if allowed is not None:
        for word in value:
            _choice(word, allowed, f"conditions.{key}", bad)
    return tuple(value)


def _tables(raw: list[Any], field_name: str, keys: tuple[str, ...], not_a_table: str,
            bad: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each table of an array field with its name (``sources[2]``); others and unknown keys are
    problems."""
    for i, item in enumerate(raw):
        name = f"{field_name}[{i}]"
        if not isinstance(item, dict):
            bad(name, not_a_table)
            continue
        for key in sorted(set(item) - set(keys)):
            bad(f"{name}.{key}", f"unknown field; allowed: {', '.join(keys)}")
        yield name, item


def _sources(raw: Any, bad: Any) -> tuple[Source, ...]:
    if not isinstance(raw, list) or not raw:
        bad("sources", "at least one source is required")
        return ()
    out = []
    for name, src in _tables(raw, "sources", SOURCE_KEYS, "must be a table", bad):
        url, ref = src.get("url", ""), src.get("ref", "")
        if not isinstance(url, str) or not isinstance(ref, str):
            bad(name, "url and ref must be strings")
            continue
        if not url and not ref:
            bad(name, "needs a url (or, for a write-up, a ref)")
        if url and not url.startswith(("https://", "http://")):
            bad(f"{name}.url", f"not a web address: {url!r}")
        kind = src.get("kind", "")
        _choice(kind, SOURCE_KINDS, f"{name}.kind", bad)
        if not kind:
            bad(f"{name}.kind", f"required, one of {', '.join(SOURCE_KINDS)}")
        verified = src.get("verified", False)
        if not isinstance(verified, bool):
            bad(f"{name}.verified", "must be true or false")
        out.append(Source(url=url, kind=str(kind), title=str(src.get("title", "")),
                          verified=verified is True, ref=ref, note=str(src.get("note", ""))))
    return tuple(out)


def _examples(raw: Any, bad: Any) -> tuple[Example, ...]:
    if not isinstance(raw, list):
        bad("examples", "must be an array of tables")
        return ()
    out = []
    for i, ex in enumerate(raw):
        name = f"examples[{i}]"
        if not isinstance(ex, dict) or not isinstance(ex.get("matches"), bool) \
                or not isinstance(ex.get("env"), dict):
            bad(name, "needs matches = true|false and an env table")
            continue
        for key in sorted(set(ex["env"]) - set(ENV_KEYS)):
            bad(f"{name}.env.{key}", f"unknown key; allowed: {', '.join(ENV_KEYS)}")
        out.append(Example(matches=ex["matches"], env=dict(ex["env"])))
    return tuple(out)


def _signatures(raw: Any, sources: tuple[Source, ...], bad: Any) -> tuple[Signature, ...]:
    if not isinstance(raw, list):
        bad("signatures", "must be an array of tables")
        return ()
    cited = {s.cite for s in sources if s.cite}  # a URL, or a write-up's ref (the doctor's own reproduction)
    out = []
    for name, sig in _tables(raw, "signatures", SIGNATURE_KEYS, "must be a table with text and source", bad):
        text, source, identifies = sig.get("text"), sig.get("source"), sig.get("identifies", True)
        if not isinstance(identifies, bool):
            bad(f"{name}.identifies", "must be true or false")
            continue
        if "frames" in sig:
            frames = _frame_signature(sig["frames"], text, f"{name}.frames", bad)
            if frames and (not isinstance(source, str) or source not in cited):
                bad(f"{name}.source", "the URL (or a write-up's ref) of one of this entry's sources, the one "
                    "whose thread shows the frames")
            if frames:
                out.append(Signature("", str(source), identifies, frames))
            continue
        if not isinstance(text, str) or not text.strip():
            bad(f"{name}.text", "required, the line as the source shows it (or frames, a stack)")
            continue
        signature = Signature(text.strip(), source if isinstance(source, str) else "", identifies)
        literal = sum(len(p) for p in signature.pieces)
        if "\n" in text.strip():
            bad(f"{name}.text", "one line: the pieces are matched within a single line")
        elif len(text) > SIGNATURE_MAX_CHARS:
            bad(f"{name}.text", f"{len(text)} characters, at most {SIGNATURE_MAX_CHARS}: keep the "
                "telling part")
        elif literal < SIGNATURE_MIN_LITERAL:
            bad(f"{name}.text", f"{literal} literal characters besides {WILDCARD}, at least "
                f"{SIGNATURE_MIN_LITERAL}: a shorter line matches too many failures")
        elif not keeps(text.replace(WILDCARD, " ")):
            bad(f"{name}.text", "not a line the doctor keeps as evidence (it names none of the words of "
                "mgpu_doctor/model/evidence.py EVIDENCE_WORDS): it could never be matched")
        if not signature.source or signature.source not in cited:
            bad(f"{name}.source", "the URL (or a write-up's ref) of one of this entry's sources, the one "
                "whose thread shows the line")
        out.append(signature)
    return tuple(out)


def _frame_signature(raw: Any, text: Any, where: str, bad: Any) -> tuple[str, ...]:
    """A stack signature: ``function (file…)`` lines, innermost first, with enough literal text."""
    if text is not None:
        bad(where, "a signature is a line (text) or a stack (frames), not both")
        return ()
    if not isinstance(raw, list) or not raw or not all(isinstance(f, str) and f.strip() for f in raw):
        bad(where, "must be a non-empty array of frames, `function (file…)` as py-spy prints them")
        return ()
    frames = tuple(" ".join(f.split()) for f in raw)
    for i, frame in enumerate(frames):
        if not frame_form().fullmatch(frame):
            bad(f"{where}[{i}]", f"{frame!r} is not `function (file…)`: the function, then its file in "
                "parentheses (`OrderedEnqueuer.get (keras/src/trainers/data_adapters/…)`)")
            return ()
        if len(frame) > SIGNATURE_MAX_CHARS:
            bad(f"{where}[{i}]", f"{len(frame)} characters, at most {SIGNATURE_MAX_CHARS}")
            return ()
    literal = sum(len(p) for f in frames for p in f.split(WILDCARD))
    if literal < SIGNATURE_MIN_LITERAL:
        bad(where, f"{literal} literal characters besides {WILDCARD}, at least {SIGNATURE_MIN_LITERAL}: "
            "fewer match too many stacks")
        return ()
    return frames


def known_issue_paths(directory: Path) -> list[Path]:
    """The known-issue files of a matrix directory: ``DIR/known-issues/*.toml``, else ``DIR/*.toml``."""
    sub = directory / KNOWN_ISSUES_DIR
    return sorted((sub if sub.is_dir() else directory).glob("*.toml"))


@record
class Matrix:
    """The known issues in use: the bundled ones, with a team's own (``--matrix DIR``) on top.

    A team entry with a bundled entry's id replaces it. ``problems`` are the files or entries
    that could not be used; everything else still is.
    """

    issues: tuple[KnownIssue, ...]
    problems: tuple[Problem, ...]
    sources: tuple[str, ...]  # the directories read, bundled first

    def get(self, issue_id: str) -> KnownIssue | None:
        return next((i for i in self.issues if i.id == issue_id), None)

    @property
    def replaced(self) -> dict[str, str]:
        """The ids merged into another entry, each with the entry it became."""
        return replaced_ids(self.issues)


def replaced_ids(issues: tuple[KnownIssue, ...] | list[KnownIssue]) -> dict[str, str]:
    """Each id some entry ``replaces`` -> that entry's id (an entry with the id itself keeps it)."""
    present = {i.id for i in issues}
    return {old: i.id for i in issues for old in i.replaces if old not in present}


def load_matrix(bundled: Path, extra: list[Path] | tuple[Path, ...] = ()) -> Matrix:
    base = load_known_issue_files(known_issue_paths(bundled))
    problems = list(base.problems)
    if not base.issues and not base.problems:
        problems.append(Problem(str(bundled), "", "", "no known-issue files found"))
    issues = {i.id: i for i in base.issues}
    if extra:
        team_paths: list[Path] = []
        for directory in extra:
            found = known_issue_paths(directory)
            if not found:
                problems.append(Problem(str(directory), "", "",
                                        "no *.toml files (expected DIR/known-issues/*.toml or DIR/*.toml)"))
            team_paths += found
        team = load_known_issue_files(team_paths)
        problems += team.problems
        issues.update({i.id: i for i in team.issues})
    return Matrix(tuple(issues.values()), tuple(problems), (str(bundled),) + tuple(str(d) for d in extra))
