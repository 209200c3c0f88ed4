"""The `grpc-proxy` check: TensorFlow's tasks must not reach each other through an HTTP proxy.

With ``https_proxy`` (or ``grpc_proxy``, ``http_proxy``) set for pip and the workers' hosts not in
``no_proxy``, gRPC sends every connection between the tasks of TF_CONFIG to the proxy, even to
127.0.0.1. A proxy that does not forward them leaves MultiWorkerMirroredStrategy waiting for its
peers at creation: tensorflow/tensorflow#24887 (TensorFlow 1.12), and this project's own
`smoke --workers 2` on TensorFlow 1.15 to 2.21 with a proxy that does not answer.
"""

from __future__ import annotations

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.collective_access import need_collective
from mgpu_doctor.checks.facts_access import need, need_env, need_machine
from mgpu_doctor.environment.resolve import ResolvedEnvironment
from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.process.grpc_proxy import (
    CHANNEL_OPTIONS,
    DEPENDS,
    DIRECT,
    NO_PROXY_OPTION,
    PROXY_DOC,
    PROXY_NAMES,
    THROUGH_PROXY,
    Era,
    Route,
    eras_for,
    grpc_proxy,
    proxy_variable,
    route,
)

PROXY_HANG_THREAD = "https://github.com/tensorflow/tensorflow/issues/24887"
KNOWN_ISSUE = "tf-24887-collective-grpc-https-proxy-hang"
CODES = ("grpc.proxy-ok", "grpc.workers-through-proxy", "grpc.proxy-bypass-uncertain")


def check_grpc_proxy(env: ResolvedEnvironment) -> list[Finding]:
    snapshot = need_machine(env)
    need_env(snapshot, "TF_CONFIG")
    hosts = _cluster_hosts(snapshot.env.get("TF_CONFIG"))
    network = need(need_collective(snapshot).network, "network facts")
    variables = {**need(network.proxy_env, "proxy variables")}
    if CHANNEL_OPTIONS in snapshot.env:
        variables[CHANNEL_OPTIONS] = snapshot.env[CHANNEL_OPTIONS]
    eras = eras_for(env.tensorflow.version)
    routes = [route(variables, host, eras) for host in hosts]
    through = [r for r in routes if r.verdict == THROUGH_PROXY]
    depends = [r for r in routes if r.verdict == DEPENDS]
    proxy = grpc_proxy(variables, eras[0])
    if not through and not depends:
        return [Finding("grpc.proxy-ok", Severity.OK, _all_direct(routes, proxy.why, proxy.used))]
    rules = f"gRPC's rules for {_tensorflow(env)}: {' and '.join(e.name for e in eras)}"
    evidence = [rules] + [f"{r.host}: {r.verdict} ({r.why})" for r in routes if r.verdict != DIRECT]
    variable = proxy_variable(variables, eras)
    if through:
        return [Finding(
            "grpc.workers-through-proxy", Severity.WARNING,
            f"gRPC would send TensorFlow's connections to {_count(through, hosts)} of TF_CONFIG through "
            f"the proxy in {variable}: a proxy that does not forward them leaves the workers waiting "
            "for each other when the strategy is created",
            evidence + [f"known issue: {KNOWN_ISSUE} (`mgpu-doctor matrix show {KNOWN_ISSUE}`)"],
            fix=_fix(through, variables, eras), links=[PROXY_HANG_THREAD, PROXY_DOC],
        )]
    return [Finding(
        "grpc.proxy-bypass-uncertain", Severity.WARNING,
        f"gRPC may send TensorFlow's connections to {_count(depends, hosts)} of TF_CONFIG through the "
        f"proxy in {variable}: whether it bypasses the proxy depends on the gRPC release inside this "
        "TensorFlow",
        evidence, fix=_fix(depends, variables, eras), links=[PROXY_DOC],
    )]


def _cluster_hosts(tf_config: str | None) -> list[str]:
    if not tf_config:
        raise CheckSkipped("TF_CONFIG is not set: no TensorFlow cluster here (one machine's "
                           "MirroredStrategy opens no gRPC connection)")
    reading = read_tf_config(tf_config)
    if reading.state != "ok":
        raise CheckSkipped("TF_CONFIG cannot be read (the multi-worker smoke says why)")
    if reading.cluster is None:
        raise CheckSkipped("TF_CONFIG has no cluster")
    hosts = reading.hosts()
    if not hosts:
        raise CheckSkipped("TF_CONFIG's cluster names no address")
    return hosts


def _tensorflow(env: ResolvedEnvironment) -> str:
    return f"TensorFlow {env.tensorflow.text}" if env.tensorflow.known else "a TensorFlow of unknown version"


def _all_direct(routes: list[Route], why: str, used: bool) -> str:
    if not used:
        return f"gRPC uses no proxy: {why}"
    return f"{why}, and the bypass list names all {len(routes)} host(s) of TF_CONFIG"


def _count(routes: list[Route], hosts: list[str]) -> str:
    names = ", ".join(r.host for r in routes[:4]) + (", ..." if len(routes) > 4 else "")
    return f"{len(routes)} host(s) ({names})" if len(routes) < len(hosts) else f"every host ({names})"


def _fix(routes: list[Route], variables: dict[str, str], eras: tuple[Era, ...]) -> str:
    hosts = ",".join(r.host for r in routes)
    proxies = " and ".join(name for name in PROXY_NAMES if variables.get(name)) or "the proxy variables"
    lists = bypass_lists(variables, eras)
    exports = "; ".join(f'export {name}="${name},{hosts}"' for name in lists)
    shadowed = [f"{name} is the list gRPC reads here: while it is set, {', '.join(later)} is not read"
                for name in lists if (later := _read_after(name, eras))]
    return (f"List the hosts in {' and in '.join(lists)} for the workers, exactly as TF_CONFIG names them "
            f"and without ports ({exports}; gRPC matches neither '*' nor, in the releases measured, 1.15 "
            f"to 2.12, CIDR blocks{'; ' + '; '.join(shadowed) if shadowed else ''}); or start the workers "
            f"without {proxies}. From TensorFlow 2.2 on, gRPC also goes direct with grpc_proxy set empty "
            f"(export grpc_proxy=), and from 2.1 on with {CHANNEL_OPTIONS}={NO_PROXY_OPTION}; 1.15 and 2.0 "
            "ignore both.")


def bypass_lists(variables: dict[str, str], eras: tuple[Era, ...]) -> list[str]:
    """The bypass variables the rule sets that use a proxy read: the first set one of each, or
    no_proxy (read by every rule set) where none is set."""
    names: list[str] = []
    for era in eras:
        proxy = grpc_proxy(variables, era)
        if proxy.used:
            name = proxy.bypass_variable or "no_proxy"
            if name not in names:
                names.append(name)
    return names or ["no_proxy"]


def _read_after(name: str, eras: tuple[Era, ...]) -> list[str]:
    """The bypass variables gRPC would have read after ``name``, had ``name`` not been set."""
    later: list[str] = []
    for era in eras:
        if name in era.bypass_names:
            later += [n for n in era.bypass_names[era.bypass_names.index(name) + 1:] if n not in later]
    return later
