"""TensorFlow's (and NCCL's) own log lines: which libraries loaded or did not, a runtime older than
the build, the devices TensorFlow created, the cuDNN and NCCL versions it names."""

from __future__ import annotations

import re

from mgpu_doctor.model.pasted import LogLine
from mgpu_doctor.model.snapshot import TfDevice
from mgpu_doctor.pasted.text import RANK_LOG, Found, cudnn_from_number
from mgpu_doctor.process.masking import mask_credentials
from mgpu_doctor.record import replace

# A log line starts with one of these (glog's "I0101 12:00:00.000 ..." or absl's timestamped
# "2021-01-01 12:00:00.000: I tensorflow/...", or a bare "E tensorflow/...").
_START = re.compile(r"^\s*(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?:?\s+[IWEF]\s|"
                    r"[IWEF]\d{4}\s+\d\d:\d\d|"
                    r"[IWEF]\s+(?:tensorflow|external)/|\S+:\d+:\d+\s+\[\d+\]\s+NCCL\s+INFO|W\s)")
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")  # anywhere in the line: searched apart, ``^\s*.*`` is quadratic
_MISMATCH = re.compile(r"Loaded runtime (?P<lib>CuDNN|cuDNN|CUDNN|CUDA|cuBLAS|NCCL) library:?\s*"
                       r"(?P<loaded>\d+(?:\.\d+)*)(?:\s*\(compatibility version \d+\))?\s+"
                       r"but source was compiled with:?\s*(?P<compiled>\d+(?:\.\d+)*)")
_NOT_LOADED = re.compile(r"Could not (?:load dynamic library|dlopen library|open CUDA library)\s+"
                         r"'?(?P<lib>[\w.+-]+)'?(?:;\s*dlerror:\s*(?P<why>.*))?")
_LOADED = re.compile(r"[Ss]uccessfully opened (?:dynamic library|CUDA library)\s+'?(?P<lib>[\w.+-]+)'?")
_DEVICE = re.compile(r"Creat(?:ed|ing) (?:TensorFlow )?device\s*\(?(?P<tfdev>/\S+?|/gpu:\d+)"
                     r"(?:\s+with\s+(?P<mb>\d+)\s*MB memory)?\)?:?\s*->\s*(?:physical GPU\s*)?\(?"
                     r"device:\s*(?P<ordinal>\d+),\s*name:\s*(?P<name>.+?),\s*"
                     r"pci bus id:\s*(?P<bus>[0-9a-fA-F:.]+)"
                     r"(?:,\s*compute capability:\s*(?P<cc>\d+\.\d+))?")
# "Found device 0 with properties:" then (2.x) "pciBusID: ... name: ... computeCapability: 8.6" or (1.x)
# "name: ... major: 6 minor: 1 ..." and "pciBusID: ...", on the lines after it.
_FOUND = re.compile(r"Found device (?P<ordinal>\d+) with properties:\s*"
                    r"(?:pciBusID:?\s*(?P<bus>[0-9a-fA-F:.]+)\s+)?"
                    r"name:\s*(?P<name>.+?)\s+(?:computeCapability:\s*(?P<cc>\d+\.\d+)|major:\s*(?P<major>\d+)\s+"
                    r"minor:\s*(?P<minor>\d+).*?pciBusID:?\s*(?P<bus1x>[0-9a-fA-F:.]+))")
# XLA's list of the GPUs it compiles for (TensorFlow 2.0 to 2.4): every visible GPU with its capability,
# also where the log was cut before the "Found device" lines of the later ones.
_XLA_DEVICE = re.compile(r"StreamExecutor device \((?P<ordinal>\d{1,4})\):\s{0,3}(?P<name>[^,]{1,120}),"
                         r"\s{0,3}Compute Capability\s{0,3}(?P<cc>\d{1,2}\.\d{1,2})")
_CUDNN_VERSION = re.compile(r"Loaded cuDNN version (?P<v>\d{4,6})\b")
_NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?")
_CUINIT = re.compile(r"failed call to cuInit:\s*(?P<why>\S.*)")
_NO_DRIVER = re.compile(r"Could not find cuda drivers on your machine")
_CANNOT_DLOPEN = re.compile(r"Cannot dlopen some GPU libraries")
TEXT_CHARS = 300


def find_log(lines: list[str]) -> list[Found]:
    """One part for the TensorFlow log lines of the paste (they may be spread over it)."""
    entries = _entries(lines)
    out = Found("TensorFlow log", 0, 0, RANK_LOG)
    used: list[int] = []
    for first, last, text in entries:
        if _read_entry(out, first, text):
            used.extend(range(first, last + 1))
    if not used:
        return []
    out.log = _distinct(out.log)
    if all(e.kind == "nccl-version" for e in out.log):
        out.kind = "NCCL log"
    if not out.devices:  # no "Created device" line: the devices TensorFlow found are what it sees
        out.devices = out.found
    out.first, out.last = min(used), max(used)
    out.facts = _summary(out)
    return [out]


def _entries(lines: list[str]) -> list[tuple[int, int, str]]:
    """Each line that names something this module reads, with the lines a terminal or browser
    wrapped it onto (joined back)."""
    keys = ("runtime", "dynamic library", "dlopen", "CUDA library", "device", "cuDNN version", "NCCL version",
            "cuInit", "cuda drivers", "Cannot dlopen")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not any(k in line for k in keys):
            i += 1
            continue
        text, last = line.strip(), i
        while (last + 1 < len(lines) and lines[last + 1].strip() and not _starts_entry(lines[last + 1])
               and last - i < 3 and not _complete(text)):
            glue = "" if len(lines[last]) >= 79 and not lines[last].endswith(" ") else " "
            text += glue + lines[last + 1].strip()
            last += 1
        out.append((i, last, text))
        i = last + 1
    return out


def _starts_entry(line: str) -> bool:
    return bool(_START.match(line) or _NCCL_INFO.search(line))


def _distinct(log: list[LogLine]) -> list[LogLine]:
    """Each fact once, with how often it repeats: a long log says the same line once per GPU, step
    or process, and the snapshot stays small."""
    first: dict[tuple[str, str, str, str, str], LogLine] = {}
    repeats: dict[tuple[str, str, str, str, str], int] = {}
    for entry in log:
        # "Created device" lines differ per GPU (ordinal, bus): the text tells them apart
        key = (entry.kind, entry.library, entry.loaded, entry.compiled,
               entry.text if entry.kind in ("device", "found-device") else "")
        if key in first:
            repeats[key] += 1
        else:
            first[key], repeats[key] = entry, 0
    return [replace(e, repeated=repeats[k]) if repeats[k] else e for k, e in first.items()]


def _complete(text: str) -> bool:
    if "Found device" in text:
        return bool(_FOUND.search(text))
    if "Created" in text or "Creating" in text:
        return bool(re.search(r"compute capability:\s*\d+\.\d+|pci bus id:\s*\S+\)\s*$", text))
    if "Loaded runtime" in text:
        return bool(_MISMATCH.search(text))
    return True


def _version(text: str) -> str:
    return cudnn_from_number(text) if "." not in text and len(text) >= 4 else text


def _read_entry(out: Found, line: int, text: str) -> bool:
    text = mask_credentials(text)  # before the cut: a cut token no longer looks like one
    shown = text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS - 1] + "…"
    if "Loaded runtime" in text and (m := _MISMATCH.search(text)):
        lib = m.group("lib").lower()
        loaded, compiled = _version(m.group("loaded")), _version(m.group("compiled"))
        out.log.append(LogLine(line + 1, "runtime-mismatch", shown, lib, loaded, compiled))
        out.tensorflow_ran = True
        if lib == "cudnn":
            out.versions["cudnn"] = loaded
            out.versions["built_cudnn"] = compiled
        return True
    if "Could not" in text and (m := _NOT_LOADED.search(text)):
        out.log.append(LogLine(line + 1, "not-loaded", shown, m.group("lib")))
        out.tensorflow_ran = True
        return True
    if m := _LOADED.search(text):
        out.log.append(LogLine(line + 1, "loaded", shown, m.group("lib")))
        if m.group("lib") not in out.loaded:
            out.loaded.append(m.group("lib"))
        out.tensorflow_ran = True
        return True
    if m := _DEVICE.search(text):
        cc = m.group("cc") or ""
        name = m.group("name").strip()
        details = {"device_name": name, "pci_bus_id": m.group("bus")}
        if cc:
            major, minor = cc.split(".")
            details["compute_capability"] = f"({major}, {minor})"
        ordinal = m.group("ordinal")
        if not any(d.name == f"/physical_device:GPU:{ordinal}" for d in out.devices):
            out.devices.append(TfDevice(f"/physical_device:GPU:{ordinal}", "GPU", details))
        out.log.append(LogLine(line + 1, "device", shown, name, cc))
        out.tensorflow_ran = True
        return True
    if m := _FOUND.search(text):
        cc = m.group("cc") or (f"{m.group('major')}.{m.group('minor')}" if m.group("major") else "")
        bus = m.group("bus") or m.group("bus1x") or ""
        details = {"device_name": m.group("name").strip(), "pci_bus_id": bus}
        if cc:
            details["compute_capability"] = "({}, {})".format(*cc.split("."))
        name = f"/physical_device:GPU:{m.group('ordinal')}"
        device = TfDevice(name, "GPU", details)
        at = next((k for k, d in enumerate(out.found) if d.name == name), None)
        if at is None:
            out.found.append(device)
        else:  # it replaces XLA's line for that GPU
            out.found[at] = device
        out.log.append(LogLine(line + 1, "found-device", shown, m.group("name").strip(), cc))
        out.tensorflow_ran = True
        return True
    if "StreamExecutor device" in text and (m := _XLA_DEVICE.search(text)):
        name, cc = f"/physical_device:GPU:{m.group('ordinal')}", m.group("cc")
        if not any(d.name == name for d in out.found):
            out.found.append(TfDevice(name, "GPU", {"device_name": m.group("name").strip(),
                                                    "compute_capability": "({}, {})".format(*cc.split("."))}))
        out.log.append(LogLine(line + 1, "found-device", shown, m.group("name").strip(), cc))
        out.tensorflow_ran = True
        return True
    if m := _CUDNN_VERSION.search(text):
        out.versions["cudnn"] = cudnn_from_number(m.group("v"))
        out.log.append(LogLine(line + 1, "loaded", shown, "cudnn", out.versions["cudnn"]))
        out.tensorflow_ran = True
        return True
    if m := _NCCL_VERSION.search(text):
        out.versions.setdefault("nccl", m.group("v"))
        out.log.append(LogLine(line + 1, "nccl-version", shown, "nccl", m.group("v")))
        return True
    if m := _CUINIT.search(text):
        out.log.append(LogLine(line + 1, "cuinit-failed", shown, "libcuda", m.group("why").strip()))
        out.tensorflow_ran = True
        return True
    if _NO_DRIVER.search(text) or _CANNOT_DLOPEN.search(text):
        out.log.append(LogLine(line + 1, "no-gpu", shown))
        out.tensorflow_ran = True
        return True
    return False


def _summary(out: Found) -> list[str]:
    facts = []
    for entry in out.log:
        if entry.kind == "runtime-mismatch":
            facts.append(f"line {entry.line}: {entry.library} loaded {entry.loaded}, "
                         f"compiled with {entry.compiled}")
        elif entry.kind == "not-loaded":
            facts.append(f"line {entry.line}: {entry.library} did not load")
        elif entry.kind == "device":
            facts.append(f"line {entry.line}: device {entry.library}"
                         + (f", compute capability {entry.loaded}" if entry.loaded else ""))
    loaded = sorted(set(out.loaded))
    if loaded:
        facts.append("loaded: " + ", ".join(loaded))
    for key in ("cudnn", "nccl"):
        if key in out.versions:
            facts.append(f"{key}: {out.versions[key]}")
    return facts
