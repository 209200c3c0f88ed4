"""TF_CONFIG, checked before any worker starts: a one-line error instead of a hang.

:func:`parse_tf_config` is pure (the shape of the document: read by the lenient reader,
:func:`mgpu_doctor.environment.tf_config.read_tf_config`, and refused here where it cannot work);
:func:`check_addresses` asks the operating system (names resolve, this task's address is on this
machine and its port free).
Addresses of the other tasks cannot be probed before those workers listen, so a peer that
never comes up is caught by the launcher's stall detection, not here.
"""

from __future__ import annotations

import errno
import json
import socket
from collections.abc import Callable

from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.process.inputs import shorten
from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.record import record

# The task types TFConfigClusterResolver / MultiWorkerMirroredStrategy know.
TASK_TYPES = ("chief", "worker", "evaluator", "ps")


class TfConfigError(ValueError):
    """TF_CONFIG cannot work; the message is one line saying what and where."""


@record
class TfConfig:
    cluster: dict[str, list[str]]
    task_type: str
    task_index: int

    @property
    def own_address(self) -> str:
        return self.cluster[self.task_type][self.task_index]

    @property
    def num_workers(self) -> int:
        return len(self.cluster.get("chief", [])) + len(self.cluster.get("worker", []))

    def to_json(self) -> str:
        return json.dumps({"cluster": self.cluster,
                           "task": {"type": self.task_type, "index": self.task_index}})


def parse_tf_config(text: str, source: str = "TF_CONFIG") -> TfConfig:
    """Check the document itself: JSON, cluster, task, addresses, no duplicates."""
    if not text.strip():
        raise TfConfigError(f"{source} is empty")
    reading = read_tf_config(text, source)
    if reading.state == "over-limit":
        raise TfConfigError(f"{source}: {reading.error}")
    if reading.state == "not-json":
        raise TfConfigError(f"{source} is not valid JSON (line {reading.line}, column {reading.column}: "
                            f"{reading.error})")
    if reading.state != "ok":
        raise TfConfigError(f"{source} must be a JSON object with 'cluster' and 'task'")
    data = reading.data
    cluster = data.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise TfConfigError(f"{source} has no 'cluster' (a map of task type to 'host:port' lists)")
    seen: dict[str, str] = {}
    for task_type, addresses in cluster.items():
        if task_type not in TASK_TYPES:
            raise TfConfigError(f"{source}: unknown task type {shorten(task_type)} in 'cluster' "
                                f"(known: {', '.join(TASK_TYPES)})")
        if not isinstance(addresses, list) or not addresses:
            raise TfConfigError(f"{source}: cluster.{task_type} must be a non-empty list of 'host:port'")
        for i, address in enumerate(addresses):
            where = f"cluster.{task_type}[{i}]"
            split_address(address, f"{source}: {where}")
            if address in seen:
                raise TfConfigError(f"{source}: {where} {shorten(address)} is also {seen[address]}: "
                                    "every task needs its own host:port")
            seen[address] = where
    if "chief" in cluster and len(cluster["chief"]) != 1:
        raise TfConfigError(f"{source}: cluster.chief must have exactly one address")
    task = data.get("task")
    if not isinstance(task, dict):
        raise TfConfigError(f"{source} has no 'task' ({{\"type\": \"worker\", \"index\": N}}): "
                            "which of the cluster's tasks is this process?")
    task_type, index = task.get("type"), task.get("index")
    if not isinstance(task_type, str) or task_type not in cluster:
        raise TfConfigError(f"{source}: task.type {shorten(task_type)} is not in the cluster "
                            f"({', '.join(cluster)})")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TfConfigError(f"{source}: task.index must be an integer, got {shorten(index)}")
    if not 0 <= index < len(cluster[task_type]):
        raise TfConfigError(f"{source}: task.index {index} is out of range: cluster.{task_type} has "
                            f"{len(cluster[task_type])} address(es), so 0..{len(cluster[task_type]) - 1}")
    return TfConfig({k: list(v) for k, v in cluster.items()}, task_type, index)


def split_address(address: object, where: str) -> tuple[str, int]:
    """``host:port``, ``[v6-address]:port``: the host (without brackets) and the port."""
    if not isinstance(address, str) or ":" not in address:
        raise TfConfigError(f"{where} must be 'host:port', got {shorten(address)}")
    shown = mask_credentials(shorten(address))
    if any(c.isspace() for c in address):
        raise TfConfigError(f"{where} {shown} has white space in it")
    if "@" in address:
        raise TfConfigError(f"{where} {shown}: TF_CONFIG addresses take no user name or password "
                            "(write host:port)")
    host, _, port_text = address.rpartition(":")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")) or host.count("[") + host.count("]") != 2:
            raise TfConfigError(f"{where} {shown}: unbalanced brackets; an IPv6 address is written "
                                "[::1]:2222")
        host = host[1:-1]  # [::1]:2222
    elif ":" in host:
        raise TfConfigError(f"{where} {shown}: an IPv6 address needs brackets ([{host}]:{port_text}), "
                            "a host name cannot hold ':'")
    if not host:
        raise TfConfigError(f"{where} {shown} has no host")
    if not port_text.isdecimal() or len(port_text) > 5 or not 0 < int(port_text) < 65536:
        raise TfConfigError(f"{where} {shown}: port must be 1..65535")
    return host, int(port_text)


Resolver = Callable[[str], list[str]]


def resolve(host: str) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)})


def check_addresses(config: TfConfig, resolver: Resolver = resolve) -> None:
    """Every host resolves; this task's own address is on this machine with its port free."""
    for task_type, addresses in config.cluster.items():
        for i, address in enumerate(addresses):
            host, _ = split_address(address, f"cluster.{task_type}[{i}]")
            try:
                resolver(host)
            except OSError as exc:
                raise TfConfigError(f"TF_CONFIG: cluster.{task_type}[{i}] host {host!r} does not "
                                    f"resolve ({exc.strerror or exc}): a worker would wait for it "
                                    "forever") from None
    host, port = split_address(config.own_address, "task address")
    for ip in resolver(host):
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # As TensorFlow's gRPC server binds: connections of a finished run (TIME_WAIT, a
            # minute) do not block the port; a process still listening on it does.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((ip, port))
            except OSError as exc:
                where = f"TF_CONFIG: this task's address {config.own_address}"
                if exc.errno == errno.EADDRINUSE:
                    raise TfConfigError(f"{where}: port {port} is already in use on {ip} (another "
                                        "worker or an old job still running?)") from None
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise TfConfigError(f"{where}: {ip} is not an address of this machine: is "
                                        "task.index the right one for this node?") from None
                raise TfConfigError(f"{where}: cannot listen on {ip}:{port}: "
                                    f"{exc.strerror or exc}") from None


def free_loopback_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (held open together, so they are distinct)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def local_cluster(count: int) -> list[TfConfig]:
    """TF_CONFIG for ``count`` workers on free loopback ports, one per task index."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_loopback_ports(count)]}
    return [TfConfig(cluster, "worker", i) for i in range(count)]
