"""A paste split into the parts the format readers recognise, and the snapshot they make together.

Nothing in the paste is executed; each fact carries the part (and lines) it was read from, every
fact no part states is unavailable "not in the pasted text".
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from typing import TypeVar

from mgpu_doctor import __version__
from mgpu_doctor.model.evidence import evidence_lines, failures
from mgpu_doctor.model.pasted import PastedFacts, PastedPart, PastedVersion
from mgpu_doctor.model.snapshot import (
    KIND,
    SCHEMA_VERSION,
    GpuFacts,
    HostFacts,
    NvmlFacts,
    PackageFacts,
    PythonFacts,
    Snapshot,
    TensorFlowFacts,
)
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.pasted.build_info import find_build_info
from mgpu_doctor.pasted.commands import find_driver_lines, find_images, find_launches, find_nvcc
from mgpu_doctor.pasted.interpreter import find_printed_versions
from mgpu_doctor.pasted.nvidia_smi import NOT_PASTED, bus_key, find_query, find_table, find_xml, not_pasted
from mgpu_doctor.pasted.packages import INTERESTING, find_packages
from mgpu_doctor.pasted.prose import OLD_SETUP, find_prose, previous_lines
from mgpu_doctor.pasted.system_info import find_system_info
from mgpu_doctor.pasted.text import (
    MAX_SCANNED,
    RANK_LOG,
    RANK_PACKAGES,
    RANK_PROSE,
    RANK_TEMPLATE,
    Found,
    PasteRefused,
    paste_lines,
)
from mgpu_doctor.pasted.tf_log import find_log
from mgpu_doctor.pasted.tools import find_collect_env, find_tf_env
from mgpu_doctor.process.inputs import MAX_GPUS
from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.record import replace

T = TypeVar("T")

READERS: tuple[Callable[[list[str]], list[Found]], ...] = (
    find_system_info, find_xml, find_query, find_table, find_packages, find_build_info, find_collect_env,
    find_tf_env, find_log, find_nvcc, find_driver_lines, find_images, find_launches, find_printed_versions,
)
# How a table of GPUs is preferred: the fullest output first.
_SMI_ORDER = ("nvidia-smi -q -x", "nvidia-smi -q", "nvidia-smi")
VERSION_KEYS = ("tensorflow", "keras", "python", "cuda", "cudnn", "nccl", "driver", "built_cuda",
                "built_cudnn", "cuda_toolkit", "horovod", "mpi", "openmpi", "mpich", "ray")

UNREAD_SHOWN = 20
MAX_PASTE_CHARS = 8 * 2**20  # an issue body is at most 64 KiB; a long log a few MiB
MAX_PASTE_LINES = 200_000  # 8 MiB of a log is some 80,000 lines; a longer text goes to `check --log`
UNREAD_CHARS = 120


# What a paste may describe, as a snapshot may (process/inputs.py): no machine has more GPUs, no
# environment more packages. Above these a paste is refused, not read slowly into a huge report.
MAX_PASTE_PACKAGES = 10_000
MAX_LISTED = 200  # parts, log lines, images, launches of one paste: the first and last of them
MAX_FACTS_SHOWN = 100  # per part: a log that states a version 100,000 times says it once, with a count


class NothingRecognised(ValueError):
    """The text holds none of the outputs the doctor reads."""


def split_paste(text: str) -> tuple[list[str], list[Found]]:
    """The paste's lines and every part found, in the order they appear."""
    lines = paste_lines(text)
    found = [part for reader in READERS for part in reader(lines)]
    found = [f for f in found if f.facts or f.gpus or f.packages or f.log or f.versions]
    # A typed-template reader also sees "Key: value" lines inside tool output (collect_env, nvidia-smi -q):
    # the tool's own reader is the one to trust there.
    tool_parts_at: dict[int, set[int]] = {}  # line -> the tool parts that read it
    for f in found:
        if f.rank != RANK_TEMPLATE:
            for i in f.lines():
                tool_parts_at.setdefault(i, set()).add(id(f))
    found = [f for f in found if not (f.rank == RANK_TEMPLATE and tool_parts_at.get(f.first, set())
                                      & tool_parts_at.get(f.last, set()))]
    # An image or a launch line may also say a version in words ("image ...:19.08-py3, drivers: 390.116").
    covered = {i for f in found if not (f.images or f.launches) for i in f.lines()}
    old = previous_lines(lines)
    found += find_prose(lines, covered, old)  # what the text says in its own words, where no part read it
    _set_apart_old_setups(lines, found, old)
    found.sort(key=lambda f: (f.first, f.kind))
    for f in found:
        _within_limits(f)
    return lines, found


def _within_limits(part: Found) -> None:
    """Refuse a part that describes more than a machine has; cut its list of facts to what is shown."""
    gpus = max(len(part.gpus), len([d for d in part.devices if d.device_type == "GPU"]))
    if gpus > MAX_GPUS:
        raise PasteRefused(f"{part.kind} at line {part.first + 1} lists {gpus:,} GPUs: more than the "
                           f"{MAX_GPUS:,} a snapshot may hold (no machine has that many; edited?)")
    if len(part.packages) > MAX_PASTE_PACKAGES:
        raise PasteRefused(f"{part.kind} at line {part.first + 1} lists {len(part.packages):,} packages: "
                           f"more than the {MAX_PASTE_PACKAGES:,} an environment is taken to hold")
    if len(part.facts) > MAX_FACTS_SHOWN:
        left = len(part.facts) - MAX_FACTS_SHOWN
        part.facts = part.facts[:MAX_FACTS_SHOWN] + [f"... and {left:,} more such lines, not shown"]


def _set_apart_old_setups(lines: list[str], found: list[Found], old: dict[int, int]) -> None:
    """A list or template under "Old environment:", "this works:", "previously I used": its versions and
    packages are kept as what the text calls old or working, never as what is installed."""
    for f in found:
        if f.rank >= RANK_LOG or f.rank == RANK_PROSE or f.launches or f.first not in old:
            continue
        if old[f.first] < len(lines[f.first][:MAX_SCANNED]):  # only the start of the line is old
            continue
        f.previous += [f"{key} {value} (line {f.version_lines.get(key, f.first) + 1}: {OLD_SETUP})"
                       for key, value in f.versions.items()]
        f.previous += [f"{name} {value} ({f.kind}, line {f.first + 1}: {OLD_SETUP})"
                       for name, value in f.packages.items() if INTERESTING.match(name)]
        f.versions, f.packages, f.gpus, f.driver = {}, {}, [], ""
        f.kind = f"{f.kind} ({OLD_SETUP})"


def snapshot_from_paste(text: str, source: str, now: _dt.datetime | None = None,
                        read_elsewhere: bool = False) -> Snapshot:
    """The snapshot a paste describes. Raises :class:`NothingRecognised` when it holds no part,
    no failure line and nothing the caller reads in it (``read_elsewhere``: its code blocks' facts,
    a line a known issue prints)."""
    lines, found = split_paste(text)
    evidence = evidence_lines(lines)
    if not found and not failures(evidence) and not read_elsewhere:
        raise NothingRecognised(source)
    where = {id(f): _where(f) for f in found}
    versions: dict[str, PastedVersion] = {}
    for key in VERSION_KEYS:
        stating = [f for f in found if f.versions.get(key)]
        if key == "cuda" and not stating:  # nvcc's toolkit, only where nothing else names the CUDA version
            stating = [f for f in found if f.versions.get("cuda_toolkit")]
            for f in stating:
                f.versions["cuda"] = f.versions["cuda_toolkit"]
                f.version_lines["cuda"] = f.version_lines["cuda_toolkit"]
        if key == "cuda" and not stating:  # then a toolkit directory in a path ("/usr/local/cuda-11.1/...")
            stating = [f for f in found if f.versions.get("cuda_directory")]
            for f in stating:
                f.versions["cuda"] = f.versions["cuda_directory"]
                f.version_lines["cuda"] = f.version_lines["cuda_directory"]
        if stating:
            best = max(stating, key=lambda f: f.rank)  # max keeps the first of equal ranks
            stating = _typed_below_printed(key, stating, best)
            versions[key] = PastedVersion(
                best.versions[key], _stated_where(best, key, where),
                _listed([f"{f.versions[key]} ({_stated_where(f, key, where)})"
                         for f in stating if f is not best]))
    provenance: dict[str, str] = {f"versions.{k}": v.source for k, v in versions.items()}
    nvml = _nvml(found, where, provenance)
    tensorflow = _tensorflow(found, versions, where, provenance)
    packages = _packages(found, where, provenance)
    python: PythonFacts | Unavailable = not_pasted()
    if "python" in versions:
        python = PythonFacts(versions["python"].text, versions["python"].source, "", "", [], False)
        provenance["python"] = versions["python"].source
    os_part = next((f for f in sorted(found, key=lambda f: -f.rank) if f.os_release), None)
    os_release = os_part.os_release if os_part is not None else ""
    if os_part is not None:
        provenance["host.os_release"] = where[id(os_part)]
    covered = {i for f in found for i in f.lines()}
    parts = [PastedPart(f.kind, f.first + 1, f.last + 1, list(f.facts),
                        [f"line {i + 1}: {_cut(lines[i])}" for i in f.unread[:UNREAD_SHOWN]])
             for f in found[:MAX_LISTED]]
    if len(found) > MAX_LISTED:  # a paste of the same template 10,000 times: the report stays small
        rest = found[MAX_LISTED:]
        parts.append(PastedPart(f"{len(rest):,} more parts, not listed", rest[0].first + 1, rest[-1].last + 1,
                                [f"kinds: {', '.join(sorted({f.kind for f in rest}))}"], []))
    pasted = PastedFacts(
        file=source, parts=parts, versions=versions, provenance=provenance,
        log=_listed([entry for f in found for entry in f.log]),
        other_lines=sum(1 for i, line in enumerate(lines) if line.strip() and i not in covered),
        evidence=evidence,
        previous=_listed([entry for f in found for entry in f.previous]),
        images=_listed([image for f in found for image in f.images]),
        launches=_listed([launch for f in found for launch in f.launches]),
    )
    created = (now or _dt.datetime.now(_dt.timezone.utc)).replace(microsecond=0).isoformat()
    return Snapshot(
        schema_version=SCHEMA_VERSION, kind=KIND, tool_version=__version__, created=created,
        host=HostFacts(hostname="", os_name=_os_name(os_release), os_release=os_release or not_pasted(),
                       kernel="", machine="", libc=not_pasted(), cpu_count=0,
                       memory_total_bytes=not_pasted()),
        python=python, packages=packages, env={}, nvml=nvml, tensorflow=tensorflow,
        libraries=not_pasted(), collective=not_pasted(), pasted=pasted,
    )


def _typed_below_printed(key: str, stating: list[Found], best: Found) -> list[Found]:
    """Where a tool printed the version (a package list, the interpreter, nvidia-smi, a log), another release
    typed in a sentence is what the writer believed or tried, not what ran: kept as a fact of its part,
    not as another version of the paste (the same release said shorter stays one of its others)."""
    if best.rank < RANK_PACKAGES:
        return stating
    kept = []
    for f in stating:
        if f.rank == RANK_PROSE and not _same_release(f.versions[key], best.versions[key]):
            line = f.version_lines.get(key, f.first) + 1
            f.facts.append(f"{key} {f.versions[key]} (line {line}): typed in a sentence; not taken, "
                           f"{best.kind} shows {best.versions[key]}")
            continue
        kept.append(f)
    return kept


def _same_release(typed: str, printed: str) -> bool:
    """"455.23" typed is "455.23.05" printed, said shorter; "3.02" is not "3.0.5"."""
    typed_parts, printed_parts = re.split(r"[.+-]", typed), re.split(r"[.+-]", printed)
    return printed_parts[:len(typed_parts)] == typed_parts


def _listed(items: list[T]) -> list[T]:
    """At most :data:`MAX_LISTED` of a paste's items, the first and the last halves (a log's failure is
    at its end)."""
    if len(items) <= MAX_LISTED:
        return items
    return items[:MAX_LISTED // 2] + items[-(MAX_LISTED // 2):]


def _where(found: Found) -> str:
    first, last = found.first + 1, found.last + 1
    lines = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"pasted: {found.kind}, {lines}"


def _stated_where(found: Found, key: str, where: dict[int, str]) -> str:
    """Where a part states a version: its line when known, else the part's lines."""
    line = found.version_lines.get(key)
    if line is None:
        library = {"cudnn": "cudnn", "built_cudnn": "cudnn", "nccl": "nccl"}.get(key)
        line = next((e.line - 1 for e in found.log if library and e.library == library
                     and e.kind != "not-loaded"), None)
    return f"pasted: {found.kind}, line {line + 1}" if line is not None else where[id(found)]


def _cut(text: str) -> str:
    text = mask_credentials(text.strip())  # before the cut: a cut token no longer looks like one
    return text if len(text) <= UNREAD_CHARS else text[:UNREAD_CHARS - 1] + "…"


def _os_name(release: str) -> str:
    low = release.lower()
    if "windows" in low or "win10" in low or "win11" in low:
        return "Windows"
    if any(word in low for word in ("mac", "darwin", "osx")):
        return "Darwin"
    if any(word in low for word in ("linux", "ubuntu", "debian", "centos", "rhel", "red hat", "fedora",
                                    "suse", "arch", "rocky", "alma", "amazon", "wsl")):
        return "Linux"
    return ""


def _nvml(found: list[Found], where: dict[int, str], provenance: dict[str, str]) -> NvmlFacts | Unavailable:
    # A header line alone ("NVIDIA-SMI 470.161.03 Driver Version: ...") names the driver, not the GPUs:
    # its version is read from the pasted versions, and the GPUs stay unknown.
    smi = [f for f in found if f.kind in _SMI_ORDER and f.driver and f.gpus]
    if not smi:
        return not_pasted()
    best = min(smi, key=lambda f: (_SMI_ORDER.index(f.kind), -len(f.gpus)))
    provenance["nvml"] = where[id(best)]
    devices = [d for f in found for d in f.devices]
    gpus = [_with_capability(g, devices) for g in best.gpus]
    return NvmlFacts(best.driver, best.cuda_driver or not_pasted(), not_pasted(), gpus, [])


def _with_capability(gpu: GpuFacts, devices: list) -> GpuFacts:
    """nvidia-smi does not print compute capabilities; TensorFlow's "Created device" line does."""
    for device in devices:
        bus = device.details.get("pci_bus_id", "")
        cc = device.details.get("compute_capability", "")
        if bus and cc and bus_key(bus) == bus_key(gpu.pci_bus_id):
            major, minor = cc.strip("()").split(",")
            return replace(gpu, compute_capability=f"{major.strip()}.{minor.strip()}")
    return gpu


def _tensorflow(found: list[Found], versions: dict[str, PastedVersion], where: dict[int, str],
                provenance: dict[str, str]) -> TensorFlowFacts | Unavailable:
    ran = [f for f in found if f.tensorflow_ran]
    if not ran:
        return Unavailable("skipped", f"{NOT_PASTED} (no TensorFlow log lines or build info)", "not-pasted")
    provenance["tensorflow"] = "; ".join(where[id(f)] for f in ran)
    build_info: dict[str, str] = {}
    for f in ran:
        build_info.update(f.build_info)
    devices = [d for f in ran for d in f.devices]
    loaded = [name for f in ran for name in f.loaded]
    cuda_build = build_info.get("is_cuda_build")
    built_with_cuda: bool | Unavailable = (
        cuda_build == "True" if cuda_build in ("True", "False")
        else True if devices or any("cud" in name for name in loaded) or "built_cudnn" in versions
        else not_pasted())
    # The version TensorFlow itself printed (tf_env_collect.sh), not one typed next to its log.
    version = next((f.versions["tensorflow"] for f in ran if f.versions.get("tensorflow")), "")
    return TensorFlowFacts(
        version=version, module_path=provenance["tensorflow"], keras_module=not_pasted(),
        keras_version=not_pasted(),
        build_info=build_info, built_with_cuda=built_with_cuda,
        physical_devices=devices if devices else not_pasted(), loaded_libraries=loaded, import_seconds=0.0,
    )


def _packages(found: list[Found], where: dict[int, str], provenance: dict[str, str]
              ) -> PackageFacts | Unavailable:
    lists = [f for f in found if f.packages]
    if not lists:
        return not_pasted()
    versions: dict[str, str] = {}
    locations: dict[str, str] = {}
    for f in lists:
        for name, version in f.packages.items():
            if name not in versions:
                versions[name] = version
                locations[name] = where[id(f)]
    provenance["packages"] = "; ".join(where[id(f)] for f in lists)
    return PackageFacts(versions, locations, {})
