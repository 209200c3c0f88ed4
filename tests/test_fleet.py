"""`mgpu-doctor fleet`: every compared fact both ways, the findings, renderers and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.fleet.checks import FLEET_CHECKS, fleet_report
from mgpu_doctor.fleet.compare import Fact, build_fleet
from mgpu_doctor.fleet.facts import COMPARED_FACTS
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.redact import host_hash
from mgpu_doctor.model.snapshot import Snapshot, load_snapshot
from mgpu_doctor.model.unavailable import failed
from mgpu_doctor.record import replace
from mgpu_doctor.renderers import OutputFormat, RenderOptions
from tests.scenarios import path_of
from tests.test_renderers import assert_golden

HEALTHY = load_snapshot(path_of("healthy-8gpu-nvlink"))
TF_CONFIG = '{"cluster": {"worker": ["n1:2222", "n2:2222"]}, "task": {"type": "worker", "index": %d}}'


def node(name: str, snap: Snapshot = HEALTHY) -> Snapshot:
    return replace(snap, host=replace(snap.host, hostname=name))


def fleet_of(*snaps: Snapshot):
    return build_fleet([(f"/snaps/{s.host.hostname}.json", s) for s in snaps], COMPARED_FACTS)


def report_of(*snaps: Snapshot):
    return fleet_report(fleet_of(*snaps), FLEET_CHECKS, tool_version="0.1.0")


def codes(report) -> dict[str, Severity]:
    return {f.code: f.severity for f in report.findings}


def nvml(**kw) -> Callable[[Snapshot], Snapshot]:
    return lambda s: replace(s, nvml=replace(s.nvml, **kw))


def gpus(**kw) -> Callable[[Snapshot], Snapshot]:
    return lambda s: replace(s, nvml=replace(s.nvml, gpus=[replace(g, **kw) for g in s.nvml.gpus]))


def tf(**kw) -> Callable[[Snapshot], Snapshot]:
    return lambda s: replace(s, tensorflow=replace(s.tensorflow, **kw))


def pkgs(**versions: str) -> Callable[[Snapshot], Snapshot]:
    def mutate(s: Snapshot) -> Snapshot:
        merged = {**s.packages.versions, **{k.replace("_", "-"): v for k, v in versions.items()}}
        return replace(s, packages=replace(s.packages, versions=merged))
    return mutate


def env(**values: str) -> Callable[[Snapshot], Snapshot]:
    return lambda s: replace(s, env={**s.env, **values})


def both(*mutations: Callable[[Snapshot], Snapshot]) -> Callable[[Snapshot], Snapshot]:
    def mutate(s: Snapshot) -> Snapshot:
        for m in mutations:
            s = m(s)
        return s
    return mutate


def lib_version(name: str, version: str) -> Callable[[Snapshot], Snapshot]:
    """Every copy of one CUDA library reads as another version (a node with other libraries)."""
    def mutate(s: Snapshot) -> Snapshot:
        copies = [replace(c, versions={k: version for k in c.versions}) if c.name == name else c
                  for c in s.libraries.copies]
        return replace(s, libraries=replace(s.libraries, copies=copies))
    return mutate


def fewer_gpus(s: Snapshot) -> Snapshot:
    s = replace(s, nvml=replace(s.nvml, gpus=s.nvml.gpus[:4], links=[]))
    return replace(s, tensorflow=replace(s.tensorflow, physical_devices=s.tensorflow.physical_devices[:5]))


def mig_on_gpu0(s: Snapshot) -> Snapshot:
    return replace(s, nvml=replace(s.nvml, gpus=[replace(s.nvml.gpus[0], mig_mode=True), *s.nvml.gpus[1:]]))


NCCL = {"nvidia_nccl_cu12": "2.21.5"}
LIB = "/opt/envs/train/lib/python3.11/site-packages/nvidia"

# (id, what the odd node gets, what the others get, the row(s) that differ, the findings expected)
CASES = [
    ("driver", nvml(driver_version="535.161.08"), None, "nvml.driver",
     # its libcuda (560) no longer matches the kernel driver: that node is sick on its own
     {"fleet.driver-differs": Severity.WARNING, "fleet.node-problems": Severity.ERROR}),
    ("cuda-driver", nvml(cuda_driver_version="12.2"), None, "nvml.cuda_driver", {}),
    ("tensorflow", both(tf(version="2.20.0"), pkgs(tensorflow="2.20.0")), None,
     ("tensorflow.version", "package.tensorflow"),
     {"fleet.tensorflow-differs": Severity.ERROR}),
    ("tf-keras-in-use", both(tf(keras_module="tf_keras", keras_version="2.21.0"), pkgs(tf_keras="2.21.0"),
                             env(TF_USE_LEGACY_KERAS="1")), None,
     ("tensorflow.keras", "package.tf-keras", "env.TF_USE_LEGACY_KERAS"),
     {"fleet.keras-differs": Severity.ERROR, "fleet.env-differs": Severity.WARNING}),
    # The Keras that tf.keras imports differs: not a mere package difference.
    ("keras-package", both(pkgs(keras="3.14.0"), tf(keras_version="3.14.0")), None,
     ("tensorflow.keras", "package.keras"), {"fleet.keras-differs": Severity.ERROR}),
    ("tf-keras-package", pkgs(tf_keras="2.21.0"), None, "package.tf-keras",
     {"fleet.keras-version-differs": Severity.WARNING}),
    ("nccl-wheel", pkgs(nvidia_nccl_cu12="2.23.4"), pkgs(**NCCL), "package.nvidia-nccl-cu12",
     # both NCCL wheels are older than tensorflow[and-cuda] 2.21 pins
     {"fleet.nccl-differs": Severity.ERROR, "fleet.node-problems": Severity.ERROR}),
    ("nccl-path", tf(loaded_libraries=["/usr/lib/x86_64-linux-gnu/libnccl.so.2"]),
     tf(loaded_libraries=[f"{LIB}/nccl/lib/libnccl.so.2"]), "library.libnccl",
     {"fleet.nccl-path-differs": Severity.WARNING}),
    ("nccl-in-use", lib_version("nccl", "2.26.2"), None, "cuda-lib.nccl",
     {"fleet.nccl-differs": Severity.ERROR}),
    ("cudnn-in-use", lib_version("cudnn", "9.1.0"), None, "cuda-lib.cudnn",  # older than TF's 9.3 build
     {"fleet.cuda-libraries-differ": Severity.WARNING, "fleet.node-problems": Severity.ERROR}),
    ("cudnn-wheel", pkgs(nvidia_cudnn_cu12="9.1.0.70"), pkgs(nvidia_cudnn_cu12="9.3.0.75"),
     "package.nvidia-cudnn-cu12",  # 9.1 is below the pin
     {"fleet.cuda-libraries-differ": Severity.WARNING, "fleet.node-problems": Severity.ERROR}),
    ("tf-cuda-build", tf(build_info={"cuda_version": "12.3", "cudnn_version": "8"}), None,
     ("tensorflow.cuda_build", "tensorflow.cudnn_build"),  # built for cuDNN 8, loads 9
     {"fleet.cuda-libraries-differ": Severity.WARNING, "fleet.node-problems": Severity.ERROR}),
    ("cudnn-path", tf(loaded_libraries=["/usr/local/cuda/lib64/libcudnn.so.9"]),
     tf(loaded_libraries=[f"{LIB}/cudnn/lib/libcudnn.so.9"]), "library.libcudnn",
     {"fleet.library-paths-differ": Severity.INFO}),
    ("python-minor", lambda s: replace(s, python=replace(s.python, version="3.10.14")), None,
     "python.version", {"fleet.python-differs": Severity.WARNING}),
    ("python-patch", lambda s: replace(s, python=replace(s.python, version="3.11.4")), None,
     "python.version", {}),
    ("gpu-model", gpus(name="NVIDIA A100-SXM4-40GB"), None, "gpu.models",
     {"fleet.gpu-models-differ": Severity.WARNING}),
    ("gpu-memory", gpus(memory_total_bytes=40 * 2**30), None, "gpu.memory",
     {"fleet.gpu-models-differ": Severity.WARNING}),
    ("compute-capability", gpus(compute_capability="9.0"), None, "gpu.compute_capability",  # TF 2.21 has only PTX for 9.0
     {"fleet.gpu-models-differ": Severity.WARNING, "fleet.node-problems": Severity.WARNING}),
    ("gpu-count", fewer_gpus, None, ("gpu.count", "tensorflow.gpus"), {"fleet.gpu-count-differs": Severity.ERROR}),
    ("mig", mig_on_gpu0, None, "gpu.mig",
     {"fleet.mig-on-some-nodes": Severity.ERROR, "fleet.node-problems": Severity.ERROR}),
    ("nccl-transport", env(NCCL_IB_DISABLE="1"), None, "env.NCCL_IB_DISABLE",
     {"fleet.nccl-transport-differs": Severity.ERROR}),
    ("nccl-other", env(NCCL_SOCKET_IFNAME="ens1"), env(NCCL_SOCKET_IFNAME="eth0"),
     "env.NCCL_SOCKET_IFNAME", {"fleet.nccl-env-differs": Severity.WARNING}),
    ("nccl-logging", env(NCCL_DEBUG="INFO"), None, "env.NCCL_DEBUG", {}),
    ("cuda-visible-devices", env(CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"), None, "env.CUDA_VISIBLE_DEVICES",
     {"fleet.env-differs": Severity.WARNING}),
    ("xla-flags", env(XLA_FLAGS="--xla_gpu_autotune_level=0"), None, "env.XLA_FLAGS",
     {"fleet.env-differs": Severity.WARNING}),
    ("tf-env", env(TF_GPU_ALLOCATOR="cuda_malloc_async"), None, "env.TF_GPU_ALLOCATOR",
     {"fleet.env-differs": Severity.WARNING}),
    ("tf-config-cluster",
     env(TF_CONFIG='{"cluster": {"worker": ["n1:2222", "n3:2222"]}, "task": {"type": "worker", "index": 1}}'),
     None, "tf_config.cluster", {"fleet.tf-config-cluster-differs": Severity.ERROR}),
    ("kernel", lambda s: replace(s, host=replace(s.host, kernel="6.8.0-45-generic")), None,
     "host.kernel", {}),
]


@pytest.mark.parametrize("name,odd,others,key,expected", CASES, ids=[c[0] for c in CASES])
def test_each_compared_fact_differs(name, odd, others, key, expected):
    base = others(HEALTHY) if others else HEALTHY
    report = report_of(node("gpu-node-01", base), node("gpu-node-02", base), node("gpu-node-03", odd(base)))
    keys = [key] if isinstance(key, str) else list(key)
    for k in keys:
        row = report.fleet.row(k)
        assert row is not None and row.status == "differs", row
    assert [r.key for r in report.fleet.differences] == keys
    # A node's own findings (fleet.node-problems) follow the matrix: a TF_CONFIG with two workers
    # makes the healthy node's NCCL 2.27.7 a known multi-node crash. This test is about the fact.
    assert {c: s for c, s in codes(report).items() if c != "fleet.node-problems" or c in expected} == expected
    for finding in report.findings:
        assert finding.fix and finding.evidence


@pytest.mark.parametrize("name,odd,others,key,expected", CASES, ids=[c[0] for c in CASES])
def test_each_compared_fact_alike_is_no_difference(name, odd, others, key, expected):
    # The same change on every node: nothing differs (what remains is each node's own business).
    changed = odd(others(HEALTHY) if others else HEALTHY)
    report = report_of(node("gpu-node-01", changed), node("gpu-node-02", changed))
    assert report.fleet.differences == []
    # Two nodes with the very same TF_CONFIG also claim the same task: rightly an error.
    allowed = {"fleet.node-problems"} | ({"fleet.tf-config-task-duplicate"} if name == "tf-config-cluster" else set())
    assert set(codes(report)) <= allowed


def test_redacted_snapshots_of_one_tf_config_cluster_agree():
    """Redaction hashes only the node's own name, so each node writes the cluster differently;
    fleet compares the host names as redaction writes them (a real Slurm run showed the error)."""
    from mgpu_doctor.model.redact import host_hash

    cluster = ["node1:23456", "node2:23456"]

    def written_by(me: int):
        own = [host_hash(a.split(":")[0]) + ":23456" if i == me else a for i, a in enumerate(cluster)]
        return env(TF_CONFIG=json.dumps({"cluster": {"worker": own}, "task": {"type": "worker", "index": me}}))

    report = report_of(node("host-a", written_by(0)(HEALTHY)), node("host-b", written_by(1)(HEALTHY)))
    assert report.fleet.row("tf_config.cluster").status != "differs"
    assert "fleet.tf-config-cluster-differs" not in codes(report)
    # a cluster that really differs still does
    other = env(TF_CONFIG='{"cluster": {"worker": ["node1:23456", "node3:23456"]}, "task": {"type": "worker", "index": 1}}')
    report = report_of(node("host-a", written_by(0)(HEALTHY)), node("host-b", other(HEALTHY)))
    assert "fleet.tf-config-cluster-differs" in codes(report)


def test_a_tf_keras_tie_is_resolved_by_tensorflows_minor_not_by_sort_order():
    # one node each on tf-keras 2.20.1 and 2.21.0 with TensorFlow 2.21 on both (the Slurm run)
    report = report_of(node("n1", pkgs(tf_keras="2.20.1")(HEALTHY)), node("n2", pkgs(tf_keras="2.21.0")(HEALTHY)))
    finding = next(f for f in report.findings if f.code == "fleet.keras-version-differs")
    assert "pip install 'tf-keras~=2.21.0'" in finding.fix


def test_identical_snapshots_give_no_finding():
    report = report_of(node("gpu-node-01"), node("gpu-node-02"), node("gpu-node-03"))
    assert report.findings == [] and report.fleet.differences == []
    assert report.fleet.node_names == ["gpu-node-01", "gpu-node-02", "gpu-node-03"]


def test_identical_sick_nodes_still_report_their_own_problems(scenario):
    sick = scenario("sick-box")
    report = report_of(node("a", sick), node("b", sick))
    assert report.fleet.differences == []
    assert [(f.code, f.severity) for f in report.findings] == [("fleet.node-problems", Severity.ERROR)] * 2


def test_fact_unknown_on_one_node_is_shown_as_unknown_not_as_a_value():
    broken = replace(HEALTHY, tensorflow=failed("ImportError: libcudnn.so.9: cannot open shared object file",
                                                cause="exception:ImportError"))
    report = report_of(node("gpu-node-01"), node("gpu-node-02"), node("gpu-node-03", broken))
    # The installed TensorFlow is the same everywhere: the version compares; what only an import
    # shows (the GPUs it sees) is unknown on the broken node.
    assert report.fleet.row("tensorflow.version").status == "same"
    row = report.fleet.row("tensorflow.gpus")
    assert row.status == "incomplete" and row.majority() == "8"
    assert codes(report)["fleet.facts-missing"] is Severity.WARNING
    assert "fleet.tensorflow-differs" not in codes(report)
    text = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=False))
    assert "unknown (failed: ImportError: libcudnn.so.9" in text
    missing = next(f for f in report.findings if f.code == "fleet.facts-missing")
    assert missing.evidence[0].startswith("gpu-node-03: GPUs TensorFlow sees")


def test_fact_unknown_everywhere_skips_the_check_with_the_reason():
    quick = replace(HEALTHY, nvml=failed("NVML timed out", cause="timeout"))
    report = report_of(node("a", quick), node("b", quick))
    outcome = next(c for c in report.checks if c.name == "fleet-driver")
    assert outcome.status.value == "skipped" and "NVML timed out" in outcome.skip_reason


def test_per_node_variables_are_not_compared_but_duplicate_tasks_are():
    a = node("gpu-node-01", env(SLURM_PROCID="0", TF_CONFIG=TF_CONFIG % 0)(HEALTHY))
    b = node("gpu-node-02", env(SLURM_PROCID="1", TF_CONFIG=TF_CONFIG % 1)(HEALTHY))
    # Each node's own findings (fleet.node-problems: with two workers the healthy node's NCCL
    # 2.27.7 is a known multi-node crash) are not what this test compares.
    assert [f for f in report_of(a, b).findings if f.code != "fleet.node-problems"] == []
    c = node("gpu-node-03", env(SLURM_PROCID="2", TF_CONFIG=TF_CONFIG % 1)(HEALTHY))
    found = [f for f in report_of(a, b, c).findings if f.code != "fleet.node-problems"]
    assert {f.code: f.severity for f in found} == {"fleet.tf-config-task-duplicate": Severity.ERROR}
    assert "task worker:1: gpu-node-02, gpu-node-03" in found[0].evidence


def test_nodes_named_by_host_then_file():
    fleet = build_fleet([("/x/a.json", node("n1")), ("/y/b.json", node("n1")), ("/z/c.json", node(""))],
                        COMPARED_FACTS)
    assert fleet.node_names == ["n1 (a.json)", "n1 (b.json)", "c.json"]
    report = fleet_report(fleet, FLEET_CHECKS, tool_version="0.1.0")
    assert codes(report) == {"fleet.duplicate-node": Severity.WARNING}


def test_a_broken_extractor_is_an_unknown_value_not_a_crash():
    facts = (Fact("boom", "Boom", lambda e: e.snapshot.host.hostname[10]),)
    fleet = build_fleet([("a", node("short")), ("b", node("a-much-longer-name"))], facts)
    row = fleet.row("boom")
    assert row.status == "incomplete" and row.values["a-much-longer-name"] == "g"
    assert "IndexError" in row.values["short"].detail


def test_every_fact_key_is_unique():
    keys = [f.key for f in COMPARED_FACTS]
    assert len(keys) == len(set(keys))


# The goldens render these fleet checks: adding a fleet check leaves them alone.
GOLDEN_FLEET_CHECKS = (
    "fleet-nodes", "fleet-tensorflow", "fleet-nccl", "fleet-cuda-libraries", "fleet-driver", "fleet-gpus",
    "fleet-mig", "fleet-environment", "fleet-python", "fleet-host-setup", "fleet-nccl-tuning",
    "fleet-comparable", "fleet-each-node",
)


def odd_fleet_report():
    eth = env(NCCL_SOCKET_IFNAME="eth0")
    fleet = fleet_of(node("gpu-node-01", eth(HEALTHY)), node("gpu-node-02", eth(HEALTHY)),
                     node("gpu-node-03", both(nvml(driver_version="535.161.08"), env(NCCL_IB_DISABLE="1"),
                                              env(NCCL_SOCKET_IFNAME="ens1f0"))(HEALTHY)))
    checks = tuple(c for c in FLEET_CHECKS if c.name in GOLDEN_FLEET_CHECKS)
    assert len(checks) == len(GOLDEN_FLEET_CHECKS)
    return fleet_report(fleet, checks, tool_version="0.1.0")


def test_human_output_exact():
    assert_golden("fleet.ascii.txt", OutputFormat.HUMAN.renderer()(odd_fleet_report(), RenderOptions(unicode=False)))


def test_markdown_output_exact():
    assert_golden("fleet.md", OutputFormat.MARKDOWN.renderer()(odd_fleet_report(), RenderOptions()))


@pytest.mark.parametrize("fmt", list(OutputFormat))
def test_every_format_renders_a_fleet(fmt):
    text = fmt.renderer()(odd_fleet_report(), RenderOptions(verbose=True))
    assert "gpu-node-03" in text


# --- CLI ---------------------------------------------------------------------------------


def write(tmp_path, *snaps: Snapshot) -> list[str]:
    paths = []
    for s in snaps:
        path = tmp_path / f"snap-{s.host.hostname}.json"
        path.write_text(s.to_json())
        paths.append(str(path))
    return paths


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_identical_nodes_exit_0(capsys, tmp_path):
    code, out, _ = run(capsys, "fleet", *write(tmp_path, node("n1"), node("n2")))
    assert code == 0 and "All 2 nodes agree on the" in out


def test_cli_exit_codes_follow_the_worst_finding(capsys, tmp_path):
    odd = node("n3", gpus(name="NVIDIA A100-SXM4-40GB")(HEALTHY))
    files = write(tmp_path, node("n1"), node("n2"), odd)
    assert run(capsys, "fleet", *files)[0] == 0  # a warning only
    assert run(capsys, "fleet", "--fail-on", "warning", *files)[0] == 1
    odd = node("n3", env(NCCL_IB_DISABLE="1")(HEALTHY))
    assert run(capsys, "fleet", *write(tmp_path, node("n1"), odd))[0] == 1


def test_cli_json_and_junit(capsys, tmp_path):
    odd = node("n2", both(tf(version="2.20.0"), pkgs(tensorflow="2.20.0"))(HEALTHY))
    junit = tmp_path / "fleet.xml"
    code, out, _ = run(capsys, "fleet", "--format", "json", "--junit", str(junit),
                       *write(tmp_path, node("n1"), odd))
    data = json.loads(out)
    assert code == 1 and data["command"] == "fleet" and data["snapshot"] is None
    assert data["summary"]["worst"] == "error"
    n1, n2 = host_hash("n1"), host_hash("n2")  # redacted as `check --from` does
    assert [n["name"] for n in data["fleet"]["nodes"]] == [n1, n2]
    diff = {d["key"]: d for d in data["differences"]}
    assert diff["tensorflow.version"]["values"] == {n1: "2.21.0", n2: "2.20.0"}
    suite = ET.parse(junit).getroot()
    failure = suite.find("testcase[@name='fleet-tensorflow']/failure")
    assert failure is not None and failure.get("type") == "fleet.tensorflow-differs"


def test_cli_needs_two_snapshots(capsys, tmp_path):
    code, _, err = run(capsys, "fleet", *write(tmp_path, node("n1")))
    assert code == 2 and "at least 2 snapshots" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("content,message", [
    (None, "no such file"),
    ("{not json", "not valid JSON"),
    ('{"kind": "mgpu-doctor-snapshot", "schema_version": 1, "host": {}}', "field snapshot."),
])
def test_cli_bad_snapshot_names_the_file(capsys, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    code, out, err = run(capsys, "fleet", *write(tmp_path, node("n1")), str(bad))
    assert code == 2 and out == ""
    assert err.startswith(f"mgpu-doctor: error: {bad}: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_real_process(tmp_path):
    files = write(tmp_path, node("n1"), node("n2", env(NCCL_IB_DISABLE="1")(HEALTHY)))
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "fleet", *files],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "[x] Same NCCL / TensorFlow settings and TF_CONFIG cluster" in done.stdout
    assert done.stderr == ""


def test_fleet_redacts_every_snapshot_as_check_from_does(capsys, tmp_path):
    """Host names, user names and home paths of the nodes: hashed and replaced as `check --from`
    does with the same file (the same hash), unless --no-redact."""
    lib = env(LD_LIBRARY_PATH="/home/alice/cuda/lib64:/usr/lib", KERAS_HOME="/home/alice/.keras")
    files = []
    for i, name in enumerate(("gpu-node-71", "gpu-node-72")):
        files.append(str(tmp_path / f"node{i}.json"))
        Path(files[-1]).write_text(node(name, lib(HEALTHY)).to_json())
    outputs = {}
    for fmt in ("human", "json", "markdown", "html", "junit"):
        code, out, _ = run(capsys, "fleet", "--format", fmt, "-v", *files)
        outputs[fmt] = out
    _, checked, _ = run(capsys, "check", "--from", files[0], "--format", "json")
    for fmt, out in outputs.items():
        assert "gpu-node-7" not in out and "alice" not in out, fmt
    assert host_hash("gpu-node-71") in outputs["json"] and host_hash("gpu-node-71") in checked
    _, kept, _ = run(capsys, "fleet", "--format", "json", "--no-redact", *files)
    assert "gpu-node-71" in kept
