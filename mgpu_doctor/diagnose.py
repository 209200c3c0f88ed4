"""The one pipeline behind `check`, `report`, `libs` and `matrix query` (and the short ones of
`fleet` and `hang`; `smoke`: ``smoke_pipeline.py``, `devices` and `snapshot`: ``gathering.py``):

facts (gathered here, or read from a file) -> one resolved environment -> checks -> smoke
trainings -> gates -> acknowledgements -> redaction -> the report.

Everything that can be wrong with the options or the bundled data fails here, before any
probing, as :class:`~mgpu_doctor.errors.BadInput` (exit 2). No argparse below the CLI: the CLI
turns its namespace into a :class:`DiagnoseOptions`.

Imported where they are used, so that `check --quick` does not pay for them: the acknowledgements
file's reader (``gate.acks``: only where there is such a file), the reading of the user's code
(``training.code``, with ``--code`` or a paste), the model's observation (``probes.user_model``,
``training.observed``: ``--model``), a paste's launch lines (``training.launches``), and the
smoke, hang, drift and paste packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mgpu_doctor import __version__
from mgpu_doctor.checks import VERSION_RULES, Check, known_issues, run_check
from mgpu_doctor.checks.base import mostly_skipped
from mgpu_doctor.environment.devices import device_rows
from mgpu_doctor.environment.resolve import ResolvedEnvironment, resolve
from mgpu_doctor.errors import BadInput
from mgpu_doctor.gate import DEFAULT_FILE
from mgpu_doctor.gate.requirements import REQUIREMENT_CHECKS, Requirements, layer_outcomes, requirement_checks
from mgpu_doctor.matrix.compat_tables import CompatTableError, bundled_cuda_driver_table, load_bundled_tables
from mgpu_doctor.matrix.environment import BadEnvironment
from mgpu_doctor.matrix.implied_tables import load_implied_tables
from mgpu_doctor.matrix.known_issues import VERSION_KEYS
from mgpu_doctor.model.evidence import EvidenceText, evidence_lines
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Section
from mgpu_doctor.model.redact import Identity, mask_snapshot, redact_report
from mgpu_doctor.model.report import Report, new_report
from mgpu_doctor.model.serde import SchemaError, from_jsonable
from mgpu_doctor.model.snapshot import NotJsonText, Snapshot, SnapshotLoadError, load_document, meant_as_json
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.user_model import MODEL_CHECK
from mgpu_doctor.probes.gather import GatherOptions, Progress, gather_snapshot
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import field, record, replace
from mgpu_doctor.training.apply import with_training
from mgpu_doctor.training.declared import checked_recorded, over_recorded, query_profile

if TYPE_CHECKING:
    import datetime as _dt

    from mgpu_doctor.hang.section import HangRequest
    from mgpu_doctor.model.hang import HangReading
    from mgpu_doctor.model.libraries import LibrariesView
    from mgpu_doctor.model.smoke_runs import SmokeRun
    from mgpu_doctor.model.user_model import ModelObservation, ModelRequest
    from mgpu_doctor.smoke.judged import SmokeSection
    from mgpu_doctor.smoke.request import SmokeRequest
    from mgpu_doctor.training.code import CodeReading

EnvCheck = Check[ResolvedEnvironment]


@record
class DiagnoseOptions:
    """What decides the facts and the verdict (`check`, `report`, `libs`, the pytest plugin)."""

    command: str
    checks: tuple[EnvCheck, ...]
    quick: bool = False
    level: str = ""  # the --level asked for (`check`, `report`); "" for the callers without levels
    from_file: Path | None = None
    interpreter: Interpreter | None = None  # None: the doctor's own
    smoke: SmokeRequest | None = None  # None: no smoke trainings
    matrix_dirs: tuple[Path, ...] = ()
    requirements: Requirements = field(default_factory=Requirements)
    ack_file: Path | None = None  # --ack FILE (must exist); None: .mgpu-doctor.toml if present
    baseline: Path | None = None  # --baseline FILE: a known-good run to say what changed since
    redact: bool = True
    libraries_view: bool = False  # `libs`: the report carries the library table
    today: _dt.date | None = None  # for acknowledgement expiry; None: today
    # How the user trains, declared in the project's files and the options (--strategy, --usage, ...)
    training: TrainingProfile = field(default_factory=TrainingProfile)
    model: ModelRequest | None = None  # --model: the user's model, built and read in a child
    logs: tuple[Path, ...] = ()  # --log FILE: training logs whose lines may show the failure
    code: tuple[Path, ...] = ()  # --code PATH: the user's training code, read and never run
    hang: HangRequest | None = None  # `report --hang`: read the running job too


@record
class Diagnosis:
    report: Report
    interrupted: bool  # Ctrl-C cut the smoke trainings short; the report has what finished


@record
class Facts:
    """What the verdict is about: this machine, or a file (with the smoke runs it recorded)."""

    snapshot: Snapshot
    source: str
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    level: str = ""  # the level the file's report ran at, where it says
    training: TrainingProfile | None = None  # the training profile the file's report recorded
    code: CodeReading | None = None  # a paste's code blocks, read and never run
    hang: HangReading | None = None  # the hung job a report recorded (`report --hang`)
    recorded_only: list[CheckOutcome] = field(default_factory=list)  # see recorded_outcomes


def diagnose(options: DiagnoseOptions, progress: Progress | None = None,
             stream: TextIO | None = None) -> Diagnosis:
    """Run the pipeline; ``progress`` hears about slow steps, ``stream`` gets the smoke progress."""
    if options.from_file is not None and options.interpreter is not None:
        raise BadInput("--from and --python cannot be used together")
    if options.from_file is not None and options.model is not None:
        raise BadInput("--from and --model cannot be used together: the model is built where the "
                       "doctor runs; a report made with --model carries what it observed")
    checks = with_team_matrix(options.checks, options.matrix_dirs)
    load_tables()
    logs = read_logs(options.logs)
    readings = [read_user_code(path) for path in options.code]
    facts = obtain_facts(options, progress)
    readings = ([facts.code] if facts.code is not None else []) + readings
    original = replace(facts.snapshot, logs=facts.snapshot.logs + logs) if logs else facts.snapshot
    training = over_recorded(facts.training, options.training)
    if original.pasted is not None:  # a horovodrun/mpirun line says how the job trains
        from mgpu_doctor.training.launches import with_launches

        training = with_launches(training, original.pasted)
    model = model_section(options, progress)
    if model is not None and model[1] is not None:
        from mgpu_doctor.training.observed import with_observed

        training = with_observed(training, model[1])
    code_outcomes: list[CheckOutcome] = []
    if readings:
        from mgpu_doctor.training.code import code_outcome, with_code

        for reading in readings:
            training = with_code(training, reading)
        code_outcomes = [code_outcome(reading) for reading in readings]
    env = with_training(resolve(original), training)
    outcomes = [run_check(c, env) for c in checks]
    outcomes += [model[0]] if model is not None else []
    outcomes += code_outcomes
    notes: list[str] = []
    if original.pasted is not None:  # what the paste's own log lines prove, and what was read
        from mgpu_doctor.pasted.findings import PASTED_CHECK
        from mgpu_doctor.pasted.notes import pasted_notes

        outcomes.append(run_check(PASTED_CHECK, env))
        notes += pasted_notes(original.pasted)
    outcomes += [o for o in [mostly_skipped(outcomes)] if o is not None]
    section = smoke_section(options, facts, stream, training, env, model[1] if model is not None else None)
    gates = requirement_checks(options.requirements,
                               layer_outcomes(section.runs if section is not None else None))
    outcomes += [replace(o, section=Section.SMOKE) for o in (section.outcomes if section is not None else [])]
    outcomes += [run_check(c, env) for c in gates]
    outcomes += [o for o in facts.recorded_only if o.name not in {c.name for c in outcomes}]
    hang = hang_section(options, facts, progress)
    if hang is not None:
        from mgpu_doctor.hang.section import hang_check

        outcomes.insert(0, hang_check(hang, options.matrix_dirs))
    drift = None
    if options.baseline is not None:  # what changed since a known-good run, listed first
        from mgpu_doctor.drift.baseline import load_baseline
        from mgpu_doctor.drift.compare import compare
        from mgpu_doctor.drift.findings import drift_outcome

        baseline = load_baseline(options.baseline, checks)
        drift = compare(baseline.snapshot, original, baseline_source=baseline.source,
                        then_checks=baseline.checks, now_checks=outcomes, then_smoke=baseline.smoke_runs,
                        now_smoke=section.runs if section is not None else [])
        outcomes.insert(0, drift_outcome(drift))
    view = libraries_table(env) if options.libraries_view else None
    notes += list(section.notes) if section is not None else []
    if isinstance(view, Unavailable):
        notes.append(f"No library facts in {facts.source}: {view}")
        view = None
    report = new_report(
        options.command, facts.source, outcomes, tool_version=__version__,
        snapshot=original,
        quick=options.quick and options.from_file is None, notes=notes,
        smoke_runs=section.runs if section is not None else [], devices=device_rows(original),
        libraries=view, level=options.level if options.from_file is None else "", drift=drift,
        training=training, hang=hang,
    )
    report = acknowledge(report, options)
    if options.redact:
        report = redact_report(report, original, Identity.current())
    return Diagnosis(report, section is not None and section.interrupted)


def read_logs(paths: tuple[Path, ...]) -> list[EvidenceText]:
    """``--log FILE``: the lines of each log that may show a failure (bad files: exit 2)."""
    from mgpu_doctor.process.inputs import InputError, read_log_tail

    texts = []
    for path in paths:
        try:
            text, skipped = read_log_tail(path)
        except (OSError, InputError) as exc:
            raise BadInput(f"--log {path}: {getattr(exc, 'strerror', None) or exc}") from None
        lines = text.splitlines()
        size = len(text.encode())
        last = f"{size // 2**20} MiB" if size >= 2**20 else f"{size // 2**10} KiB"
        origin = str(path) + (f" (its last {last})" if skipped else "")
        texts.append(EvidenceText(origin, evidence_lines(lines), len(lines)))
    return texts


def read_user_code(path: Path) -> CodeReading:
    """``--code PATH``: the strategy, layers and usage the user's code shows (a bad path: exit 2)."""
    from mgpu_doctor.probes.code_files import python_sources
    from mgpu_doctor.training.code import read_code

    try:
        sources = python_sources(path)
    except OSError as exc:
        raise BadInput(f"--code {path}: {exc.strerror or exc}") from None
    if not sources.files:
        raise BadInput(f"--code {path}: no Python file (.py, .ipynb) there"
                       + (f" that could be read ({sources.skipped[0]})" if sources.skipped else ""))
    return read_code(str(path), sources.files, sources.skipped)


def libraries_table(env: ResolvedEnvironment) -> LibrariesView | Unavailable:
    from mgpu_doctor.environment.library_view import library_view  # `libs` only

    return library_view(env, bundled_cuda_driver_table())


def judge_snapshot(snapshot: Snapshot, checks: tuple[EnvCheck, ...], *, command: str, source: str,
                   quick: bool = False, tool_version: str = __version__) -> Report:
    """The checks' report on one snapshot, nothing else (no smoke, gates, acks or redaction)."""
    env = resolve(snapshot)
    return new_report(command, source, [run_check(c, env) for c in checks], tool_version=tool_version,
                      snapshot=snapshot, quick=quick, devices=device_rows(snapshot))


def load_tables() -> None:
    try:  # a broken table is bad input (exit 2), not a crash of every check that reads it
        load_bundled_tables()
        load_implied_tables()
    except CompatTableError as exc:
        raise BadInput(str(exc)) from None


def with_team_matrix(checks: tuple[EnvCheck, ...], matrix_dirs: tuple[Path, ...]) -> tuple[EnvCheck, ...]:
    """The known-issues check reads a team's own matrix directories too (``--matrix DIR``)."""
    if not matrix_dirs:
        return checks
    return tuple(replace(c, run=known_issues.make_check_function(matrix_dirs))
                 if c.name == known_issues.NAME else c for c in checks)


def obtain_facts(options: DiagnoseOptions, progress: Progress | None = None) -> Facts:
    if options.from_file is not None:
        from mgpu_doctor.model.smoke_runs import runs_from_report  # lazy: only a file has smoke runs

        try:
            document = load_document(options.from_file)
            runs = runs_from_report(document.report_data, str(options.from_file))
        except NotJsonText as exc:
            return pasted_facts(options.from_file, exc, options.matrix_dirs)
        except (SnapshotLoadError, ValueError) as exc:
            raise BadInput(str(exc)) from None
        # Written elsewhere, perhaps by another tool: its credentials are masked, --no-redact or not.
        level = (document.report_data or {}).get("level")
        return Facts(mask_snapshot(document.snapshot), f"snapshot {options.from_file}", runs,
                     level if isinstance(level, str) else "",
                     recorded_training(document.report_data, options.from_file),
                     hang=recorded_hang(document.report_data, options.from_file),
                     recorded_only=recorded_outcomes(document.report_data, options.from_file))
    interpreter = options.interpreter or Interpreter.current()
    snapshot = gather_snapshot(GatherOptions(interpreter, quick=options.quick),
                               progress or (lambda *_a, **_k: None))
    return Facts(snapshot, "this machine")


def model_section(options: DiagnoseOptions, progress: Progress | None = None
                  ) -> tuple[CheckOutcome, ModelObservation | None] | None:
    """``--model``: build the user's model in a child and read it (not with --quick)."""
    if options.model is None:
        return None
    from mgpu_doctor.probes.user_model import observe_model
    from mgpu_doctor.training.observed import model_outcome

    if options.quick:
        return (CheckOutcome(MODEL_CHECK, f"Your model ({options.model.model})", CheckStatus.SKIPPED,
                             skip_reason="--quick imports no TensorFlow: the model is not built",
                             section=Section.TENSORFLOW), None)
    if progress is not None:
        progress(f"building your model {options.model.model} in a child process", slow=True)
    observation = observe_model(options.model, options.interpreter or Interpreter.current())
    return replace(model_outcome(observation), section=Section.TENSORFLOW), observation


def pasted_facts(path: Path, not_json: NotJsonText, matrix_dirs: tuple[Path, ...] = ()) -> Facts:
    """A file that is not JSON: read it as a paste (an issue body), or say it is neither. A paste
    whose only readable line is one a known issue prints (a warning, not a failure) is a paste."""
    from mgpu_doctor.pasted.split import (
        MAX_PASTE_CHARS,
        MAX_PASTE_LINES,
        NothingRecognised,
        PasteRefused,
        snapshot_from_paste,
    )

    if len(not_json.text) > MAX_PASTE_CHARS:
        raise BadInput(f"{path}: {len(not_json.text) // 2**20} MiB of text: larger than the "
                       f"{MAX_PASTE_CHARS // 2**20} MiB a pasted text may be, and not a snapshot")
    lines = not_json.text.count("\n") + 1
    if lines > MAX_PASTE_LINES:
        raise BadInput(f"{path}: {lines:,} lines: more than the {MAX_PASTE_LINES:,} a pasted text may have "
                       "(give a long training log with `check --log FILE`, which reads its failure lines)")
    if meant_as_json(not_json.text):
        raise BadInput(str(not_json))  # meant as JSON (a snapshot cut short): say where it breaks
    from mgpu_doctor.training.code import paste_reading

    code = paste_reading(not_json.text, "the pasted text")
    try:
        snapshot = snapshot_from_paste(not_json.text, str(path), read_elsewhere=bool(code and code.facts))
    except NothingRecognised:
        if not _names_a_known_issue(not_json.text, matrix_dirs):
            raise BadInput(f"{path}: not valid JSON (a snapshot or report; a Markdown report from "
                           "`mgpu-doctor report` works too), and not a paste with anything mgpu-doctor reads "
                           "(System information, nvidia-smi, pip list, build info, TensorFlow log lines, an "
                           "error, training code, a line a known issue prints)") from None
        snapshot = snapshot_from_paste(not_json.text, str(path), read_elsewhere=True)
    except PasteRefused as exc:
        raise BadInput(f"{path}: {exc}") from None
    # Written elsewhere, by someone else: its credentials are masked, --no-redact or not.
    return Facts(mask_snapshot(snapshot), f"pasted text {path}", code=code)


def _names_a_known_issue(text: str, matrix_dirs: tuple[Path, ...]) -> bool:
    """Whether a line of ``text`` is one a known issue's signature names (the matrix's own lines)."""
    from mgpu_doctor.matrix.index import load_index
    from mgpu_doctor.matrix.paths import bundled_matrix_dir
    from mgpu_doctor.matrix.signatures import signature_hits

    lines = evidence_lines(text.splitlines())
    return bool(lines and signature_hits(load_index(bundled_matrix_dir(), matrix_dirs).matrix().issues,
                                         lines, "the pasted text"))


# Checks a replay cannot run again: the user's model was built by its own child on the recording
# machine, and the gates were options of the recording run (given again with --from, they run).
RECORDED_ONLY = (MODEL_CHECK, *REQUIREMENT_CHECKS)


def recorded_outcomes(report_data: dict[str, Any] | None, path: Path) -> list[CheckOutcome]:
    """The outcomes of :data:`RECORDED_ONLY` a report holds, as it recorded them."""
    raw = [c for c in (report_data or {}).get("checks") or []
           if isinstance(c, dict) and c.get("name") in RECORDED_ONLY]
    try:
        return [from_jsonable(CheckOutcome, c, f"report.checks[{c['name']}]") for c in raw]
    except SchemaError as exc:
        raise BadInput(f"{path}: {exc}") from None


def recorded_hang(report_data: dict[str, Any] | None, path: Path) -> HangReading | None:
    """The hung job a report recorded (None: none); read back only where a report holds one."""
    if not (report_data or {}).get("hang"):
        return None
    from mgpu_doctor.hang.section import recorded_hang as decode
    from mgpu_doctor.model.redact import map_strings
    from mgpu_doctor.process.masking import mask_credentials

    # Written elsewhere, perhaps by another tool: its command lines are masked, --no-redact or not.
    return map_strings(decode(report_data, str(path)), mask_credentials)


def hang_section(options: DiagnoseOptions, facts: Facts,
                 progress: Progress | None = None) -> HangReading | None:
    """``report --hang``: the running job read now; with --from, the one the file recorded."""
    if options.hang is None or options.from_file is not None:
        return facts.hang
    from mgpu_doctor.hang.section import read_hang

    if progress is not None:
        progress("reading the stacks of the running job", slow=True)
    return read_hang(options.hang)


def recorded_training(report_data: dict[str, Any] | None, path: Path) -> TrainingProfile | None:
    """The training profile a report recorded (None: a snapshot, or a report without one)."""
    raw = (report_data or {}).get("training")
    if raw is None:
        return None
    try:
        profile = from_jsonable(TrainingProfile, raw, "report.training")
    except SchemaError as exc:
        raise BadInput(f"{path}: {exc}") from None
    return checked_recorded(profile, f"{path}: report.training")


def smoke_section(options: DiagnoseOptions, facts: Facts, stream: TextIO | None,
                  training: TrainingProfile | None = None,
                  resolved: ResolvedEnvironment | None = None,
                  observation: ModelObservation | None = None) -> SmokeSection | None:
    """Run the smoke trainings (not with --quick or --from), or replay the ones a file recorded.

    The usage the training profile declares or the model shows adds its usage scenarios; the
    user's model's runs are looked up in ``resolved`` (the environment with the profile applied)."""
    # The smoke engine is imported only where it runs: `check --quick` never needs it.
    if options.smoke is not None and not options.quick and options.from_file is None:
        from mgpu_doctor.smoke.section import run_requested

        request = options.smoke
        if training is not None and not request.options.usage:
            request = replace(request, options=replace(request.options, usage=training.facts().usage))
        python = facts.snapshot.python
        interpreter = (options.interpreter or Interpreter.current()).as_reported(
            "" if isinstance(python, Unavailable) else python.executable)
        return run_requested(facts.snapshot, request, interpreter,
                             options.matrix_dirs, stream, resolved, observation)
    if facts.smoke_runs:
        from mgpu_doctor.smoke.section import replayed_section

        return replayed_section(facts.smoke_runs, facts.snapshot, options.matrix_dirs, facts.level, resolved)
    return None


def today() -> _dt.date:
    """The day acknowledgements expire against when the options name none (tests pin it here).
    (datetime is imported here: only a run with an acknowledge file needs it.)"""
    import datetime

    return datetime.date.today()


def acknowledge(report: Report, options: DiagnoseOptions) -> Report:
    """Mark acknowledged findings; ``--ack FILE`` must exist, the default file is optional."""
    path = options.ack_file or Path(DEFAULT_FILE)
    if options.ack_file is None and not path.is_file():
        return report
    from mgpu_doctor.gate.acks import (
        AckFileError,
        apply_acks,
        load_ack_file,
        merged_notes,
        renamed_notes,
        unused_entries,
    )

    try:
        entries = load_ack_file(path)
    except AckFileError as exc:
        raise BadInput(str(exc)) from None
    replaced = _merged_ids(options) if any(e.named_issue() for e in entries) else {}
    checks = apply_acks(report.checks, entries, options.today or today(), replaced)
    notes = [f"Acknowledge file {e.source} matches no finding: remove it if the problem is gone."
             for e in unused_entries(checks, entries, replaced)] + renamed_notes(entries) + \
        merged_notes(entries, replaced)
    return replace(report, checks=checks, notes=report.notes + notes)


def _merged_ids(options: DiagnoseOptions) -> dict[str, str]:
    """The known-issue ids merged into another entry, with the one each became (the index keeps them)."""
    from mgpu_doctor.matrix.index import load_index
    from mgpu_doctor.matrix.paths import bundled_matrix_dir

    return load_index(bundled_matrix_dir(), options.matrix_dirs).replaced


def query(terms: list[str], matrix_dirs: tuple[Path, ...] = (),
          training: TrainingProfile | None = None) -> Report:
    """`matrix query`: every rule over versions (compatibility tables and known issues) applied to
    the versions and conditions named, with the codes and severities `check` gives a machine;
    the training facts the terms name are declared over ``training`` (the files' and options')."""
    from mgpu_doctor.environment.query import resolve_query  # `matrix query` only

    load_tables()
    try:
        env, given = resolve_query(terms)
    except BadEnvironment as exc:
        raise BadInput(f"matrix query: {exc}") from None
    profile = query_profile(given, training or TrainingProfile())
    env = with_training(env, profile)
    outcomes: list[CheckOutcome] = [run_check(c, env) for c in with_team_matrix(VERSION_RULES, matrix_dirs)]
    source = "matrix query: " + " ".join(
        f"{k}{'==' if k in VERSION_KEYS or k.startswith('nvidia-') else '='}{v}" for k, v in given.items())
    return new_report("matrix query", source, outcomes, tool_version=__version__, query=given,
                      training=profile)



def hang(request: HangRequest, matrix_dirs: tuple[Path, ...] = (), *, redact: bool = True,
         progress: Progress | None = None) -> Report:
    """`hang`: the running job's processes read while it hangs, and the verdict on them."""
    from mgpu_doctor.hang.section import hang_check, read_hang
    from mgpu_doctor.model.redact import Redactor

    if progress is not None:
        progress("reading the stacks of the running job", slow=True)
    reading = read_hang(request)
    report = new_report("hang", "this machine", [hang_check(reading, matrix_dirs)], tool_version=__version__,
                        hang=reading)
    # host and user names, the home directory; credentials are masked when read
    return Redactor(Identity.current(), []).tree(report) if redact else report


def fleet(sources: list[tuple[str, Snapshot]]) -> Report:
    """`fleet`: the nodes' snapshots (``(file, snapshot)``, read and redacted by the caller) compared
    fact by fact, and what breaks or slows synchronous training because of a difference."""
    from mgpu_doctor.fleet.checks import fleet_report
    from mgpu_doctor.fleet.compare import build_fleet
    from mgpu_doctor.fleet.facts import COMPARED_FACTS

    return fleet_report(build_fleet(sources, COMPARED_FACTS), tool_version=__version__)
