"""Command line: ``main(argv) -> int``. One module per sub-command; exit codes live here.

Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or bad input,
3 internal error, 128 + the signal when stopped: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP.

May import: every package (the command line is the top).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from mgpu_doctor import __version__
from mgpu_doctor.cli.errors import UsageError
from mgpu_doctor.cli.output import OutputUnwritable, guarded_streams, say, silence_stdout
from mgpu_doctor.errors import BadInput
from mgpu_doctor.process import interrupts

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# Sub-command name -> its module (`mgpu_doctor.cli.<module>`), in the order `--help` lists them.
COMMANDS = {"check": "check", "smoke": "smoke", "snapshot": "snapshot", "report": "report",
            "devices": "devices", "libs": "libs", "matrix": "matrix", "fleet": "fleet", "profile": "profile",
            "hang": "hang"}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and an exception, not sys.exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``) the one sub-command asked for.

    Importing every sub-command costs a good part of the quick check's budget, so a command
    line that names one imports only that one; `--help` and mistakes get them all.
    """
    parser = _Parser(
        prog="mgpu-doctor",
        description="Find multi-GPU Keras/TensorFlow environment problems before training does.",
    )
    parser.add_argument("--version", action="version", version=f"mgpu-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(f"mgpu_doctor.cli.{module}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, one_command: bool = False) -> int:
    """Run one command line; ``one_command``: the process runs this one and ends (the console
    script), so what importing built is kept out of the cyclic collector (see _settle)."""
    # SIGTERM and SIGHUP (schedulers, CI, a closed terminal) stop the doctor like Ctrl-C does:
    # the children are killed, what finished is kept and reported, exit 128 + the signal.
    with interrupts.stop_signals_raise(), guarded_streams():
        return _main(argv, one_command)


def _settle() -> None:
    """Importing a command builds thousands of objects that live as long as the process (modules,
    classes, functions); each collection the allocations trigger walks them all again, for
    nothing. Collections are paused while importing, and what was imported is frozen out of
    every later one: 7 % of `check --quick` (counted with callgrind). Only in a process that
    runs one command: what is frozen is never collected as a cycle."""
    gc.freeze()
    gc.enable()


def _main(argv: Sequence[str] | None, one_command: bool = False) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        if one_command:
            gc.disable()
        parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
        if one_command:
            _settle()
        args = parser.parse_args(words)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = int(args.run(args))
        sys.stdout.flush()  # a full disk or a closed stdout is found here, not at interpreter exit
        return code
    except OutputUnwritable as exc:
        silence_stdout()
        if interrupts.received() is not None:  # stopped, and the output went with the terminal (SIGHUP)
            return interrupts.exit_code()
        say(f"mgpu-doctor: error: {exc}")
        return EXIT_USAGE
    except BadInput as exc:
        say(f"mgpu-doctor: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        why = f" by {exc.args[0]}" if isinstance(exc, interrupts.Interrupted) else ""
        say(f"\nmgpu-doctor: interrupted{why}")
        return interrupts.exit_code(exc)
    except BrokenPipeError:
        # Output piped into `head`: stop quietly instead of a traceback at interpreter exit.
        silence_stdout()
        return EXIT_OK
    except Exception as exc:
        if interrupts.received() is not None:  # stopped, and the output went with the terminal (SIGHUP)
            return interrupts.exit_code()
        if os.environ.get("MGPU_DOCTOR_DEBUG"):
            import traceback  # here only: the quick check would pay for it on every run

            traceback.print_exc()
        say(f"mgpu-doctor: internal error: {type(exc).__name__}: {exc}\n"
            "This is a bug; rerun with MGPU_DOCTOR_DEBUG=1 for the traceback and report it.")
        return EXIT_INTERNAL


def console_main() -> None:
    sys.exit(main(one_command=True))
