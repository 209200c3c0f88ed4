"""Errors that mean bad input (a file, an option, a data table): exit 2 with one line, no traceback."""


class BadInput(Exception):
    """Bad command line, bad input file or broken data table; the message is the whole explanation."""
