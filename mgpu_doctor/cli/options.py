"""Every shared command-line option, and the one place the argparse namespace becomes typed
options (:class:`~mgpu_doctor.diagnose.DiagnoseOptions`, :class:`OutputOptions`). Nothing below
the CLI sees the namespace."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TextIO

from mgpu_doctor.checks import UnknownCheckError, select_checks
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.diagnose import DiagnoseOptions
from mgpu_doctor.gate import DEFAULT_FILE
from mgpu_doctor.gate.requirements import (
    Requirements,
    RequirementSyntaxError,
    parse_gpus,
    parse_layers,
    parse_tensorflow_spec,
)
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.training import KEYS as TRAINING_KEYS
from mgpu_doctor.model.training import OPTIONS as TRAINING_OPTIONS
from mgpu_doctor.model.training import TrainingProfile
from mgpu_doctor.model.user_model import (
    DEFAULT_MODEL_TIMEOUT_S,
    BadModelReference,
    ModelRequest,
    check_reference,
)
from mgpu_doctor.process.interpreter import Interpreter
from mgpu_doctor.record import record, replace
from mgpu_doctor.renderers import OutputFormat, RenderOptions
from mgpu_doctor.smoke.layers import layer_names
from mgpu_doctor.smoke.levels import DEFAULT_LEVEL, LEVELS, SMOKE_LEVELS
from mgpu_doctor.smoke.request import DEFAULT_STALL_TIMEOUT_S, SmokeRequest, smoke_backend
from mgpu_doctor.training.declared import (
    PYPROJECT,
    PYPROJECT_TABLE,
    WORDS,
    declared_profile,
    working_directory,
)

FAIL_ON_CHOICES = ("info", "warning", "error")
MAX_STALL_TIMEOUT_S = 86400.0


# --- adding options --------------------------------------------------------------------------


def path_text(text: str) -> str:
    """An option's file or folder, refused when empty (``--baseline ''`` from an unset shell variable
    must not silently mean "no baseline")."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a file or folder (or leave the option out)")
    return text


def add_python_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python", metavar="PATH",
        help="diagnose the environment of this interpreter (default: the one running the doctor)",
    )


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=[f.value for f in OutputFormat], default="human",
                        help="output format on stdout (default: human)")
    parser.add_argument("--fail-on", choices=FAIL_ON_CHOICES, default="error",
                        help="exit 1 when a finding is at least this severe (default: error)")
    parser.add_argument("--junit", type=path_text, metavar="FILE", help="also write JUnit XML to FILE")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show informational findings and evidence")


def add_matrix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", type=path_text, metavar="DIR", action="append", default=[],
                        help="also read a team's own known-issue files from DIR (DIR/known-issues/"
                        "*.toml or DIR/*.toml) on top of the bundled ones; repeatable")


# The smoke options' defaults: where no smoke runs (--quick, --from, --no-smoke), only the options
# given with another value are checked (smoke_options_given).
SMOKE_DEFAULTS: dict[str, object] = {
    "layers": None, "gpus": None, "virtual_devices": 2, "stall_timeout": DEFAULT_STALL_TIMEOUT_S,
    "batch_sizes": None, "model_sizes": None, "leak_probe": None, "results": None,
}


def add_smoke_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--layers", metavar="A,B",
                   help=f"layer types to train (default: {','.join(layer_names())})")
    p.add_argument("--gpus", metavar="1,2,4",
                   help="device counts to compare (default: 1 and every visible GPU)")
    p.add_argument("--virtual-devices", type=int, default=SMOKE_DEFAULTS["virtual_devices"], metavar="N",
                   help="with fewer than 2 GPUs: split the CPU into N logical devices (default: 2)")
    p.add_argument("--stall-timeout", type=float, default=SMOKE_DEFAULTS["stall_timeout"], metavar="S",
                   help=f"declare a hang after S seconds without a finished step "
                        f"(default: {DEFAULT_STALL_TIMEOUT_S:g})")
    p.add_argument("--batch-sizes", metavar="64,256",
                   help="global batch sizes to compare 1 vs N devices at; every scenario runs at "
                        "the first, the others compare speed (default: "
                        + "; ".join(f"{','.join(map(str, LEVELS[n].batch_sizes))} at {n}"
                                    for n in SMOKE_LEVELS) + ")")
    p.add_argument("--model-sizes", metavar="1,4,16",
                   help="model sizes for the scaling map: multipliers of each layer's width (units, "
                        "filters); the map compares 1 vs N devices at every batch x size, every "
                        "scenario runs at the first (default: "
                        + "; ".join(_sizes_help(n) for n in SMOKE_LEVELS) + ")")
    p.add_argument("--leak-probe", action=argparse.BooleanOptionalAction, default=None,
                   help="call fit, predict and evaluate over and over on 1 and N devices and report "
                        "memory that grows with every call (default: "
                        + "; ".join(f"{'on' if LEVELS[n].leak_probe else 'off'} at {n}" for n in SMOKE_LEVELS)
                        + ")")
    p.add_argument("--results", type=path_text, metavar="FILE",
                   help="append each run's result to FILE as a JSON line as soon as it finishes")


def _sizes_help(level: str) -> str:
    layers = LEVELS[level].map_layers
    return (f"{','.join(map(str, LEVELS[level].model_sizes))} at {level}"
            + (f" for {' and '.join(layers)}" if layers else ""))


_TRAINING_HELP = {
    "strategy": "the distribution strategy you train with",
    "layers": "the layer types your model uses (the whole list)",
    "usage": "how you train (what you use; words not named stay unknown)",
    "gpus": "the number of GPUs one worker trains on",
    "workers": "the number of workers (processes or nodes) you train with",
    "backend": "Keras 3's backend (jax: the smoke trains with keras.distribution.DataParallel)",
    "scenario": "how the last batch falls on the replicas",
}


def add_training_options(p: argparse.ArgumentParser) -> None:
    """The training profile: how the user trains; known issues are matched against it."""
    group = p.add_argument_group(
        "training profile (how you train; also "
        f"{PYPROJECT_TABLE} in {PYPROJECT}; an option wins over the file)")
    for key in TRAINING_KEYS:
        words = WORDS[key]
        metavar = "N" if words is None else ("A,B" if key in ("layers", "usage") else "NAME")
        group.add_argument(TRAINING_OPTIONS[key], dest=f"training_{key}", metavar=metavar,
                           help=_TRAINING_HELP[key] + (f": {', '.join(words)}" if words else ""))


def add_model_options(p: argparse.ArgumentParser) -> None:
    """The user's own model, built and read in a child (and trained 1 vs N by `smoke`)."""
    group = p.add_argument_group(
        "your model (built in a child process under the strategy; only class and option names "
        "come back)")
    group.add_argument("--model", metavar="MODULE:FUNCTION",
                       help="a function that returns your compiled Keras model: its layers, dtype "
                            "policy, jit_compile, optimizer and metrics become observed training facts")
    group.add_argument("--data", metavar="MODULE:FUNCTION",
                       help="with --model: a function that returns a tf.data.Dataset or (x, y) arrays "
                            "(smoke trains on it; default: synthetic data shaped from the model's inputs)")
    group.add_argument("--model-path", type=path_text, metavar="DIR", action="append", default=[],
                       help="put DIR first on the child's sys.path to import the module (repeatable; "
                            "a src/ layout and the package folders of ./pyproject.toml are found "
                            "without it)")
    group.add_argument("--model-timeout", type=float, default=DEFAULT_MODEL_TIMEOUT_S, metavar="S",
                       help=f"give up building the model after S seconds (default: "
                            f"{DEFAULT_MODEL_TIMEOUT_S:g})")


def model_request(args: argparse.Namespace) -> ModelRequest | None:
    """``--model`` and its companions, checked (bad values: exit 2)."""
    model, data = getattr(args, "model", None), getattr(args, "data", None)
    paths = getattr(args, "model_path", None) or []
    if model is None:
        if data is not None or paths:
            raise UsageError(f"{'--data' if data is not None else '--model-path'} needs --model "
                             "MODULE:FUNCTION")
        return None
    timeout = getattr(args, "model_timeout", DEFAULT_MODEL_TIMEOUT_S)
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_STALL_TIMEOUT_S):
        raise UsageError(f"--model-timeout must be a number of seconds above 0 and at most "
                         f"{MAX_STALL_TIMEOUT_S:g}, got {timeout:g}")
    for path in paths:
        if not Path(path).expanduser().is_dir():
            raise UsageError(f"--model-path {path}: no such directory")
    try:
        model_ref = check_reference("--model", model)
        data_ref = check_reference("--data", data) if data is not None else ""
    except BadModelReference as exc:
        raise UsageError(str(exc)) from None
    from mgpu_doctor.training.code_roots import code_roots  # only --model looks for the code's roots

    given = [(Path(p).expanduser().absolute(), "--model-path") for p in paths]
    cwd = working_directory()
    found = [(r.path, r.source) for r in code_roots(cwd)] if cwd is not None else []
    dirs = given + [(p, why) for p, why in found if p not in {g for g, _ in given}]
    searched = [f"{p} ({why})" for p, why in dirs]
    if cwd is not None:
        searched.append(f"{cwd} (the working directory)")
    return ModelRequest(model=model_ref, data=data_ref, path=os.pathsep.join(str(p) for p, _ in dirs),
                        timeout_s=float(timeout), searched=tuple(searched))


def training_profile(args: argparse.Namespace) -> TrainingProfile:
    """The profile the project's files and the options declare (bad values: exit 2)."""
    return declared_profile({k: getattr(args, f"training_{k}", None) for k in TRAINING_KEYS})


def add_level_option(p: argparse.ArgumentParser, levels: tuple[str, ...]) -> None:
    p.add_argument("--level", choices=levels, default=None,
                   help="how much to run: " + "; ".join(f"{n}: {LEVELS[n].summary}" for n in levels)
                        + f" (default: {DEFAULT_LEVEL})")


def level_from(args: argparse.Namespace) -> str:
    """``--level``, with ``--quick`` as the alias of ``--level quick``."""
    level = getattr(args, "level", None)
    if getattr(args, "quick", False):
        if level not in (None, "quick"):
            raise UsageError(f"--quick is --level quick: it cannot go with --level {level}")
        return "quick"
    return level or DEFAULT_LEVEL


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--require-gpus", metavar="N",
                        help="fail unless at least N GPUs are usable (an error if it cannot be verified)")
    parser.add_argument("--require-tensorflow", metavar="SPEC",
                        help="fail unless TensorFlow matches this PEP 440 specifier, e.g. '>=2.16'")
    parser.add_argument("--require-layers", metavar="A,B",
                        help="fail unless these layers (e.g. gru,lstm) pass their smoke trainings")
    parser.add_argument("--ack", type=path_text, metavar="FILE",
                        help=f"acknowledge file (default: {DEFAULT_FILE} in the working directory, if any)")


def add_redact_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-redact", dest="redact", action="store_false",
                        help="keep hostname, user name, home directory and GPU UUIDs in the output "
                        "(credential-looking values are masked regardless)")


def add_diagnose_options(p: argparse.ArgumentParser) -> None:
    """What decides the facts and the verdict: shared by `check` and `report`."""
    add_level_option(p, tuple(LEVELS))
    p.add_argument("--quick", action="store_true",
                   help="same as --level quick: skip everything that imports TensorFlow or trains "
                        "(well under a second)")
    p.add_argument("--from", dest="from_file", type=path_text, metavar="FILE",
                   help="check a saved snapshot or report (`mgpu-doctor snapshot -o FILE`, "
                        "`mgpu-doctor report -o FILE`) instead of this machine")
    p.add_argument("--code", dest="code", type=path_text, metavar="PATH", action="append", default=[],
                   help="your training code (a file or a folder), read and never run: the strategy, layers "
                        "and usage it shows decide the known issues that depend on them (repeatable)")
    p.add_argument("--log", dest="logs", type=path_text, metavar="FILE", action="append", default=[],
                   help="a training log (or a saved traceback) to read too: its error and log lines are "
                        "matched against the known issues (repeatable; a big log is read from its end)")
    p.add_argument("--baseline", type=path_text, metavar="FILE",
                   help="also say what changed since a known-good run: its snapshot, JSON report or bug "
                        "report (`drift.*` findings; keep the last green report of a CI job and pass it "
                        "here)")
    p.add_argument("--no-smoke", action="store_true",
                   help="do not run the smoke trainings (implied by --level quick and --from)")
    smoke = p.add_argument_group("smoke trainings (see `mgpu-doctor smoke --help`)")
    add_smoke_options(smoke)
    add_training_options(p)
    add_model_options(p)
    add_matrix_option(p)
    add_python_option(p)
    add_gate_options(p)
    add_redact_option(p)


# --- the namespace as typed options ----------------------------------------------------------


@record
class OutputOptions:
    """How a report leaves the process: format on stdout, JUnit file, and the gate."""

    format: OutputFormat
    fail_on: Severity
    junit: Path | None
    verbose: bool

    def render_options(self, stream: TextIO | None = None) -> RenderOptions:
        # Streams are looked up at call time: sys.stdout may have been replaced since import.
        stream = stream or sys.stdout
        plain = not stream.isatty() or "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb"
        encoding = (getattr(stream, "encoding", None) or "").lower()
        return RenderOptions(fail_on=self.fail_on, verbose=self.verbose, color=not plain,
                             unicode=not plain and "utf" in encoding)


def output_options(args: argparse.Namespace) -> OutputOptions:
    junit = getattr(args, "junit", None)
    return OutputOptions(format=OutputFormat(getattr(args, "format", "human")),
                         fail_on=Severity(getattr(args, "fail_on", "error")),
                         junit=Path(junit) if junit else None, verbose=getattr(args, "verbose", False))


def interpreter_from(args: argparse.Namespace) -> Interpreter | None:
    """The interpreter ``--python`` names (None: the doctor's own)."""
    if getattr(args, "python", None) is None:
        return None
    if not args.python.strip():
        raise UsageError("--python is empty: give the path of the interpreter you train with "
                         "(or leave the option out for the doctor's own)")
    path = Path(args.python).expanduser()
    interp = Interpreter(str(path if path.is_absolute() else path.absolute()))
    problem = interp.problem()
    if problem:
        raise UsageError(f"--python {problem}")
    return interp


def matrix_dirs(args: argparse.Namespace) -> tuple[Path, ...]:
    dirs = []
    for text in getattr(args, "matrix", None) or []:
        path = Path(text).expanduser()
        if not path.is_dir():
            raise UsageError(f"--matrix {text}: no such directory")
        dirs.append(path)
    return tuple(dirs)


def smoke_options_given(args: argparse.Namespace) -> bool:
    """Whether the command line gives a smoke option a value other than its default."""
    return any(getattr(args, name, default) != default for name, default in SMOKE_DEFAULTS.items())


def smoke_request(args: argparse.Namespace, level: str = DEFAULT_LEVEL) -> SmokeRequest:
    """The smoke options, every one checked before anything is gathered (bad values: exit 2)."""
    # Imported here: the quick check, which trains nothing, builds no plan (smoke_options_given).
    from mgpu_doctor.smoke.plan import (
        MAX_BATCH_SIZE,
        MAX_DEVICES,
        MAX_MODEL_SIZE,
        PlanError,
        SmokeOptions,
        check_virtual_devices,
        parse_counts,
    )
    from mgpu_doctor.smoke.plan import parse_layers as parse_smoke_layers

    stall = args.stall_timeout
    if not (math.isfinite(stall) and 0 < stall <= MAX_STALL_TIMEOUT_S):
        raise UsageError(f"--stall-timeout must be a number of seconds above 0 and at most "
                         f"{MAX_STALL_TIMEOUT_S:g} (a day), got {stall:g}")
    try:
        batches = parse_counts(getattr(args, "batch_sizes", None), "--batch-sizes", MAX_BATCH_SIZE)
        sizes = parse_counts(getattr(args, "model_sizes", None), "--model-sizes", MAX_MODEL_SIZE)
        options = SmokeOptions(
            layers=parse_smoke_layers(getattr(args, "layers", None)),
            gpus=parse_counts(getattr(args, "gpus", None), "--gpus", MAX_DEVICES),
            virtual_devices=getattr(args, "virtual_devices", 2),
            level=level if level in SMOKE_LEVELS else DEFAULT_LEVEL,
            leak_probe=getattr(args, "leak_probe", None),
            # the training profile's --backend: jax trains with keras.distribution.DataParallel
            backend=smoke_backend(getattr(args, "training_backend", None), os.environ),
        )
        check_virtual_devices(options.virtual_devices)
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    if batches:
        options = replace(options, batch_sizes=batches)
    if sizes:
        options = replace(options, model_sizes=sizes)
    model = model_request(args)
    if model is not None:
        options = replace(options, user_model=model.model, user_data=model.data, model_path=model.path)
    results = getattr(args, "results", None)
    return SmokeRequest(options, float(args.stall_timeout), Path(results) if results else None,
                        redact=getattr(args, "redact", True))


def requirements_from(args: argparse.Namespace) -> Requirements:
    try:
        return Requirements(
            gpus=parse_gpus(args.require_gpus) if args.require_gpus is not None else None,
            tensorflow=parse_tensorflow_spec(args.require_tensorflow)
            if args.require_tensorflow is not None else "",
            layers=parse_layers(args.require_layers) if args.require_layers is not None else (),
        )
    except RequirementSyntaxError as exc:
        raise UsageError(str(exc)) from None


def split_names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


def diagnose_options(args: argparse.Namespace, command: str) -> DiagnoseOptions:
    """The namespace of `check` / `report` as the pipeline's options (bad values: exit 2)."""
    only, skip = split_names(getattr(args, "checks", None)), split_names(getattr(args, "skip", None))
    if only == []:
        raise UsageError("--checks names no check: give check names separated by commas "
                         "(`mgpu-doctor check --help` lists them)")
    try:
        checks = select_checks(only, skip)
    except UnknownCheckError as exc:
        raise UsageError(str(exc)) from None
    if not checks:
        raise UsageError("no checks left to run: --skip removes every check --checks selected")
    requirements = requirements_from(args)
    level = level_from(args)
    quick = level == "quick"
    with_smoke = not (quick or args.from_file or args.no_smoke)
    # Checked even where no smoke runs when given: a bad value is a mistake anyway.
    smoke = smoke_request(args, level) if with_smoke or smoke_options_given(args) else None
    return DiagnoseOptions(
        command=command, checks=checks, quick=quick, level=level,
        from_file=Path(args.from_file) if args.from_file else None,
        interpreter=interpreter_from(args), smoke=smoke if with_smoke else None,
        matrix_dirs=matrix_dirs(args), requirements=requirements,
        ack_file=Path(args.ack) if args.ack else None, redact=args.redact,
        baseline=Path(args.baseline) if getattr(args, "baseline", None) else None,
        training=training_profile(args), model=model_request(args),
        logs=tuple(Path(f) for f in getattr(args, "logs", []) or []),
        code=tuple(Path(f) for f in getattr(args, "code", []) or []),
    )
