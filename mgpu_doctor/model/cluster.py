"""The hosts a cluster description names: what redaction takes out of every report.

Read leniently, from text: a TF_CONFIG the strict reader refuses (multiworker/tf_config.py), one
shown cut short in a drift row, or one inside another node's snapshot still names its peers, and
those names must not leave the machine in a bug report."""

from __future__ import annotations

import re

# "host:port" or "[v6]:port" as a JSON string of the cluster's lists.
_ADDRESS = re.compile(r'"(?:\[(?P<v6>[0-9A-Fa-f:.%]{2,64})\]|(?P<host>[A-Za-z0-9_.-]{1,253})):\d{1,5}"')
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"})


def cluster_hosts(text: str) -> list[str]:
    """The host names and addresses (not loopback) of the cluster in a TF_CONFIG-like text, in order,
    each once; [] where the text names no cluster."""
    at = text.find('"cluster"')
    if at < 0:
        return []
    hosts: dict[str, None] = {}
    for match in _ADDRESS.finditer(text, at):
        host = match.group("v6") or match.group("host")
        if host.lower() not in LOOPBACK:
            hosts[host] = None
    return list(hosts)
