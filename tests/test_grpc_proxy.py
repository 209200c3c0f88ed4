"""The `grpc-proxy` check: gRPC's proxy rules, the probe that records them without the address, the
check on a fake machine's snapshot and through `check --from`, and the multi-worker hang that names
the proxy (real workers on 127.0.0.1 behind a proxy that never answers)."""

from __future__ import annotations

import json
import socket

import pytest
from packaging.version import Version

from mgpu_doctor.checks import CHECKS, run_check
from mgpu_doctor.cli import main
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.model.collective_facts import not_in_snapshot
from mgpu_doctor.model.findings import CheckStatus, Severity
from mgpu_doctor.model.snapshot import Snapshot
from mgpu_doctor.probes.envvars import gather_env
from mgpu_doctor.process.grpc_proxy import (
    DEPENDS,
    DIRECT,
    ERAS,
    NEWER,
    OLDER,
    THROUGH_PROXY,
    eras_for,
    host_of,
    proxy_note,
    reduce_proxy_value,
    route,
)
from mgpu_doctor.record import replace
from tests import fake_host
from tests.fake_host import nvml_for
from tests.scenarios import snapshot, tf_view

CHECK = next(c for c in CHECKS if c.name == "grpc-proxy")
PROXY = "http://alice:s3cret@proxy.corp.example:3128"
CLUSTER = json.dumps({"cluster": {"chief": ["node-a:2222"], "worker": ["10.1.2.3:2222", "[fd00::7]:2222"]},
                      "task": {"type": "chief", "index": 0}})


BOTH, NEW, OLD = ERAS, (NEWER,), (OLDER,)


@pytest.mark.parametrize("env,host,eras,verdict", [
    ({}, "node-a", BOTH, DIRECT),
    ({"https_proxy": PROXY}, "node-a", BOTH, THROUGH_PROXY),
    ({"https_proxy": PROXY}, "127.0.0.1", BOTH, THROUGH_PROXY),  # gRPC keeps no exception for loopback
    ({"http_proxy": PROXY}, "node-a", BOTH, THROUGH_PROXY),
    ({"HTTPS_PROXY": PROXY}, "node-a", BOTH, DIRECT),  # gRPC reads lowercase names only
    ({"https_proxy": ""}, "node-a", BOTH, DIRECT),  # set empty: no proxy
    ({"https_proxy": "https://proxy:3128"}, "node-a", BOTH, DIRECT),  # scheme not supported: not used
    ({"https_proxy": "proxy:3128"}, "node-a", BOTH, DIRECT),  # no scheme: cannot be parsed, not used
    # grpc_proxy and the channel option: newer gRPC only (TensorFlow 1.15 measured to ignore both)
    ({"grpc_proxy": "", "https_proxy": PROXY}, "node-a", NEW, DIRECT),
    ({"grpc_proxy": "", "https_proxy": PROXY}, "node-a", OLD, THROUGH_PROXY),
    ({"grpc_proxy": "", "https_proxy": PROXY}, "node-a", BOTH, DEPENDS),
    ({"grpc_proxy": PROXY}, "node-a", OLD, DIRECT),
    ({"https_proxy": PROXY, "TF_GRPC_DEFAULT_OPTIONS": "grpc.enable_http_proxy=0"}, "node-a", NEW, DIRECT),
    ({"https_proxy": PROXY, "TF_GRPC_DEFAULT_OPTIONS": "grpc.enable_http_proxy=0"}, "node-a", OLD, THROUGH_PROXY),
    ({"http_proxy": PROXY, "no_proxy": "localhost,node-a"}, "node-a", BOTH, DIRECT),
    ({"https_proxy": PROXY, "no_proxy": "NODE-A"}, "node-a", BOTH, DIRECT),
    ({"https_proxy": PROXY, "no_proxy": "localhost, node-a"}, "node-a", BOTH, DEPENDS),  # old gRPC kept the space
    ({"https_proxy": PROXY, "no_proxy": ".corp"}, "a.corp", BOTH, DIRECT),
    ({"https_proxy": PROXY, "no_proxy": ".corp"}, "corp", BOTH, DEPENDS),
    ({"https_proxy": PROXY, "no_proxy": "corp"}, "a.corp", BOTH, DEPENDS),  # a suffix: old releases only
    ({"https_proxy": PROXY, "no_proxy": "10.0.0.0/8"}, "10.1.2.3", NEW, DEPENDS),  # CIDR: grpc#31119 on
    ({"https_proxy": PROXY, "no_proxy": "10.0.0.0/8"}, "10.1.2.3", OLD, THROUGH_PROXY),
    ({"https_proxy": PROXY, "no_proxy": "10.0.0.0/8"}, "node-a", BOTH, THROUGH_PROXY),
    ({"https_proxy": PROXY, "no_proxy": "*"}, "node-a", BOTH, THROUGH_PROXY),  # not gRPC's syntax
    ({"https_proxy": PROXY, "no_proxy": "node-a:2222"}, "node-a", BOTH, THROUGH_PROXY),  # no ports compared
    ({"https_proxy": PROXY, "no_grpc_proxy": "", "no_proxy": "node-a"}, "node-a", NEW, THROUGH_PROXY),  # shadowed
    ({"https_proxy": PROXY, "no_grpc_proxy": "", "no_proxy": "node-a"}, "node-a", OLD, DIRECT),
    ({"https_proxy": PROXY, "no_grpc_proxy": "node-a"}, "node-a", NEW, DIRECT),
    ({"https_proxy": PROXY, "no_grpc_proxy": "node-a"}, "node-a", BOTH, DEPENDS),
])
def test_routes_follow_grpc_core(env, host, eras, verdict):
    assert route(env, host, eras).verdict == verdict


def test_where_the_rule_sets_differ_the_reason_names_both():
    why = route({"grpc_proxy": "", "https_proxy": PROXY}, "node-a").why
    assert "newer gRPC (TensorFlow 2.2 on): direct (grpc_proxy is set empty" in why
    assert "older gRPC (TensorFlow 1.15, 2.0): through the proxy (no_proxy not set)" in why


@pytest.mark.parametrize("version,grpc_names,channel_options", [
    ("1.15.5", False, False), ("2.0.4", False, False), ("2.1.4", False, True), ("2.2.3", True, True),
    ("2.21.0", True, True), ("2.30.1", True, True),
])
def test_the_rules_of_each_tensorflow_as_measured(version, grpc_names, channel_options):
    [era] = eras_for(Version(version))
    assert ("grpc_proxy" in era.proxy_names, "no_grpc_proxy" in era.bypass_names) == (grpc_names, grpc_names)
    assert era.reads_channel_options is channel_options
    assert era.name == f"TensorFlow {'.'.join(version.split('.')[:2])}'s gRPC"


@pytest.mark.parametrize("version", [None, "1.14.0"])
def test_an_unknown_or_unmeasured_tensorflow_gets_both_extremes(version):
    assert eras_for(None if version is None else Version(version)) == ERAS


def test_host_of_an_address():
    assert [host_of(a) for a in ("node-a:2222", "10.1.2.3:1", "[fd00::7]:2222", "fd00::7")] == \
        ["node-a", "10.1.2.3", "fd00::7", "fd00::7"]


@pytest.mark.parametrize("value,kept", [(PROXY, "http://***"), ("", ""), ("proxy:3128", "***"),
                                        ("HTTPS://p:1", "https://***")])
def test_the_snapshot_keeps_the_scheme_never_the_address(value, kept):
    assert reduce_proxy_value(value) == kept


def machine(tmp_path, env: dict[str, str], tensorflow: str = "2.21.0") -> Snapshot:
    fake = fake_host.dgx(tmp_path)
    fake.environ.update(env)
    nvml = nvml_for(fake)
    return replace(snapshot(nvml, tf_view(len(nvml.gpus), version=tensorflow), env={**fake.environ}),
                   collective=fake.gather())


def judge(snap: Snapshot):
    return run_check(CHECK, resolve(snap))


def test_the_probe_records_the_variables_without_the_proxy_address(tmp_path):
    snap = machine(tmp_path, {"https_proxy": PROXY, "no_proxy": "localhost,node-a", "HTTP_PROXY": PROXY})
    assert snap.collective.network.proxy_env == {"https_proxy": "http://***", "no_proxy": "localhost,node-a"}
    assert "proxy.corp.example" not in repr(snap.collective) and "s3cret" not in repr(snap.collective)
    assert gather_env({"https_proxy": PROXY, "http_proxy": PROXY}) == {}  # the environment keeps none of them


def test_workers_missing_from_no_proxy_are_a_warning_naming_them_and_the_fix(tmp_path):
    outcome = judge(machine(tmp_path, {"TF_CONFIG": CLUSTER, "https_proxy": PROXY, "no_proxy": "localhost,node-a"}))
    assert outcome.status is CheckStatus.WARNING
    [finding] = outcome.findings
    assert finding.code == "grpc.workers-through-proxy" and finding.severity is Severity.WARNING
    assert "2 host(s) (10.1.2.3, fd00::7) of TF_CONFIG" in finding.title and "https_proxy" in finding.title
    assert "export grpc_proxy=" in finding.fix and 'export no_proxy="$no_proxy,10.1.2.3,fd00::7"' in finding.fix
    assert "TF_GRPC_DEFAULT_OPTIONS=grpc.enable_http_proxy=0" in finding.fix
    assert "https://github.com/tensorflow/tensorflow/issues/24887" in finding.links
    assert not any("node-a:" in line for line in finding.evidence)  # node-a is bypassed
    assert "proxy.corp.example" not in json.dumps([finding.title, finding.evidence, finding.fix])


def test_every_host_bypassed_or_no_proxy_for_grpc_passes(tmp_path):
    bypassed = judge(machine(tmp_path, {"TF_CONFIG": CLUSTER, "https_proxy": PROXY,
                                        "no_proxy": "node-a,10.1.2.3,fd00::7"}))
    assert bypassed.status is CheckStatus.PASSED and "names all 3 host(s)" in bypassed.findings[0].title
    emptied = judge(machine(tmp_path / "b", {"TF_CONFIG": CLUSTER, "https_proxy": PROXY, "grpc_proxy": ""}))
    assert emptied.status is CheckStatus.PASSED and "set empty" in emptied.findings[0].title
    option = judge(machine(tmp_path / "c", {"TF_CONFIG": CLUSTER, "https_proxy": PROXY,
                                            "TF_GRPC_DEFAULT_OPTIONS": "grpc.keepalive_time_ms=1,grpc.enable_http_proxy=0"}))
    assert option.status is CheckStatus.PASSED and "TF_GRPC_DEFAULT_OPTIONS" in option.findings[0].title


def test_what_only_newer_grpc_reads_does_not_help_tensorflow_1_15(tmp_path):
    env = {"TF_CONFIG": CLUSTER, "https_proxy": PROXY, "grpc_proxy": ""}
    assert judge(machine(tmp_path, env)).status is CheckStatus.PASSED
    old = judge(machine(tmp_path / "old", env, tensorflow="1.15.5"))
    assert old.status is CheckStatus.WARNING and "every host (node-a, 10.1.2.3, fd00::7)" in old.findings[0].title
    assert "TensorFlow 1.15's gRPC" in old.findings[0].evidence[0]
    between = judge(machine(tmp_path / "2.1", env, tensorflow="2.1.4"))  # grpc_proxy: from 2.2
    assert between.status is CheckStatus.WARNING and between.findings[0].code == "grpc.workers-through-proxy"
    unknown = judge(machine(tmp_path / "1.14", env, tensorflow="1.14.0"))
    assert unknown.status is CheckStatus.WARNING and unknown.findings[0].code == "grpc.proxy-bypass-uncertain"


def test_a_bypass_only_some_grpc_releases_honour_is_a_warning_saying_so(tmp_path):
    outcome = judge(machine(tmp_path, {"TF_CONFIG": CLUSTER, "https_proxy": PROXY,
                                       "no_proxy": "node-a,10.0.0.0/8,fd00::/16"}))
    assert outcome.status is CheckStatus.WARNING
    assert outcome.findings[0].code == "grpc.proxy-bypass-uncertain" and "may send" in outcome.findings[0].title
    assert "grpc/grpc#31119" in " ".join(outcome.findings[0].evidence)


def test_without_tf_config_or_without_the_facts_it_is_skipped(tmp_path):
    alone = judge(machine(tmp_path, {"https_proxy": PROXY}))
    assert alone.status is CheckStatus.SKIPPED and "TF_CONFIG is not set" in alone.skip_reason
    snap = machine(tmp_path / "old", {"TF_CONFIG": CLUSTER, "https_proxy": PROXY})
    old = replace(snap, collective=replace(snap.collective,
                                           network=replace(snap.collective.network, proxy_env=not_in_snapshot())))
    outcome = judge(old)
    assert outcome.status is CheckStatus.SKIPPED and "older mgpu-doctor" in outcome.skip_reason


def test_through_check_from_a_saved_snapshot(tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(machine(tmp_path, {"TF_CONFIG": CLUSTER, "http_proxy": PROXY}).to_json())
    main(["check", "--from", str(path), "--checks", "grpc-proxy", "--format", "json"])
    [check] = json.loads(capsys.readouterr().out)["checks"]
    assert [f["code"] for f in check["findings"]] == ["grpc.workers-through-proxy"]


def test_the_note_for_the_workers_names_the_variable_not_the_address():
    note = proxy_note({"https_proxy": PROXY}, ["127.0.0.1:0"])
    assert "https_proxy is set" in note and "127.0.0.1" in note and "proxy.corp" not in note
    assert proxy_note({"https_proxy": PROXY, "no_proxy": "127.0.0.1"}, ["127.0.0.1:0"]) == ""


def dead_proxy() -> str:
    """An http proxy address on which nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.slow
@pytest.mark.tensorflow
def test_workers_behind_a_proxy_that_never_answers_hang_and_the_finding_names_the_proxy(capsys, monkeypatch):
    monkeypatch.setenv("https_proxy", dead_proxy())
    for name in ("grpc_proxy", "no_grpc_proxy", "no_proxy", "TF_GRPC_DEFAULT_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    code = main(["smoke", "--workers", "2", "--layers", "dense", "--stall-timeout", "8", "--format", "json"])
    [check] = json.loads(capsys.readouterr().out)["checks"]
    assert code == 1 and check["status"] == "failed"
    hang = next(f for f in check["findings"] if f["code"] == "multiworker.dense.hang")
    assert hang["evidence"][0].startswith("https_proxy is set: gRPC may send") and "127.0.0.1" in hang["evidence"][0]
    assert hang["fix"].startswith("First take the proxy out of the workers' way")


def test_the_fix_names_every_proxy_variable_set(tmp_path):
    outcome = judge(machine(tmp_path, {"TF_CONFIG": CLUSTER, "https_proxy": PROXY, "http_proxy": PROXY}))
    assert "start the workers without https_proxy and http_proxy" in outcome.findings[0].fix


def test_the_fix_names_the_bypass_list_grpc_reads_not_one_that_already_lists_the_hosts(tmp_path):
    # Issue 40: with grpc_proxy and no_grpc_proxy set, gRPC (TensorFlow 2.2 on) reads no_grpc_proxy
    # and never no_proxy, so advising to add the hosts to no_proxy, which lists them, changes nothing.
    env = {"TF_CONFIG": CLUSTER, "grpc_proxy": PROXY, "no_grpc_proxy": "localhost",
           "no_proxy": "node-a,10.1.2.3,fd00::7"}
    [finding] = judge(machine(tmp_path, env)).findings
    assert finding.code == "grpc.workers-through-proxy"
    assert 'export no_grpc_proxy="$no_grpc_proxy,node-a,10.1.2.3,fd00::7"' in finding.fix
    assert "export no_proxy=" not in finding.fix
    assert "no_grpc_proxy is the list gRPC reads here: while it is set, no_proxy is not read" in finding.fix


def test_where_the_rule_sets_read_different_lists_the_fix_names_both(tmp_path):
    env = {"TF_CONFIG": CLUSTER, "https_proxy": PROXY, "no_grpc_proxy": "localhost"}
    [finding] = judge(machine(tmp_path, env, tensorflow="1.14.0")).findings  # both rule sets may apply
    assert "List the hosts in no_grpc_proxy and in no_proxy" in finding.fix
