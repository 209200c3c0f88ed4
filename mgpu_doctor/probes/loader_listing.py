"""What ``ldconfig -p`` prints, kept between runs for as long as what it prints is unchanged.

``ldconfig -p`` lists the loader's cache file (``/etc/ld.so.cache``); nothing else goes into its
output. Running it under the child supervision (run folder, kill ladder) cost ``check --quick``
about 15 ms of its 0.13 s on every run, for a file that changes when libraries are installed.
The listing is kept with a key naming this host, the ``ldconfig`` that printed it and the cache
file it printed (device, inode, size, modification time in nanoseconds): any change to either
is a miss, so a kept listing is never stale. Best effort, like the parse cache: a listing that
cannot be kept or read back costs the run of ``ldconfig``, never an error.
"""

from __future__ import annotations

import contextlib
import os
import shutil

from mgpu_doctor.probes.library_version_sources import TOOL_TIMEOUT_S
from mgpu_doctor.process.cache_home import cache_home, keep_file
from mgpu_doctor.process.childproc import run_tool

LOADER_CACHE = "/etc/ld.so.cache"
KEEP_BYTES = 16 * 1024 * 1024  # `ldconfig -p` lists every library: keep all of a large cache
FORMAT = 1
_KEPT_NAME = "ldconfig-p.txt"


def loader_listing(loader_cache: str = LOADER_CACHE, path: str | None = None) -> str:
    """``ldconfig -p``'s output; "" where no ``ldconfig`` runs or it fails. ``path``: the PATH
    to find ``ldconfig`` on (default: this process's)."""
    ldconfig = shutil.which("ldconfig", path=path) or "/sbin/ldconfig"
    key = _key(ldconfig, loader_cache)
    directory = cache_home("loader")
    kept = directory / _KEPT_NAME if directory is not None and key else None
    if kept is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            first_line, _, listing = kept.read_text(encoding="utf-8").partition("\n")
            if first_line == key:
                return listing
    ran = run_tool([ldconfig, "-p"], TOOL_TIMEOUT_S, keep_bytes=KEEP_BYTES)
    listing = ran.stdout if not ran.start_error and ran.returncode == 0 and not ran.timed_out else ""
    if kept is not None and listing:
        keep_file(kept, f"{key}\n{listing}".encode())
    return listing


def _key(ldconfig: str, loader_cache: str) -> str:
    """One line naming what the listing depends on; "" when either file cannot be seen."""
    try:
        tool, listed = os.stat(ldconfig), os.stat(loader_cache)
    except OSError:
        return ""
    return (f"{FORMAT} {os.uname().nodename} {ldconfig} {tool.st_size} {tool.st_mtime_ns} "
            f"{loader_cache} {listed.st_dev} {listed.st_ino} {listed.st_size} {listed.st_mtime_ns}")
