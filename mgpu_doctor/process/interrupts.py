"""SIGINT, SIGTERM and SIGHUP stop the doctor alike: as an exception, so children are killed.

Job schedulers and CI runners stop programs with SIGTERM (`scancel`, a deleted pod, a cancelled
job) and SIGHUP (a closed terminal or SSH session), not only Ctrl-C. Python's default for those
two is to die on the spot, which leaves every child (its own process group, by design) running.
While :func:`stop_signals_raise` is active, each of the three raises :class:`Interrupted` (a
``KeyboardInterrupt``), so the paths that already handle Ctrl-C (kill the children, keep the
finished results, print what finished) handle them all; the exit code is 128 + the signal.

:func:`held` marks a short section that must not be cut in the middle (starting a child and
registering it for the kill ladder, the ladder itself): a stop signal that arrives inside is
raised when the section ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.received: int | None = None  # the first stop signal, for the exit code
        self.held = 0  # depth of held sections in the main thread
        self.pending: int | None = None


_state = _State()


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    if _state.received is None:
        _state.received = signum
    if _state.held:
        _state.pending = _state.pending or signum
        return
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Within: SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (main thread only)."""
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _state.received = _state.pending = None
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def held() -> Iterator[None]:
    """A stop signal that arrives within is raised when the section ends, not in its middle."""
    if not _in_main_thread():  # signal handlers only ever run in the main thread
        yield
        return
    _state.held += 1
    try:
        yield
    finally:
        _state.held -= 1
        if not _state.held and _state.pending is not None:
            signum, _state.pending = _state.pending, None
            raise Interrupted(signum)


def received() -> int | None:
    """The first stop signal received under :func:`stop_signals_raise`, if any."""
    return _state.received


def exit_code(exc: BaseException | None = None) -> int:
    """128 + the stop signal: 130 for SIGINT (and a bare KeyboardInterrupt), 143 SIGTERM, 129 SIGHUP."""
    if isinstance(exc, Interrupted):
        return 128 + exc.signum
    return 128 + (_state.received or signal.SIGINT)
