"""Whether gRPC sends a connection through an HTTP proxy, read from the proxy variables.

TensorFlow's distributed runtime (MultiWorkerMirroredStrategy, ParameterServerStrategy, the
coordination service) connects its tasks with gRPC C-core, which reads lowercase names only
(grpc/grpc doc/core/default_http_proxy_mapper.md): the proxy is the first *set* variable of its
list (set but empty, or a scheme other than ``http``: no proxy), and the hosts reached directly are
those the first set bypass list names. What the list holds depends on the gRPC a TensorFlow
bundles, measured here with real workers on 127.0.0.1 behind a proxy that never answers
(TensorFlow 1.15, 2.0, 2.1, 2.2, 2.3, 2.4, 2.12 and 2.21):

- ``grpc_proxy`` before ``https_proxy``, ``http_proxy``, and ``no_grpc_proxy`` before ``no_proxy``:
  from TensorFlow 2.2; 1.15, 2.0 and 2.1 read only ``https_proxy``, ``http_proxy`` and ``no_proxy``;
- ``TF_GRPC_DEFAULT_OPTIONS=grpc.enable_http_proxy=0`` (TensorFlow passes it to its channels)
  turns the proxy off from TensorFlow 2.1; 1.15 and 2.0 ignore it;
- ``*`` and a CIDR block in ``no_proxy`` bypassed nothing in any release measured (1.15, 2.4,
  2.12); gRPC reads CIDR blocks since grpc/grpc#31119.

How a ``no_proxy`` entry matches changed too: old releases compare the end of the host name,
spaces included; later ones strip spaces; the newest want the exact name or a leading dot
(grpc/grpc#41915). A host is called direct only where every rule set that may apply agrees. Pure
functions: the snapshot keeps the proxy variables with their values reduced to the scheme
(:func:`reduce_proxy_value`), never the address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence

from packaging.version import Version

from mgpu_doctor.record import record

PROXY_NAMES = ("grpc_proxy", "https_proxy", "http_proxy")
BYPASS_NAMES = ("no_grpc_proxy", "no_proxy")
NAMES = PROXY_NAMES + BYPASS_NAMES
PROXY_DOC = "https://github.com/grpc/grpc/blob/master/doc/core/default_http_proxy_mapper.md"
CHANNEL_OPTIONS = "TF_GRPC_DEFAULT_OPTIONS"
NO_PROXY_OPTION = "grpc.enable_http_proxy=0"

DIRECT, THROUGH_PROXY, DEPENDS = "direct", "through the proxy", "depends on gRPC's release"


@record
class Era:
    """One set of gRPC's proxy rules, as the TensorFlow releases that bundle it apply them."""

    name: str
    proxy_names: tuple[str, ...]
    bypass_names: tuple[str, ...]
    reads_channel_options: bool
    reads_cidr: bool


GRPC_NAMES_FROM = Version("2.2")  # grpc_proxy, no_grpc_proxy
CHANNEL_OPTIONS_FROM = Version("2.1")  # TF_GRPC_DEFAULT_OPTIONS
NEWER = Era("newer gRPC (TensorFlow 2.2 on)", PROXY_NAMES, BYPASS_NAMES, reads_channel_options=True,
            reads_cidr=True)
OLDER = Era("older gRPC (TensorFlow 1.15, 2.0)", ("https_proxy", "http_proxy"), ("no_proxy",),
            reads_channel_options=False, reads_cidr=False)
ERAS = (NEWER, OLDER)


def eras_for(tensorflow: Version | None) -> tuple[Era, ...]:
    """The rule set of a TensorFlow's bundled gRPC, as measured from 1.15 on; both extremes where
    the release is not known (or older than any measured)."""
    if tensorflow is None or tensorflow < Version("1.15"):
        return ERAS
    release = Version(f"{tensorflow.major}.{tensorflow.minor}")
    names = release >= GRPC_NAMES_FROM
    return (Era(f"TensorFlow {release}'s gRPC", PROXY_NAMES if names else OLDER.proxy_names,
                BYPASS_NAMES if names else OLDER.bypass_names,
                reads_channel_options=release >= CHANNEL_OPTIONS_FROM, reads_cidr=names),)


def reduce_proxy_value(value: str) -> str:
    """What a snapshot keeps of a proxy variable: empty, or its scheme with the address masked."""
    if not value:
        return ""
    scheme, sep, _ = value.partition("://")
    return f"{scheme.lower()}://***" if sep else "***"


@record
class GrpcProxy:
    """The proxy one era of gRPC takes from the environment."""

    era: Era
    variable: str | None  # the variable the proxy comes from; None when none is set
    used: bool
    why: str  # one phrase: which variable, and why it is or is not used
    bypass_variable: str | None = None
    bypass: str = ""


@record
class Route:
    host: str
    verdict: str  # DIRECT, THROUGH_PROXY or DEPENDS
    why: str


def grpc_proxy(env: Mapping[str, str], era: Era = NEWER) -> GrpcProxy:
    variable = next((name for name in era.proxy_names if name in env), None)
    bypass_variable = next((name for name in era.bypass_names if name in env), None)
    bypass = env.get(bypass_variable, "") if bypass_variable else ""
    options = env.get(CHANNEL_OPTIONS, "").replace(" ", "").split(",")
    if era.reads_channel_options and NO_PROXY_OPTION in options:
        return GrpcProxy(era, variable, False, f"{CHANNEL_OPTIONS} has {NO_PROXY_OPTION}: TensorFlow's "
                         "channels use no proxy")
    if variable is None:
        return GrpcProxy(era, None, False, "none of " + ", ".join(era.proxy_names) + " is set")
    value = env[variable]
    if not value:
        return GrpcProxy(era, variable, False, f"{variable} is set empty: gRPC uses no proxy")
    scheme, sep, _ = value.partition("://")
    if not sep:
        return GrpcProxy(era, variable, False, f"{variable} has no scheme: gRPC cannot parse it, logs an "
                         "error and connects directly")
    if scheme.lower() != "http":
        return GrpcProxy(era, variable, False, f"{variable} uses the scheme {scheme.lower()!r}: gRPC "
                         "supports only http proxies, logs \"scheme not supported in proxy URI\" and "
                         "connects directly")
    return GrpcProxy(era, variable, True, f"{variable} is set (gRPC takes the first set of "
                     f"{', '.join(era.proxy_names)})", bypass_variable, bypass)


def proxy_variable(env: Mapping[str, str], eras: Sequence[Era] = ERAS) -> str | None:
    """The variable the first rule set that uses a proxy takes it from; None when none does."""
    return next((p.variable for era in eras if (p := grpc_proxy(env, era)).used), None)


def route(env: Mapping[str, str], host: str, eras: Sequence[Era] = ERAS) -> Route:
    """How gRPC reaches ``host`` (a name or an IP, without port or brackets) under every era that
    may apply: their verdict where they agree, else DEPENDS naming how they differ."""
    routes = [(era, _route(grpc_proxy(env, era), host)) for era in eras]
    verdicts = {r.verdict for _, r in routes}
    if len(verdicts) == 1:
        return routes[0][1]
    return Route(host, DEPENDS, "; ".join(f"{era.name}: {r.verdict} ({r.why})" for era, r in routes))


def _route(proxy: GrpcProxy, host: str) -> Route:
    if not proxy.used:
        return Route(host, DIRECT, proxy.why)
    if proxy.bypass_variable is None:
        return Route(host, THROUGH_PROXY, f"{' and '.join(proxy.era.bypass_names)} not set")
    best = Route(host, THROUGH_PROXY, f"no entry of {proxy.bypass_variable} matches {host}")
    for raw in proxy.bypass.split(","):
        entry = raw.strip()
        if not entry:
            continue
        verdict, why = _match(host, entry, padded=raw != entry, cidr=proxy.era.reads_cidr)
        if verdict == DIRECT:
            return Route(host, DIRECT, f"{proxy.bypass_variable} lists {entry}")
        if verdict == DEPENDS:
            best = Route(host, DEPENDS, f"{proxy.bypass_variable} entry {entry!r}: {why}")
    return best


def _match(host: str, entry: str, padded: bool, cidr: bool) -> tuple[str, str]:
    name, pattern = host.lower(), entry.lower()
    if "/" in pattern:
        if not cidr or not _in_network(name, pattern):
            return THROUGH_PROXY, ""
        return DEPENDS, "a CIDR block, which only gRPC releases with grpc/grpc#31119 read"
    if pattern.startswith("."):
        if name.endswith(pattern):
            return _padded(padded)
        if name == pattern[1:]:
            return DEPENDS, "older gRPC releases match the end of the name, which the leading dot keeps out"
        return THROUGH_PROXY, ""
    if name == pattern:
        return _padded(padded)
    if name.endswith(pattern):
        return DEPENDS, ("older gRPC releases match the end of the name; the newest need the exact name "
                         "or a leading dot")
    return THROUGH_PROXY, ""


def _padded(padded: bool) -> tuple[str, str]:
    if padded:
        return DEPENDS, "the spaces around it: older gRPC releases compare them too"
    return DIRECT, ""


def _in_network(host: str, cidr: str) -> bool:
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False


def host_of(address: str) -> str:
    """``host:port`` or ``[v6]:port`` to the host gRPC matches."""
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or address.startswith("[") else address
    return host.strip("[]")


def proxy_note(env: Mapping[str, str], addresses: list[str], eras: Sequence[Era] = ERAS) -> str:
    """One line when gRPC may send a connection to one of ``addresses`` through a proxy, else ''."""
    routes = [route(env, host_of(address), eras) for address in addresses]
    unsure = [r for r in routes if r.verdict != DIRECT]
    if not unsure:
        return ""
    hosts = ", ".join(dict.fromkeys(r.host for r in unsure))
    variable = proxy_variable(env, eras) or "a proxy variable"
    return f"{variable} is set: gRPC may send the workers' connections to {hosts} through the proxy " \
           f"({unsure[0].why})"
