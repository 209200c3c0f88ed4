"""Errors the CLI turns into exit code 2 with a one-line message."""

from mgpu_doctor.errors import BadInput


class UsageError(BadInput):
    """Bad command line or bad input file; the message is the whole explanation."""
