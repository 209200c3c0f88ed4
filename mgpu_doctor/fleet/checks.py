"""Rules over a whole fleet: the differences between nodes that break or slow synchronous
training. Each is a pure ``run(fleet) -> findings``, registered in :data:`FLEET_CHECKS`."""

from __future__ import annotations

from collections import Counter

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.checks.base import Check, CheckSkipped, run_check
from mgpu_doctor.checks.facts_access import gib
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.fleet.collective import MUST_MATCH, check_fleet_host_setup, check_fleet_nccl_tuning
from mgpu_doctor.fleet.compare import FactRow, Fleet, describe, list_nodes, row_evidence
from mgpu_doctor.fleet.facts import tf_config_of
from mgpu_doctor.model.findings import Finding, Severity
from mgpu_doctor.model.report import Report, new_report
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.model.versions import minor_text, parse_version

MWMS_DOC = "https://www.tensorflow.org/api_docs/python/tf/distribute/MultiWorkerMirroredStrategy"
NCCL_INIT_SOURCE = "https://github.com/NVIDIA/nccl/blob/master/src/init.cc"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
# NCCL variables that choose the network transport: ranks that choose differently cannot
# connect to each other.
NCCL_TRANSPORT_VARS = frozenset({"NCCL_IB_DISABLE", "NCCL_NET"})
# NCCL variables that only change its logging: shown in the table, no finding.
NCCL_LOGGING_VARS = frozenset({"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"})
# Other environment variables that change what TensorFlow or CUDA do on a node.
TRAINING_ENV_PREFIXES = ("TF_", "XLA_", "KERAS_", "CUDA_", "LD_")


def _differing(fleet: Fleet, key: str) -> FactRow | None:
    row = fleet.row(key)
    return row if row is not None and row.status == "differs" else None


def _odd_ones(row: FactRow) -> tuple[str, list[str]]:
    """The majority value and the nodes that have another (known) value."""
    majority = row.majority()
    assert majority is not None
    return majority, row.nodes_not_on(majority)


def _known_somewhere(fleet: Fleet, *keys: str) -> None:
    rows = [r for r in (fleet.row(k) for k in keys) if r is not None]
    if not rows or all(r.status == "unavailable" for r in rows):
        first = next((v for r in rows for v in r.values.values() if isinstance(v, Unavailable)), None)
        why = f": {describe(first)}" if first is not None else ""
        raise CheckSkipped(f"{' / '.join(keys)} unknown on every node{why}")


def check_duplicate_nodes(fleet: Fleet) -> list[Finding]:
    hosts = Counter(n.snapshot.host.hostname for n in fleet.nodes)
    twice = [h for h, count in hosts.items() if count > 1 and h]
    if not twice:
        return []
    return [Finding(
        "fleet.duplicate-node", Severity.WARNING,
        f"{len(twice)} node(s) have more than one snapshot: the comparison counts them twice",
        [f"{h}: " + ", ".join(n.source for n in fleet.nodes if n.snapshot.host.hostname == h)
         for h in twice],
        fix="Collect exactly one snapshot per node (srun --ntasks-per-node=1, or one pod per "
        "node) and pass each node's file once.",
    )]


def check_tensorflow(fleet: Fleet) -> list[Finding]:
    _known_somewhere(fleet, "tensorflow.version", "package.tensorflow")
    findings = []
    version = _differing(fleet, "tensorflow.version") or _differing(fleet, "package.tensorflow")
    if version is not None:
        wanted, odd = _odd_ones(version)
        findings.append(Finding(
            "fleet.tensorflow-differs", Severity.ERROR,
            "The nodes run different TensorFlow versions: the workers of one job build different "
            "graphs and collectives, and fail or hang together",
            row_evidence(version),
            fix=f"Install the same TensorFlow everywhere, e.g. pip install tensorflow=={wanted} on "
            f"{list_nodes(odd)}; better, run every worker from one container image or one shared "
            "environment.",
            links=[MWMS_DOC],
        ))
    keras = _differing(fleet, "tensorflow.keras")
    if keras is not None:
        findings.append(Finding(
            "fleet.keras-differs", Severity.ERROR,
            "tf.keras is not the same Keras on every node (Keras 3 on some, tf-keras on others, "
            "or other versions): the workers do not run the same program",
            row_evidence(keras),
            fix="Set TF_USE_LEGACY_KERAS the same way for every worker (in the job script, not in "
            "a shell profile) and install the same keras / tf-keras versions on every node.",
        ))
    elif (packages := [r for r in (_differing(fleet, "package.keras"), _differing(fleet, "package.tf-keras"))
                       if r is not None]):
        findings.append(Finding(
            "fleet.keras-version-differs", Severity.WARNING,
            "The nodes have different Keras / tf-keras versions installed",
            [line for r in packages for line in row_evidence(r)],
            fix="Install the same versions everywhere: "
            + " ".join(f"pip install {_keras_pin(fleet, r)}" for r in packages) + ".",
        ))
    return findings


def _keras_pin(fleet: Fleet, row: FactRow) -> str:
    """What to install on every node: tf-keras of TensorFlow's minor (they are released in lockstep)
    when every node runs one TensorFlow, else the most common version."""
    name = row.key.split(".", 1)[1]
    tf = fleet.row("tensorflow.version")
    version = parse_version(tf.majority() or "") if tf is not None and tf.status != "differs" else None
    if name == "tf-keras" and version is not None:
        return f"'tf-keras~={version.major}.{version.minor}.0'"
    return f"{name}=={row.majority()}"


def check_nccl(fleet: Fleet) -> list[Finding]:
    rows = (fleet.rows_under("package.nvidia-nccl") + fleet.rows_under("cuda-lib.nccl")
            + fleet.rows_under("library.libnccl"))
    if not rows:
        raise CheckSkipped("no node reports an NCCL wheel (nvidia-nccl-*) or a loaded libnccl")
    findings = []
    for row in rows:
        if row.status != "differs":
            continue
        is_path = row.key.startswith("library.")
        is_wheel = not is_path
        wanted, odd = _odd_ones(row)
        install = (f"pip install {row.key.split('.', 1)[1]}=={wanted}" if row.key.startswith("package.")
                   else f"install NCCL {wanted}")
        findings.append(Finding(
            "fleet.nccl-differs" if is_wheel else "fleet.nccl-path-differs",
            Severity.ERROR if is_wheel else Severity.WARNING,
            "The nodes have different NCCL versions: NCCL refuses to build a communicator across "
            "versions ('Mismatched NCCL version detected'), so the first all-reduce fails"
            if is_wheel else
            "TensorFlow loads NCCL from different places on different nodes: possibly different "
            "NCCL versions",
            row_evidence(row),
            fix=f"{install} on {list_nodes(odd)} (the same "
            "NCCL on every node)" if is_wheel else
            "Make every node load the same NCCL: the same environment, and no LD_LIBRARY_PATH "
            "entry that puts another libnccl first on some nodes.",
            links=[NCCL_INIT_SOURCE] if is_wheel else [],
        ))
    return findings


def check_cuda_libraries(fleet: Fleet) -> list[Finding]:
    wheels = [r for r in fleet.rows_under("package.nvidia-")
              if not r.key.startswith("package.nvidia-nccl") and r.key != "package.nvidia-ml-py"]
    libraries = [r for r in fleet.rows_under("library.") if not r.key.startswith("library.libnccl")]
    in_use = [r for r in fleet.rows_under("cuda-lib.") if r.key != "cuda-lib.nccl"]
    builds = [r for r in (fleet.row("tensorflow.cuda_build"), fleet.row("tensorflow.cudnn_build"))
              if r is not None]
    if not wheels and not libraries and not in_use and all(r.status == "unavailable" for r in builds):
        raise CheckSkipped("no node reports CUDA wheels, loaded CUDA libraries or a TensorFlow build")
    findings = []
    differing = [r for r in wheels + in_use + builds if r.status == "differs"]
    if differing:
        findings.append(Finding(
            "fleet.cuda-libraries-differ", Severity.WARNING,
            "The nodes use different CUDA / cuDNN versions: kernels, numerics and speed differ "
            "between workers, and a node may fail where the others work",
            [line for r in differing for line in row_evidence(r)],
            fix="Install the same versions everywhere: "
            + "; ".join(f"pip install {r.key.split('.', 1)[1]}=={r.majority()}"
                        for r in differing if r.key.startswith("package."))
            + (" (one container image or environment for every node avoids this)"),
        ))
    paths = [r for r in libraries if r.status == "differs"]
    if paths:
        findings.append(Finding(
            "fleet.library-paths-differ", Severity.INFO,
            "TensorFlow loads CUDA libraries from different paths on different nodes",
            [line for r in paths for line in row_evidence(r)],
            fix="Fine when the environments are copies at other paths; otherwise check "
            "LD_LIBRARY_PATH and the environment each worker is started with.",
        ))
    return findings


def check_driver(fleet: Fleet) -> list[Finding]:
    _known_somewhere(fleet, "nvml.driver")
    row = _differing(fleet, "nvml.driver")
    if row is None:
        return []
    wanted, odd = _odd_ones(row)
    cuda = fleet.row("nvml.cuda_driver")
    return [Finding(
        "fleet.driver-differs", Severity.WARNING,
        "The nodes run different NVIDIA drivers: an older driver may not support the CUDA "
        "version the others use, and a driver bug then hits only some workers",
        row_evidence(row) + (row_evidence(cuda) if cuda is not None and cuda.status == "differs" else []),
        fix=f"Install driver {wanted} on {list_nodes(odd)} (or drain those nodes until they are "
        "updated).",
    )]


def check_gpus(fleet: Fleet) -> list[Finding]:
    _known_somewhere(fleet, "gpu.count", "tensorflow.gpus")
    findings = []
    count = _differing(fleet, "tensorflow.gpus")
    counted_by = "TensorFlow"
    if count is None and (tf := fleet.row("tensorflow.gpus")) is not None and tf.status == "unavailable":
        count, counted_by = _differing(fleet, "gpu.count"), "NVML (TensorFlow's view unknown)"
    if count is not None:
        findings.append(Finding(
            "fleet.gpu-count-differs", Severity.ERROR,
            f"The workers have different numbers of GPUs (counted by {counted_by}): "
            "MultiWorkerMirroredStrategy needs the same number of devices on every worker",
            row_evidence(count),
            fix="Give every worker the same GPUs: request them per node (sbatch --gpus-per-node=N, "
            "Kubernetes resources.limits nvidia.com/gpu: N) and check CUDA_VISIBLE_DEVICES; a "
            "worker whose TensorFlow sees 0 GPUs cannot load CUDA (run `mgpu-doctor check` there).",
            links=[MWMS_DOC],
        ))
    mixed = [r for r in (_differing(fleet, k) for k in ("gpu.models", "gpu.memory", "gpu.compute_capability"))
             if r is not None]
    if mixed:
        findings.append(Finding(
            "fleet.gpu-models-differ", Severity.WARNING,
            "The nodes have different GPUs: synchronous training runs every step at the pace of "
            "the slowest GPU, and the per-replica batch must fit the smallest memory",
            [line for r in mixed for line in row_evidence(r)],
            fix="Schedule the job on identical nodes (a Slurm partition or --constraint, a "
            "Kubernetes nodeSelector on nvidia.com/gpu.product); otherwise size the batch for "
            + _smallest_gpu(fleet) + ".",
        ))
    return findings


def _smallest_gpu(fleet: Fleet) -> str:
    sizes = [(g.memory_total_bytes, node.name) for node in fleet.nodes
             if not isinstance(nvml := node.snapshot.nvml, Unavailable) for g in nvml.gpus]
    if not sizes:
        return "the smallest GPU"
    size, node = min(sizes)
    return f"the smallest GPU memory ({gib(size)} on {node})"


def check_mig(fleet: Fleet) -> list[Finding]:
    _known_somewhere(fleet, "gpu.mig")
    row = _differing(fleet, "gpu.mig")
    if row is None:
        return []
    on = [n for n, v in row.values.items() if isinstance(v, str) and v.startswith("on")]
    if not on:
        return []
    return [Finding(
        "fleet.mig-on-some-nodes", Severity.ERROR,
        f"MIG is enabled on {len(on)} node(s) but not on the others: a process there sees one MIG "
        "slice, not the GPUs the other workers have",
        row_evidence(row),
        fix=f"Disable MIG on {list_nodes(on)} (sudo nvidia-smi -i N -mig 0, then reset the GPU), or "
        "keep MIG nodes out of this job.",
    )]


def check_environment(fleet: Fleet) -> list[Finding]:
    findings = []
    rows = [r for r in fleet.rows_under("env.") if r.status == "differs"]
    transport = [r for r in rows if r.key[4:] in NCCL_TRANSPORT_VARS]
    nccl = [r for r in rows if r.key.startswith("env.NCCL_") and r not in transport
            and r.key[4:] not in NCCL_LOGGING_VARS and r.key[4:] not in MUST_MATCH]
    training = [r for r in rows if r.key[4:].startswith(TRAINING_ENV_PREFIXES)]
    if transport:
        findings.append(Finding(
            "fleet.nccl-transport-differs", Severity.ERROR,
            "NCCL is told to use different network transports on different nodes: ranks that pick "
            "different transports cannot connect, and the job fails or hangs at the first all-reduce",
            [line for r in transport for line in row_evidence(r)],
            fix="Set " + ", ".join(r.key[4:] for r in transport) + " to the same value for every "
            "worker in the job script (export in the sbatch script, env: in the pod spec), not in "
            "shell profiles of single nodes.",
            links=[NCCL_ENV_DOC],
        ))
    if nccl:
        findings.append(Finding(
            "fleet.nccl-env-differs", Severity.WARNING,
            "NCCL settings differ between nodes: NCCL may pick other algorithms, protocols or "
            "interfaces on some workers, which can hang or slow the whole job",
            [line for r in nccl for line in row_evidence(r)],
            fix="Set the NCCL_* variables once for the whole job (sbatch --export or the pod "
            "spec's env:) and remove them from node-local profiles. A value that must differ "
            "(NCCL_SOCKET_IFNAME where interface names differ) is fine when each names an "
            "interface of the same network.",
            links=[NCCL_ENV_DOC],
        ))
    if training:
        findings.append(Finding(
            "fleet.env-differs", Severity.WARNING,
            "TensorFlow / CUDA settings differ between nodes: the workers do not run the same way",
            [line for r in training for line in row_evidence(r)],
            fix="Set " + ", ".join(r.key[4:] for r in training) + " identically for every "
            "worker in the job script or pod spec.",
        ))
    findings += _tf_config_findings(fleet)
    return findings


def _tf_config_findings(fleet: Fleet) -> list[Finding]:
    findings = []
    cluster = _differing(fleet, "tf_config.cluster")
    if cluster is not None:
        findings.append(Finding(
            "fleet.tf-config-cluster-differs", Severity.ERROR,
            "The workers' TF_CONFIG describe different clusters: each waits for workers the others "
            "do not know, and the job hangs at start-up",
            row_evidence(cluster),
            fix="Generate TF_CONFIG from one list of addresses for all workers (the same 'cluster' "
            "everywhere), each with its own 'task'.",
            links=[MWMS_DOC],
        ))
    tasks: dict[str, list[str]] = {}
    for node in fleet.nodes:
        config = tf_config_of(node.snapshot)
        if isinstance(config, dict) and isinstance(task := config.get("task"), dict):
            tasks.setdefault(f"{task.get('type')}:{task.get('index')}", []).append(node.name)
    twice = {t: names for t, names in tasks.items() if len(names) > 1}
    if twice:
        findings.append(Finding(
            "fleet.tf-config-task-duplicate", Severity.ERROR,
            "Several nodes claim the same TF_CONFIG task: one worker is missing and two fight for "
            "one slot, so the job hangs or fails at start-up",
            [f"task {t}: {list_nodes(names)}" for t, names in twice.items()],
            fix="Give each worker its own task index (e.g. from $SLURM_PROCID or the pod's "
            "completion index).",
        ))
    return findings


def check_python(fleet: Fleet) -> list[Finding]:
    _known_somewhere(fleet, "python.version")
    row = _differing(fleet, "python.version")
    if row is None:
        return []
    minors = {minor_text(v) for v in row.values.values() if isinstance(v, str)}
    if len(minors) < 2:
        return []  # only the patch level differs: the same wheels install everywhere
    wanted, odd = _odd_ones(row)
    return [Finding(
        "fleet.python-differs", Severity.WARNING,
        "The nodes run different Python versions: each installs other wheels, so library "
        "versions drift apart",
        row_evidence(row),
        fix=f"Use Python {minor_text(wanted)} on {list_nodes(odd)} too (one container image or one "
        "shared environment for every worker).",
    )]



def check_comparable(fleet: Fleet) -> list[Finding]:
    unknown: dict[str, dict[str, list[str]]] = {}
    for row in fleet.rows:
        if row.status not in ("differs", "incomplete"):
            continue
        for node, value in row.values.items():
            if isinstance(value, Unavailable):
                unknown.setdefault(node, {}).setdefault(describe(value), []).append(row.label)
    if not unknown:
        return []
    sources = {n.name: n.source for n in fleet.nodes}
    evidence = []
    for node, reasons in unknown.items():
        for reason, labels in reasons.items():
            shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
            evidence.append(f"{node}: {shown}: {reason}")
    return [Finding(
        "fleet.facts-missing", Severity.WARNING,
        f"Some facts known on other nodes are unknown on {len(unknown)} node(s): those nodes "
        "could not be compared there",
        evidence,
        fix="See why with `mgpu-doctor check --from FILE` on "
        + ", ".join(sources[n] for n in unknown)
        + "; collect the snapshots again the same way on every node (without --quick).",
    )]


def check_each_node(fleet: Fleet) -> list[Finding]:
    findings = []
    for node in fleet.nodes:
        env = resolve(node.snapshot)
        own = [f for c in CHECKS for f in run_check(c, env).findings
               if f.severity >= Severity.WARNING]
        if not own:
            continue
        counts = Counter(f.severity.value for f in own)
        worst = max(f.severity for f in own)
        findings.append(Finding(
            "fleet.node-problems", Severity.ERROR if worst >= Severity.ERROR else Severity.WARNING,
            f"{node.name} has problems of its own: "
            + ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items())),
            [f"[{f.severity.value}] {f.title}" for f in sorted(own, key=lambda f: f.severity, reverse=True)],
            fix=f"mgpu-doctor check --from {node.source} shows each problem with its fix.",
        ))
    return findings


# name, title, the check, the finding codes it can emit (fleet reports have no sections).
FLEET_CHECKS: tuple[Check[Fleet], ...] = (
    Check("fleet-nodes", "One snapshot per node", check_duplicate_nodes, codes=("fleet.duplicate-node",)),
    Check("fleet-tensorflow", "Same TensorFlow and Keras on every node", check_tensorflow,
          codes=("fleet.tensorflow-differs", "fleet.keras-differs", "fleet.keras-version-differs")),
    Check("fleet-nccl", "Same NCCL on every node", check_nccl,
          codes=("fleet.nccl-differs", "fleet.nccl-path-differs")),
    Check("fleet-cuda-libraries", "Same CUDA libraries on every node", check_cuda_libraries,
          codes=("fleet.cuda-libraries-differ", "fleet.library-paths-differ")),
    Check("fleet-driver", "Same NVIDIA driver on every node", check_driver, codes=("fleet.driver-differs",)),
    Check("fleet-gpus", "Same GPUs on every node", check_gpus,
          codes=("fleet.gpu-count-differs", "fleet.gpu-models-differ")),
    Check("fleet-mig", "MIG alike on every node", check_mig, codes=("fleet.mig-on-some-nodes",)),
    Check("fleet-environment", "Same NCCL / TensorFlow settings and TF_CONFIG cluster", check_environment,
          codes=("fleet.env-differs", "fleet.nccl-env-differs", "fleet.nccl-transport-differs",
                 "fleet.tf-config-cluster-differs", "fleet.tf-config-task-duplicate")),
    Check("fleet-python", "Same Python on every node", check_python, codes=("fleet.python-differs",)),
    Check("fleet-host-setup", "/dev/shm, IOMMU, ACS and limits alike on every node", check_fleet_host_setup,
          codes=("fleet.shm-differs", "fleet.pcie-setup-differs", "fleet.memlock-differs",
                 "fleet.container-differs")),
    Check("fleet-nccl-tuning", "NCCL algorithms, protocols and nccl.conf alike on every node",
          check_fleet_nccl_tuning, codes=("fleet.nccl-tuning-differs", "fleet.nccl-conf-differs")),
    Check("fleet-comparable", "Every fact could be compared", check_comparable,
          codes=("fleet.facts-missing",)),
    Check("fleet-each-node", "Every node passes `mgpu-doctor check` on its own", check_each_node,
          codes=("fleet.node-problems",)),
)


def fleet_report(
    fleet: Fleet, checks: tuple[Check[Fleet], ...] = FLEET_CHECKS, *, tool_version: str
) -> Report:
    """A report comparing the snapshots of several nodes (`fleet`)."""
    return new_report("fleet", f"fleet of {len(fleet.nodes)} nodes", [run_check(c, fleet) for c in checks],
                      tool_version=tool_version, fleet=fleet)
