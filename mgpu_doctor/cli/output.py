"""Where text leaves the process: stdout, files, stderr. One pass masks credentials in all of it.

The standard streams are made safe first: a closed stdin, stdout or stderr (``>&-``, a daemon
without a terminal) is reopened on ``/dev/null`` so that no file the doctor opens later takes
its descriptor; stdout then refuses writes with :class:`OutputUnwritable`, as does a stdout that
fails (``/dev/full``, a full disk), so the CLI can say so in one line and exit 2.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from mgpu_doctor.errors import BadInput
from mgpu_doctor.process.masking import mask_credentials


class OutputUnwritable(BadInput):
    """stdout (or an output file) cannot be written; the message says which and why."""


class _GuardedStdout:
    """``sys.stdout`` whose write errors become :class:`OutputUnwritable` and whose characters that
    the stream's encoding cannot hold are written as backslash escapes instead of failing."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is None:
            raise OutputUnwritable("cannot write the output: stdout is closed (redirect it to a file, "
                                   "or use -o FILE where the command has it)")
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            return self._call(lambda: self._stream.write(
                text.encode(encoding, "backslashreplace").decode(encoding)))
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as exc:
            raise OutputUnwritable(f"cannot write the output to stdout: {_why(exc)}") from None

    def flush(self) -> None:
        if self._stream is not None:
            self._call(self._stream.flush)

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def _call(self, action: Any) -> Any:
        try:
            return action()
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as exc:
            raise OutputUnwritable(f"cannot write the output to stdout: {_why(exc)}") from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


@contextmanager
def guarded_streams() -> Iterator[None]:
    """For the length of one command: closed standard descriptors reopened, stdout guarded."""
    for fd in (0, 1, 2):
        _reopen_if_closed(fd)
    original_out, original_err = sys.stdout, sys.stderr
    if sys.stderr is None:
        sys.stderr = io.TextIOWrapper(open(os.devnull, "wb"), errors="backslashreplace")  # noqa: SIM115
    sys.stdout = _GuardedStdout(original_out)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = original_out, original_err


def _reopen_if_closed(fd: int) -> None:
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def silence_stdout() -> None:
    """After stdout failed: point it at /dev/null so the interpreter's last flush cannot fail too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def say(text: str) -> None:
    """A line on stderr; a stderr that fails loses it, nothing more."""
    try:
        print(mask_credentials(text), file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass


def out(text: str) -> None:
    """Text on stdout, credentials masked."""
    sys.stdout.write(mask_credentials(text))


def write_text(path: str | Path, text: str) -> None:
    """An output file (``-o``, ``--junit``), credentials masked; an unwritable one is exit 2."""
    try:
        Path(path).write_text(mask_credentials(text), encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise OutputUnwritable(f"cannot write {path}: {exc.strerror or exc}") from None
