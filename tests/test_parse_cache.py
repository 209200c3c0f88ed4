"""The parsed-matrix cache: same answers as the parser, and never an error of its own."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from mgpu_doctor.matrix import parse_cache
from mgpu_doctor.matrix.known_issues import load_matrix
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.matrix.toml_files import TOMLDecodeError, load_toml
from mgpu_doctor.process.cache_home import CACHE_ENV

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TEXT = 'schema_version = 1\nname = "a"\nratio = 0.5\nbig = inf\n[[issue]]\nid = "x"\n'


class CountingParser:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> dict:
        self.calls += 1
        return tomllib.loads(text)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "matrix"


def test_a_text_parsed_once_is_answered_from_the_cache(cache):
    parse = CountingParser()
    first = parse_cache.cached_parse(TEXT, parse)
    second = parse_cache.cached_parse(TEXT, parse)
    assert first == second == tomllib.loads(TEXT) and parse.calls == 1
    assert len(list(cache.glob("*.json"))) == 1


def test_a_changed_text_is_parsed_again(cache):
    parse = CountingParser()
    parse_cache.cached_parse(TEXT, parse)
    changed = parse_cache.cached_parse(TEXT.replace('"a"', '"b"'), parse)
    assert changed["name"] == "b" and parse.calls == 2


@pytest.mark.parametrize("damage", ["{not json", json.dumps({"format": 1, "sha256": "0", "value": {}}),
                                    json.dumps({"format": 99, "value": {}}), "[]", ""])
def test_a_damaged_entry_is_parsed_again_and_replaced(cache, damage):
    parse = CountingParser()
    parse_cache.cached_parse(TEXT, parse)
    (entry,) = cache.glob("*.json")
    entry.write_text(damage)
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT) and parse.calls == 2
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT) and parse.calls == 2


@pytest.mark.parametrize("damage", [
    lambda text: text.replace('"name": "a"', '"name": "z"'),  # a changed value, its header intact
    lambda text: text.replace('"id": "x"', '"id": 7'),
    lambda text: text[:-20],  # cut short
])
def test_an_entry_whose_value_was_damaged_is_dropped_and_parsed_again(cache, damage):
    """An entry named for the right text but holding another value: not believed (the loader would
    blame the matrix file, which is fine), dropped and replaced by a fresh parse."""
    parse = CountingParser()
    parse_cache.cached_parse(TEXT, parse)
    (entry,) = cache.glob("*.json")
    damaged = damage(entry.read_text())
    assert damaged != entry.read_text()
    entry.write_text(damaged)
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT) and parse.calls == 2
    assert entry.read_text() != damaged  # replaced
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT) and parse.calls == 2


def test_a_file_with_a_date_is_not_kept(cache):
    parse = CountingParser()
    text = "schema_version = 1\nwhen = 2024-05-01\n"
    assert parse_cache.cached_parse(text, parse) == parse_cache.cached_parse(text, parse)
    assert parse.calls == 2 and not list(cache.glob("*"))


def test_an_unusable_cache_directory_costs_the_parse_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker))  # mkdir below a file fails
    parse = CountingParser()
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT)
    assert parse_cache.cached_parse(TEXT, parse) == tomllib.loads(TEXT) and parse.calls == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_cache_directory_costs_the_parse_not_an_error(cache):
    cache.mkdir(parents=True)
    cache.chmod(0o500)
    try:
        parse = CountingParser()
        assert parse_cache.cached_parse(TEXT, parse) == parse_cache.cached_parse(TEXT, parse)
        assert parse.calls == 2 and not list(cache.iterdir())
    finally:
        cache.chmod(0o700)


def test_an_empty_setting_turns_the_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, "")
    monkeypatch.setenv("HOME", str(tmp_path))
    parse = CountingParser()
    parse_cache.cached_parse(TEXT, parse)
    parse_cache.cached_parse(TEXT, parse)
    assert parse.calls == 2 and not list(tmp_path.iterdir())


def test_the_default_place_follows_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert parse_cache.cache_dir() == tmp_path / "xdg" / "mgpu-doctor" / "matrix"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_cache.cache_dir() == tmp_path / ".cache" / "mgpu-doctor" / "matrix"


def test_old_entries_go_first_beyond_the_limit(cache, monkeypatch):
    monkeypatch.setattr(parse_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        parse_cache.cached_parse(f"n = {i}\n", tomllib.loads)
        (entry,) = [p for p in cache.glob("*.json") if json.loads(p.read_text())["value"] == {"n": i}]
        os.utime(entry, (1_000_000 + i, 1_000_000 + i))  # written in this order, a second apart
    kept = sorted(json.loads(p.read_text())["value"]["n"] for p in cache.glob("*.json"))
    assert kept == [2, 3, 4]


def test_the_bundled_matrix_reads_the_same_from_the_cache(cache):
    parsed = load_matrix(bundled_matrix_dir())
    assert list(cache.glob("*.json"))  # the bundled files were kept
    from_cache = load_matrix(bundled_matrix_dir())
    assert from_cache == parsed and from_cache.issues and not from_cache.problems


def test_bad_toml_is_still_a_decode_error_and_is_not_kept(cache, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("schema_version = \n")
    for _ in range(2):
        with pytest.raises(TOMLDecodeError, match="line 1"):
            load_toml(bad, cached=True)
    assert not cache.exists() or not list(cache.glob("*.json"))
