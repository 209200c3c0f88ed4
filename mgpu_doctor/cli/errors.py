"""Errors the CLI turns into exit code 2 with a one-line message."""


class UsageError(Exception):
    """Bad command line or bad input file; the message is the whole explanation."""
