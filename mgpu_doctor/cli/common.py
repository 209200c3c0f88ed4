"""Plumbing shared by sub-commands: progress on stderr, writing files, emitting a report."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from mgpu_doctor.cli.options import OutputOptions
from mgpu_doctor.cli.output import out, say, write_text
from mgpu_doctor.model.report import Report
from mgpu_doctor.process import interrupts
from mgpu_doctor.process.terminal import redraws


class Progress:
    """Progress on stderr: a live line on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = redraws(self.stream)
        self._shown = False

    def __call__(self, step: str, slow: bool = False) -> None:
        """Show a step; off a terminal only the slow ones (over a second) are printed."""
        if not self.enabled or (not self.live and not slow):
            return
        if self.live:
            self.stream.write(f"\r\x1b[K… {step}")
            self._shown = True
        else:
            self.stream.write(f"mgpu-doctor: {step}\n")
        self.stream.flush()

    def done(self) -> None:
        if self.live and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


@contextmanager
def progress_on_stderr() -> Iterator[Progress]:
    progress = Progress()
    try:
        yield progress
    finally:
        progress.done()


def emit(report: Report, output: OutputOptions, interrupted: bool = False) -> int:
    """Print the report in its format, write the JUnit file, and return the exit code."""
    from mgpu_doctor.renderers.common import exit_code_for

    options = output.render_options()
    out(output.format.renderer()(report, options))
    if output.junit is not None:
        from mgpu_doctor.renderers import junit

        write_text(output.junit, junit.render(report, options))
    if interrupted:
        return interrupted_exit()
    return exit_code_for(report, options.fail_on)


def interrupted_exit() -> int:
    """After the report of what finished: say so, and exit 128 + the signal that stopped us."""
    signum = interrupts.received()
    say("mgpu-doctor: interrupted" + (f" by {signal.Signals(signum).name}" if signum else ""))
    return interrupts.exit_code()
