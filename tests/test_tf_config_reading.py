"""TF_CONFIG is read once, leniently (environment/tf_config.py): the proxy check, the resolver's
``workers``, `fleet` and the launcher's strict validation all start from that reading."""

from __future__ import annotations

import json

import pytest

from mgpu_doctor.checks.base import CheckSkipped
from mgpu_doctor.checks.grpc_proxy import _cluster_hosts
from mgpu_doctor.environment.machine import machine_facts
from mgpu_doctor.environment.tf_config import read_tf_config
from mgpu_doctor.fleet.facts import tf_config_of
from mgpu_doctor.multiworker.tf_config import TfConfigError, parse_tf_config
from mgpu_doctor.record import replace
from tests.scenarios import healthy_8gpu_nvlink

CLUSTER = {"chief": ["node0:2222"], "worker": ["node1:2222", "[fd00::2]:2222"], "ps": ["node3:2222"]}
TEXTS = {
    "good": json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}),
    "not-json": '{"cluster": ',
    "not-object": "[1, 2]",
    "null": "null",
    "too-deep": "[" * 300 + "]" * 300,
    "no-cluster": json.dumps({"task": {"type": "worker", "index": 0}}),
    "cluster-not-object": json.dumps({"cluster": ["a:1"]}),
    "odd-members": json.dumps({"cluster": {"worker": ["a:1", 7, None], "chief": "b:2"}}),
}


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_reader_agrees_with_the_one_reading(name):
    text = TEXTS[name]
    reading = read_tf_config(text)
    snap = replace(healthy_8gpu_nvlink(), env={"TF_CONFIG": text})
    assert machine_facts(snap).workers == reading.workers
    try:
        assert _cluster_hosts(text) == reading.hosts()
    except CheckSkipped:
        assert not reading.hosts()
    fleet_view = tf_config_of(snap)
    assert fleet_view == (reading.data if reading.state == "ok" else reading.problem)
    try:
        config = parse_tf_config(text)
    except TfConfigError:
        return
    assert [a for members in config.cluster.values() for a in members] == reading.addresses()
    assert config.num_workers == reading.workers


def test_the_reading_says_why_a_text_cannot_be_read():
    assert read_tf_config(None).state == "unset"
    bad = read_tf_config(TEXTS["not-json"])
    assert (bad.state, bad.line, bad.column) == ("not-json", 1, 13) and bad.problem.startswith("not valid JSON (")
    assert read_tf_config(TEXTS["not-object"]).problem == "not a JSON object"
    deep = read_tf_config(TEXTS["too-deep"], "--tf-config")
    assert deep.state == "over-limit" and not deep.error.startswith("--tf-config")
    good = read_tf_config(TEXTS["good"])
    assert good.hosts() == ["node0", "node1", "fd00::2", "node3"]
    assert good.workers == 3  # chief and workers train; a parameter server does not


def test_the_strict_reader_keeps_its_messages():
    with pytest.raises(TfConfigError, match=r"^--tf-config is not valid JSON \(line 1, column 13: "):
        parse_tf_config(TEXTS["not-json"], "--tf-config")
    with pytest.raises(TfConfigError, match=r"^--tf-config: JSON nested"):
        parse_tf_config(TEXTS["too-deep"], "--tf-config")
    with pytest.raises(TfConfigError, match="must be a JSON object with 'cluster' and 'task'"):
        parse_tf_config(TEXTS["null"])
