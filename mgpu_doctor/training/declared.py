"""The declared training profile: ``[tool.mgpu-doctor.training]`` of ``pyproject.toml``, the
``[training]`` table of ``.mgpu-doctor.toml`` (both in the working directory), and the options.

Per key, an option wins over ``.mgpu-doctor.toml``, which wins over ``pyproject.toml``. Every
bad value is one line naming the file and the key (or the option) and the accepted words.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mgpu_doctor.errors import BadInput
from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.matrix.toml_files import TOMLDecodeError, load_toml
from mgpu_doctor.model.training import KEYS, LIST_KEYS, OPTIONS, TrainingProfile
from mgpu_doctor.process.inputs import InputError, shorten
from mgpu_doctor.record import replace

PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = "[tool.mgpu-doctor.training]"
DOCTOR_FILE = ".mgpu-doctor.toml"  # the acknowledge file's; its training table is [training]
DOCTOR_TABLE = "training"

# Each key's accepted words (None: a count).
WORDS: dict[str, tuple[str, ...] | None] = {
    "strategy": tuple(vocab.STRATEGIES), "layers": tuple(vocab.LAYERS), "usage": tuple(vocab.USAGES),
    "gpus": None, "workers": None, "backend": tuple(vocab.BACKENDS), "scenario": tuple(vocab.SCENARIOS),
}
MAX_COUNT = 100_000
# The training facts a `matrix query` term declares; its gpus, workers and backend are the facts
# of the machine it describes, as a snapshot's are (--train-gpus and the others declare them).
QUERY_KEYS = ("strategy", "layers", "usage", "scenario")


class ProfileError(BadInput):
    """A bad training profile value; the message is one line naming where it came from."""


def declared_profile(options: Mapping[str, str | None], cwd: Path | None = None) -> TrainingProfile:
    """The profile the files in ``cwd`` (default: the working directory) and the options declare.

    ``options`` maps a key of :data:`KEYS` to the option's text (None: not given).
    """
    profile = TrainingProfile()
    folder = cwd if cwd is not None else working_directory()
    for name, table in ((PYPROJECT, PYPROJECT_TABLE), (DOCTOR_FILE, DOCTOR_TABLE)):
        path = folder / name if folder is not None else None
        # A symlink is read even when it leads nowhere (a loop, a deleted target): that is an error
        # to show, not a file to skip as if it were absent.
        if path is not None and (path.is_file() or path.is_symlink()):
            profile = _over(profile, _file_facts(path, name, table))
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in KEYS:  # pragma: no cover - the CLI passes only KEYS
            raise ProfileError(f"unknown training key {key!r}")
    return _over(profile, {k: (parse_value(k, v, OPTIONS[k]), OPTIONS[k]) for k, v in given.items()})


def working_directory() -> Path | None:
    """The working directory, or None where it was deleted under the shell (it holds no files)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        return None


def _file_facts(path: Path, name: str, table: str) -> dict[str, tuple[Any, str]]:
    try:  # cached: `check --quick` in a project with a pyproject.toml does not import the parser
        data = load_toml(path, cached=True)
    except TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    except InputError as exc:
        raise ProfileError(str(exc)) from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    raw: Any = data
    for part in (("tool", "mgpu-doctor", "training") if name == PYPROJECT else (DOCTOR_TABLE,)):
        raw = raw.get(part) if isinstance(raw, dict) else None
    if raw is None:
        return {}
    shown = table if name == PYPROJECT else f"[{table}]"
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: {shown} must be a table of keys ({', '.join(KEYS)})")
    facts = {}
    for key, value in raw.items():
        where = f"{path}: {shown} {key}"
        if key not in KEYS:
            raise ProfileError(f"{where}: unknown key; the keys are {', '.join(KEYS)}")
        facts[key] = (parse_value(key, value, where), f"{name}: {shown} {key}")
    return facts


def parse_value(key: str, value: Any, where: str) -> Any:
    """One key's value (TOML value or option text) as :class:`TrainingFacts` holds it."""
    words = WORDS[key]
    if words is None:
        text = str(value).strip()
        if isinstance(value, bool) or not (isinstance(value, int) or text.isdecimal()) or len(text) > 9 \
                or not 1 <= int(text) <= MAX_COUNT:
            raise ProfileError(f"{where}: {shorten(value)} is not a number of {key} (a whole number >= 1)")
        return int(text)
    if key in LIST_KEYS:
        if isinstance(value, list):
            items = value
        elif isinstance(value, str):
            items = value.split(",")
        else:
            raise ProfileError(f"{where}: expected a list of words ({', '.join(words)})")
        out = []
        for item in items:
            if not isinstance(item, str):
                raise ProfileError(f"{where}: {shorten(item)} is not a word; accepted: {', '.join(words)}")
            word = item.strip().lower()
            if word and word not in words:
                raise ProfileError(f"{where}: {shorten(word)} is not a word of {key}"
                                   + _close(word, words, key))
            if word and word not in out:
                out.append(word)
        if not out:
            raise ProfileError(f"{where}: names no word; accepted: {', '.join(words)}")
        return tuple(out)
    if not isinstance(value, str) or value.strip().lower() not in words:
        said = value.strip().lower() if isinstance(value, str) else ""
        raise ProfileError(f"{where}: {shorten(value)} is not a word of {key}{_close(said, words, key)}")
    return value.strip().lower()


def _close(word: str, words: tuple[str, ...], key: str) -> str:
    """"; did you mean save_model?" with the closest words, else where the list is (a long list in
    one line is unreadable: usage has over 70 words)."""
    import difflib

    close = difflib.get_close_matches(word, words, n=3, cutoff=0.6) if word else []
    if close:
        return f"; did you mean {' or '.join(close)}?"
    if len(words) <= 12:
        return f"; accepted: {', '.join(words)}"
    return f" (`mgpu-doctor check --help` lists all {len(words)}, under {OPTIONS[key]})"


def _over(profile: TrainingProfile, facts: Mapping[str, tuple[Any, str]]) -> TrainingProfile:
    """``profile`` with ``facts`` (key -> (value, source)) declared over what it declares."""
    if not facts:
        return profile
    declared = replace(profile.declared, **{k: v for k, (v, _) in facts.items()})
    sources = {**profile.declared_from, **{k: s for k, (_, s) in facts.items()}}
    return replace(profile, declared=declared, declared_from=sources)


def over_recorded(recorded: TrainingProfile | None, declared: TrainingProfile) -> TrainingProfile:
    """What `check --from` judges by: the recorded profile (a report's), with every key declared
    now (files, options) over it; the recorded observations stay."""
    if recorded is None:
        return declared
    return _over(recorded, {k: (getattr(declared.declared, k), declared.declared_from.get(k, ""))
                            for k in declared.declared.known()})


def query_profile(given: Mapping[str, str], profile: TrainingProfile) -> TrainingProfile:
    """A `matrix query`'s profile: the training facts its terms name (``usage=...``), declared over
    ``profile`` (the files' and options'); a term and an option for the same key is a mistake."""
    facts = {}
    for key, text in given.items():
        if key not in QUERY_KEYS:  # gpus=, workers=, backend= describe the query's machine
            continue
        if profile.declared_from.get(key, "").startswith("--"):
            raise ProfileError(f"matrix query: {key} given twice: as {key}={text} and as {OPTIONS[key]}")
        facts[key] = (parse_value(key, text, f"matrix query: {key}"), f"the query ({key}={text})")
    return _over(profile, facts)


def checked_recorded(profile: TrainingProfile, where: str) -> TrainingProfile:
    """A profile read back from a report, its words checked like a file's (a report edited by hand,
    or written by a newer mgpu-doctor with words this one does not know, is one line, exit 2)."""
    for part in ("declared", "observed"):
        facts = getattr(profile, part)
        for key in facts.known():
            value = getattr(facts, key)
            parse_value(key, list(value) if key in LIST_KEYS else value, f"{where}.{part}.{key}")
    for word in profile.usage_checked:
        parse_value("usage", [word], f"{where}.usage_checked")
    return profile
