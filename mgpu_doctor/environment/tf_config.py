"""TF_CONFIG read leniently, once, for everything that only looks at it: the cluster's addresses and
hosts, how many workers train, this node's task; a text that is unset or cannot be read says why.

The `grpc-proxy` check, the resolver (the matrix's ``workers``), `fleet` and the multi-worker launcher
read it here. Refusing a TF_CONFIG that cannot work stays with the launcher
(:func:`mgpu_doctor.multiworker.tf_config.parse_tf_config`), which starts from this reading.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from mgpu_doctor.process.grpc_proxy import host_of
from mgpu_doctor.process.inputs import InputError, parse_json
from mgpu_doctor.record import field, record

# unset; ok: a JSON object; not-json: the JSON parser refused it; over-limit: beyond the limits on
# what mgpu-doctor reads (depth, digits); not-object: JSON, but not an object.
State = Literal["unset", "ok", "not-json", "over-limit", "not-object"]
WORKER_ROLES = ("chief", "worker")  # the tasks that train under MultiWorkerMirroredStrategy


@record
class TfConfigReading:
    """What a TF_CONFIG text says, as far as it can be read; ``data`` is {} unless ``state`` is ok.

    ``error``: the parser's message (not-json, with ``line`` and ``column``) or the limit's
    (over-limit, without the source's name)."""

    state: State
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    line: int = 0
    column: int = 0

    @property
    def problem(self) -> str:
        """Why it cannot be read, in a few words ("" when it can or is unset)."""
        if self.state == "not-json":
            return f"not valid JSON ({self.error})"
        if self.state == "over-limit":
            return self.error
        return "not a JSON object" if self.state == "not-object" else ""

    @property
    def cluster(self) -> dict[str, Any] | None:
        """The ``cluster`` object as written; None where there is none."""
        cluster = self.data.get("cluster")
        return cluster if isinstance(cluster, dict) else None

    def addresses(self) -> list[str]:
        """Every address (a string in a role's list) of the cluster, in order."""
        return [address for members in (self.cluster or {}).values() if isinstance(members, list)
                for address in members if isinstance(address, str)]

    def hosts(self) -> list[str]:
        """The hosts of :meth:`addresses`, each once, in order."""
        return list(dict.fromkeys(host_of(address) for address in self.addresses()))

    @property
    def workers(self) -> int | None:
        """The tasks that train (chief and workers); None where the cluster names none."""
        cluster = self.cluster or {}
        count = sum(len(members) for role in WORKER_ROLES if isinstance(members := cluster.get(role), list))
        return count or None


def read_tf_config(text: str | None, source: str = "TF_CONFIG") -> TfConfigReading:
    """Never raises: a text that cannot be read is a reading that says why."""
    if text is None:
        return TfConfigReading("unset")
    try:
        data = parse_json(text, source)
    except json.JSONDecodeError as exc:
        return TfConfigReading("not-json", error=exc.msg, line=exc.lineno, column=exc.colno)
    except InputError as exc:
        return TfConfigReading("over-limit", error=str(exc).removeprefix(f"{source}: "))
    if not isinstance(data, dict):
        return TfConfigReading("not-object")
    return TfConfigReading("ok", data)
