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

import dataclasses
import getpass
import hashlib
import os
import re
import socket
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mgpu_doctor.model.report import Report
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.process.masking import UUID_RE, is_allowed, mask_credentials, mask_env_value

T = TypeVar("T")
_HOST_HASH_RE = re.compile(r"^host-[0-9a-f]{10}$")
_COMMON_USERS = frozenset({"root", "user", "admin", "ubuntu", "runner", "jovyan", "nobody"})


@dataclass(frozen=True)
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
        return cls((socket.gethostname(),), user, os.path.expanduser("~").rstrip("/"))


def host_hash(name: str) -> str:
    """The redacted form of a host name (``host-1a2b3c4d5e``); a hashed one is left as it is."""
    return name if _HOST_HASH_RE.match(name) else f"host-{stable_hash(name.lower())[:10]}"


def stable_hash(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


class Redactor:
    """Replaces identifying strings consistently across a whole snapshot or report."""

    def __init__(self, identity: Identity, gpu_ids: list[str]) -> None:
        self.gpu_ids = sorted({g for g in gpu_ids if g}, key=len, reverse=True)
        hosts = {h for h in identity.hostnames if h and not _HOST_HASH_RE.match(h)}
        hosts |= {h.split(".")[0] for h in hosts if len(h.split(".")[0]) >= 3}
        hosts -= {"localhost"}
        self.hosts = sorted(hosts, key=len, reverse=True)
        self.host_pattern = _word_pattern(self.hosts)
        self.home = identity.home if identity.home not in ("", "/") else ""
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
            full = next((g for g in self.gpu_ids if g.upper().startswith(value.upper())), value)
            return f"{kind.upper()}-redacted-{stable_hash(full.upper())[:12]}"
        return f"redacted-{stable_hash(value)[:12]}"

    def text(self, text: str) -> str:
        if not text:
            return text
        for gid in self.gpu_ids:
            if gid in text:
                text = text.replace(gid, self.gpu_id(gid))
        text = UUID_RE.sub(lambda m: self.gpu_id(m.group(0)), text)
        if self.home:
            text = re.sub(rf"{re.escape(self.home)}(?=/|$|[\s:;,'\"\\])", "~", text)
        text = re.sub(r"(/home/|/Users/)[^/\s:;,'\"]+", r"\1<user>", text)
        if self.user_pattern is not None:
            text = self.user_pattern.sub("<user>", text)
        if self.host_pattern is not None:
            text = self.host_pattern.sub(lambda m: self.host(m.group(0)), text)
        return mask_credentials(text)

    def tree(self, value: T) -> T:
        """Every string in a tree of dataclasses, lists and dicts, redacted (a new tree)."""
        return map_strings(value, self.text)


def map_strings(value: T, change: Callable[[str], str]) -> T:
    """Every string in a tree of dataclasses, lists and dicts changed (a new tree); the snapshot's
    kind, tool version and creation time are left as they are."""
    return typing.cast(T, _walk(value, change))


def _walk(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Unavailable):
        return Unavailable(value.reason, change(value.detail), value.cause)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _walk(getattr(value, f.name), change) for f in dataclasses.fields(value)
                   if f.name not in ("kind", "tool_version", "created")}
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [_walk(v, change) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, change) for v in value)
    if isinstance(value, dict):
        return {_walk(k, change): _walk(v, change) for k, v in value.items()}
    return value


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
    hostnames = identity.hostnames + (snapshot.host.hostname,)
    return Redactor(dataclasses.replace(identity, hostnames=hostnames), gpu_identifiers(snapshot))


def mask_snapshot(snapshot: Snapshot) -> Snapshot:
    """Pure: credentials masked, nothing else changed (a snapshot written elsewhere, by another
    version or tool, even with ``--no-redact``: its environment values are masked by name too)."""
    env = {k: mask_env_value(k, v) for k, v in snapshot.env.items()}
    return map_strings(dataclasses.replace(snapshot, env=env), mask_credentials)


def redact_snapshot(snapshot: Snapshot, identity: Identity) -> Snapshot:
    """Pure: the snapshot with identifying values replaced and credentials masked."""
    r = redactor_for(snapshot, identity)
    env = {k: mask_env_value(k, v) for k, v in snapshot.env.items() if is_allowed(k)}
    # UUIDs and serials are replaced wherever they appear by the string walk.
    redacted = r.tree(dataclasses.replace(snapshot, env=env))
    host = dataclasses.replace(redacted.host, hostname=r.host(snapshot.host.hostname))
    return dataclasses.replace(redacted, host=host)


def redact_report(report: Report, original: Snapshot, identity: Identity) -> Report:
    """Pure: the report as it may leave the process. Its snapshot is redacted (environment
    allow-list, hashed hostname) and every string in it redacted for ``original``'s machine."""
    snapshot = redact_snapshot(report.snapshot, identity) if report.snapshot is not None else None
    return redactor_for(original, identity).tree(dataclasses.replace(report, snapshot=snapshot))
