"""Every text table the doctor prints, through one function so they render alike everywhere."""

from __future__ import annotations

from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]], headers: Sequence[str], tablefmt: str = "simple",
          maxcolwidths: list[int] | None = None) -> str:
    """``tabulate`` with cells as text (no number parsing) and every character one column wide.

    tabulate measures East Asian wide characters and emoji with ``wcwidth`` when that optional
    package happens to be installed: the same report would then pad its columns differently on
    two machines (issue 17). Counting characters keeps the output the same everywhere.
    """
    # imported only when there is a table to draw: tabulate reads its own version through
    # importlib.metadata, a cost `check --quick` without a GPU never needs to pay
    import tabulate as _tabulate

    saved = _tabulate.WIDE_CHARS_MODE
    _tabulate.WIDE_CHARS_MODE = False
    try:
        return _tabulate.tabulate([list(r) for r in rows], headers=list(headers), tablefmt=tablefmt,
                                  disable_numparse=True, maxcolwidths=maxcolwidths)
    finally:
        _tabulate.WIDE_CHARS_MODE = saved
