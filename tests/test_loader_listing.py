"""`ldconfig -p` is run again exactly when what it prints may have changed.

A real program stands in for ``ldconfig`` (a script on a PATH of the test's own): it counts its
runs and prints the loader cache file it is pointed at, as ``ldconfig -p`` prints
``/etc/ld.so.cache``."""

from __future__ import annotations

import os
import stat

import pytest

from mgpu_doctor.probes.loader_listing import loader_listing
from mgpu_doctor.process.cache_home import CACHE_ENV


@pytest.fixture
def machine(tmp_path, monkeypatch):
    bin_dir, runs, loader_cache = tmp_path / "bin", tmp_path / "runs", tmp_path / "ld.so.cache"
    bin_dir.mkdir()
    tool = bin_dir / "ldconfig"
    tool.write_text(f"#!/bin/sh\necho run >> {runs}\ncat {loader_cache}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    loader_cache.write_text("\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8\n")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))

    def listing() -> str:
        return loader_listing(str(loader_cache), path=str(bin_dir))

    def run_count() -> int:
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    return listing, run_count, loader_cache, tool


def test_the_listing_is_kept_until_the_loader_cache_changes(machine):
    listing, run_count, loader_cache, _ = machine
    first = listing()
    assert "libcudnn.so.8" in first and run_count() == 1
    assert listing() == first and run_count() == 1  # kept
    loader_cache.write_text("\tlibcudnn.so.9 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.9\n")
    changed = listing()
    assert "libcudnn.so.9" in changed and "so.8" not in changed and run_count() == 2
    assert listing() == changed and run_count() == 2


def test_a_new_ldconfig_is_run_again(machine):
    listing, run_count, _, tool = machine
    listing()
    info = tool.stat()
    os.utime(tool, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    listing()
    assert run_count() == 2


def test_nothing_is_kept_when_the_cache_is_off_or_damaged(machine, monkeypatch, tmp_path):
    listing, run_count, _, _ = machine
    listing()
    kept = next((tmp_path / "cache" / "loader").iterdir())
    kept.write_text("a key of something else\nlibfake.so.1 (libc6,x86-64) => /x/libfake.so.1\n")
    assert "libfake" not in listing() and run_count() == 2
    monkeypatch.setenv(CACHE_ENV, "")
    listing()
    listing()
    assert run_count() == 4


def test_a_failing_ldconfig_gives_an_empty_listing_and_keeps_nothing(machine, tmp_path):
    listing, run_count, loader_cache, tool = machine
    tool.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'runs'}\nexit 1\n")
    assert listing() == "" and listing() == "" and run_count() == 2
    loader_cache.unlink()  # no cache file: nothing to key on, ldconfig is run each time
    assert listing() == "" and run_count() == 3

