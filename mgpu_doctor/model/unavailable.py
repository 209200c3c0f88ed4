"""How a fact that could not be gathered says why."""

from __future__ import annotations

from typing import Literal, TypeVar

from mgpu_doctor.record import record

Reason = Literal["absent", "failed", "skipped"]
T = TypeVar("T")


@record
class Unavailable:
    """A fact that is not there, with the reason.

    ``reason`` is one of:
    - ``absent``: the thing does not exist here (no NVML library, no TensorFlow installed);
    - ``failed``: gathering it went wrong (an exception, a timeout, a crash);
    - ``skipped``: it was not asked for (``--quick``) or cannot apply.

    ``cause`` is a short machine-readable tag for checks that must tell failures apart
    (``timeout``, ``signal:SIGSEGV``, ``exception:ImportError``, ``not-supported``).
    """

    reason: Reason
    detail: str
    cause: str = ""

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


# Causes that mean the diagnosed Python itself cannot run the doctor's child scripts.
INTERPRETER_CAUSES = ("bad-interpreter", "python-too-old", "interpreter-timeout", "interpreter-not-started")


def interpreter_broken(value: object) -> bool:
    """A fact that is missing because the diagnosed Python does not run."""
    return isinstance(value, Unavailable) and value.cause in INTERPRETER_CAUSES


def absent(detail: str, cause: str = "") -> Unavailable:
    return Unavailable("absent", detail, cause)


def failed(detail: str, cause: str = "") -> Unavailable:
    return Unavailable("failed", detail, cause)


def skipped(detail: str, cause: str = "") -> Unavailable:
    return Unavailable("skipped", detail, cause)


def known(value: T | Unavailable) -> bool:
    return not isinstance(value, Unavailable)
