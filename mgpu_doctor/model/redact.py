"""Redaction: make a snapshot safe to share, as a pure function Snapshot -> Snapshot.

- the hostname becomes a stable hash (``host-1a2b3c4d5e``), so machines can still be told apart;
- the home directory becomes ``~`` and any ``/home/NAME`` or ``/Users/NAME`` ``/home/<user>``;
  the user name elsewhere becomes ``<user>``;
- GPU UUIDs (also ``CUDA_VISIBLE_DEVICES`` entries and UUID prefixes) and serials become stable
  hashes (``GPU-redacted-…``), the same GPU always getting the same one;
- only allow-listed environment variables are kept, and credential-looking values (tokens, keys,
  passwords, URLs with user:password) are masked. :func:`mask_credentials` also runs on every
  snapshot the probes gather, redacted or not.

Redacting twice changes nothing: hashed values are recognisable and left alone.
"""

from __future__ import annotations

import bisect
import enum
import functools
import getpass
import hashlib
import os
import platform
import re
import typing
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from mgpu_doctor.model.cluster import cluster_hosts
from mgpu_doctor.model.report import Report
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.process.masking import UUID_RE, is_allowed, mask_credentials, mask_env_value
from mgpu_doctor.record import fields, is_record, record, replace

T = TypeVar("T")
# Where a GPU identifier (a UUID, an old-style MIG id "MIG-GPU-<uuid>/1/0", a serial) can stand: each
# such word is looked up once in a table, so the time does not grow with the number of GPUs.
_ID_WORD = re.compile(r"[A-Za-z0-9_-]+(?:/[0-9]+)*")
_HOME_DIR = re.compile(r"(/home/|/Users/)[^/\s:;,'\"]+")
_HOST_HASH_RE = re.compile(r"^host-[0-9a-f]{10}$")
_COMMON_USERS = frozenset({"root", "user", "admin", "ubuntu", "runner", "jovyan", "nobody"})


@record
class Identity:
    """Who and where the report comes from: what to take out of it."""

    hostnames: tuple[str, ...] = ()
    user: str = ""
    home: str = ""

    @classmethod
    def current(cls) -> Identity:
        try:
            user = getpass.getuser()
        except Exception:  # no passwd entry in some containers
            user = ""
        return cls((platform.node(),), user, os.path.expanduser("~").rstrip("/"))


def host_hash(name: str) -> str:
    """The redacted form of a host name (``host-1a2b3c4d5e``); a hashed one is left as it is."""
    return name if _HOST_HASH_RE.match(name) else f"host-{stable_hash(name.lower())[:10]}"


def stable_hash(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


class Redactor:
    """Replaces identifying strings consistently across a whole snapshot or report."""

    def __init__(self, identity: Identity, gpu_ids: list[str]) -> None:
        self.gpu_ids = sorted({g for g in gpu_ids if g}, key=len, reverse=True)
        self._by_id: dict[str, str] = {}  # identifier -> its hash, filled on first use
        self._uuids_upper = sorted(g.upper() for g in self.gpu_ids)  # for UUID prefixes, by bisection
        hosts = {h for h in identity.hostnames if h and not _HOST_HASH_RE.match(h)}
        hosts |= {h.split(".")[0] for h in hosts if len(h.split(".")[0]) >= 3}
        hosts -= {"localhost"}
        self.hosts = sorted(hosts, key=len, reverse=True)
        self.host_pattern = _word_pattern(self.hosts)
        self.home = identity.home if identity.home not in ("", "/") else ""
        self.home_pattern = (re.compile(rf"{re.escape(self.home)}(?=/|$|[\s:;,'\"\\])")
                             if self.home else None)
        self._ids = frozenset(self.gpu_ids)
        self._done: dict[str, str] = {}
        user = identity.user
        self.user_pattern = (_word_pattern([user]) if len(user) >= 3 and user not in _COMMON_USERS
                             else None)
        self.user = user

    def host(self, name: str) -> str:
        return host_hash(name)

    def gpu_id(self, value: str) -> str:
        """A UUID, a UUID prefix (as CUDA_VISIBLE_DEVICES allows) or a serial, hashed stably."""
        if "redacted-" in value:
            return value
        kind, _, rest = value.partition("-")
        if kind.upper() in ("GPU", "MIG") and rest:
            return f"{kind.upper()}-redacted-{stable_hash(self._full_id(value.upper()))[:12]}"
        return f"redacted-{stable_hash(value)[:12]}"

    def _full_id(self, upper: str) -> str:
        """The known identifier that ``upper`` (upper case) is a prefix of, else ``upper`` itself."""
        at = bisect.bisect_left(self._uuids_upper, upper)
        known = self._uuids_upper[at] if at < len(self._uuids_upper) else ""
        return known if known.startswith(upper) else upper

    def _known_id(self, match: re.Match[str]) -> str:
        word = match.group(0)
        for candidate in (word, word.split("/", 1)[0]):
            if candidate in self._ids:
                if candidate not in self._by_id:
                    self._by_id[candidate] = self.gpu_id(candidate)
                return self._by_id[candidate] + word[len(candidate):]
        return word

    def text(self, text: str) -> str:
        """``text`` redacted; the same string (a GPU model, a driver version) is redacted once."""
        if not text:
            return text
        done = self._done.get(text)
        if done is None:
            done = self._done[text] = self._redacted(text)
        return done

    def _redacted(self, text: str) -> str:
        # Each pattern runs only where what it looks for is in the text (most strings hold none).
        if self._ids:
            text = _ID_WORD.sub(self._known_id, text)
        if "GPU-" in text or "MIG-" in text:
            text = UUID_RE.sub(lambda m: self.gpu_id(m.group(0)), text)
        if self.home_pattern is not None and self.home in text:
            text = self.home_pattern.sub("~", text)
        if "/home/" in text or "/Users/" in text:
            text = _HOME_DIR.sub(r"\1<user>", text)
        lower = text.lower()
        if self.user_pattern is not None and self.user.lower() in lower:
            text = self.user_pattern.sub("<user>", text)
        if self.host_pattern is not None and any(h.lower() in lower for h in self.hosts):
            text = self.host_pattern.sub(lambda m: self.host(m.group(0)), text)
        if '"cluster"' in text:  # another machine's TF_CONFIG (a baseline, a fleet node): its peers
            peers = _word_pattern([h for h in cluster_hosts(text) if not _HOST_HASH_RE.match(h)])
            if peers is not None:
                text = peers.sub(lambda m: self.host(m.group(0)), text)
        return mask_credentials(text)

    def tree(self, value: T) -> T:
        """Every string in a tree of dataclasses, lists and dicts, redacted (a new tree)."""
        return map_strings(value, self.text)


def map_strings(value: T, change: Callable[[str], str],
                keep: frozenset[str] = frozenset({"kind", "tool_version", "created"})) -> T:
    """Every string in a tree of dataclasses, lists and dicts changed (a new tree); the fields named
    in ``keep`` (by default the snapshot's kind, tool version and creation time) are left as they
    are, and so are enum members (the program's own words)."""
    return typing.cast(T, _walk(value, change, keep))


_SCALARS = frozenset({int, float, bool, type(None)})


def _walk(value: Any, change: Callable[[str], str], keep: frozenset[str]) -> Any:
    kind = type(value)  # the common cases first: a snapshot of thousands of GPUs is walked in seconds
    if kind is str:
        return change(value)
    if kind in _SCALARS or isinstance(value, enum.Enum):
        return value
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Unavailable):
        detail = change(value.detail)
        return value if detail == value.detail else Unavailable(value.reason, detail, value.cause)
    if kind is list:
        items = [v if type(v) in _SCALARS else _walk(v, change, keep) for v in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if is_record(value) and not isinstance(value, type):
        return _walk_dataclass(value, change, keep)
    if isinstance(value, list):
        return [_walk(v, change, keep) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, change, keep) for v in value)
    if isinstance(value, dict):
        return {_walk(k, change, keep): _walk(v, change, keep) for k, v in value.items()}
    return value


def _walk_dataclass(value: Any, change: Callable[[str], str], keep: frozenset[str]) -> Any:
    """A frozen dataclass with its fields walked; the same object where nothing changed (snapshots
    and reports are not changed in place), so an unchanged subtree costs no copy."""
    kind = type(value)
    changes = {}
    for name in _init_fields(typing.cast(Hashable, kind)):
        field_value = getattr(value, name)
        if name in keep or type(field_value) in _SCALARS:
            continue
        new = change(field_value) if type(field_value) is str else _walk(field_value, change, keep)
        if new is not field_value and (type(new) is not str or new != field_value):
            changes[name] = new
    if not changes:
        return value
    if _plain(typing.cast(Hashable, kind)):  # a copy with the changed fields: no __init__ to run again
        copy = object.__new__(kind)
        copy.__dict__.update(value.__dict__)
        copy.__dict__.update(changes)
        return copy
    return replace(value, **changes)


@functools.cache
def _plain(cls: Hashable) -> bool:
    """A dataclass whose instances keep their fields in ``__dict__`` and check nothing on creation."""
    return not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")


@functools.cache
def _init_fields(cls: Hashable) -> tuple[str, ...]:
    return tuple(f.name for f in fields(typing.cast(type, cls)) if f.init)


def _word_pattern(words: list[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_-])", re.IGNORECASE)


def gpu_identifiers(snapshot: Snapshot) -> list[str]:
    nvml = snapshot.nvml
    if isinstance(nvml, Unavailable):
        return []
    ids = []
    for gpu in nvml.gpus:
        for name in ("uuid", "serial"):  # serial: for when the NVML probe gathers it
            value = getattr(gpu, name, "")
            if isinstance(value, str) and value:
                ids.append(value)
    return ids


def redactor_for(snapshot: Snapshot, identity: Identity) -> Redactor:
    """The redactor for a report of ``snapshot``'s machine: its host name and its cluster peers'
    (TF_CONFIG) are hashed wherever they appear, with its GPUs' identifiers."""
    peers = tuple(cluster_hosts(snapshot.env.get("TF_CONFIG", "")))
    hostnames = identity.hostnames + (snapshot.host.hostname,) + peers
    return Redactor(replace(identity, hostnames=hostnames), gpu_identifiers(snapshot))


def mask_snapshot(snapshot: Snapshot) -> Snapshot:
    """Pure: credentials masked, nothing else changed (a snapshot written elsewhere, by another
    version or tool, even with ``--no-redact``: its environment values are masked by name too)."""
    env = {k: mask_env_value(k, v) for k, v in snapshot.env.items()}
    return map_strings(replace(snapshot, env=env), functools.cache(mask_credentials))


def redact_snapshot(snapshot: Snapshot, identity: Identity) -> Snapshot:
    """Pure: the snapshot with identifying values replaced and credentials masked."""
    r = redactor_for(snapshot, identity)
    env = {k: mask_env_value(k, v) for k, v in snapshot.env.items() if is_allowed(k)}
    # UUIDs and serials are replaced wherever they appear by the string walk.
    redacted = r.tree(replace(snapshot, env=env))
    host = replace(redacted.host, hostname=r.host(snapshot.host.hostname))
    return replace(redacted, host=host)


def redact_report(report: Report, original: Snapshot, identity: Identity) -> Report:
    """Pure: the report as it may leave the process. Its snapshot is redacted (environment
    allow-list, hashed hostname) and every string in it redacted for ``original``'s machine."""
    snapshot = redact_snapshot(report.snapshot, identity) if report.snapshot is not None else None
    return redactor_for(original, identity).tree(replace(report, snapshot=snapshot))
