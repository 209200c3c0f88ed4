"""``nvidia-smi`` as pasted: the table (drivers 418 to 580), ``nvidia-smi -q`` and ``-q -x``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from mgpu_doctor.model.snapshot import GpuFacts, GpuProcess
from mgpu_doctor.model.unavailable import Unavailable
from mgpu_doctor.pasted.text import RANK_SMI, Found, whole

MIB = 2**20
NOT_PASTED = "not in the pasted text"
_HEADER = re.compile(r"NVIDIA-SMI\s+(?P<smi>[\d.]+)\s+Driver Version:\s*(?P<driver>[\d.]+)"
                     r"(?:\s+CUDA Version:\s*(?P<cuda>[\d.]+|N/A))?")
_ROW1 = re.compile(r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persist>On|Off|WDDM|TCC)\s*\|\s*"
                   r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+(?P<disp>\S+)\s*\|\s*"
                   r"(?P<ecc>\S+)\s*\|")
_ROW2 = re.compile(r"^\|\s*(?P<fan>\d+%|N/A|ERR!)\s+(?P<temp>\d+C|N/A)\s+(?P<perf>P\d+|N/A)\s+.*?\|\s*"
                   r"(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB\s*\|\s*(?P<util>\d+%|N/A)\s+"
                   r"(?P<mode>Default|E\. Process|E\. Thread|Prohibited|N/A)\s*\|")
_ROW3 = re.compile(r"^\|\s+\|\s+\|\s+(?P<mig>Enabled|Disabled|N/A)\s*\|")
_PROCESS = re.compile(r"^\|\s*(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+"
                      r"(?P<type>C\+G|C|G)\s+(?P<name>\S.*?)\s+(?P<mem>\d+|N/A)\s*(?:MiB)?\s*\|")
_COMPUTE_MODES = {"default": "default", "e. process": "exclusive_process",
                  "exclusive_process": "exclusive_process",
                  "e. thread": "exclusive_thread", "exclusive_thread": "exclusive_thread",
                  "prohibited": "prohibited"}
_THROTTLE_NAMES = {"idle": "gpu_idle", "applications clocks setting": "applications_clocks_setting",
                   "sw power cap": "sw_power_cap", "hw slowdown": "hw_slowdown", "sync boost": "sync_boost",
                   "sw thermal slowdown": "sw_thermal_slowdown", "hw thermal slowdown": "hw_thermal_slowdown",
                   "hw power brake slowdown": "hw_power_brake_slowdown",
                   "display clock setting": "display_clock_setting"}


def not_pasted() -> Unavailable:
    return Unavailable("skipped", NOT_PASTED, "not-pasted")


def bus_key(bus: str) -> str:
    """"00000000:00:1E.0" and "0000:00:1e.0" name the same GPU."""
    domain, _, rest = bus.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if domain and re.fullmatch(r"[0-9a-f]+", domain) else bus.lower()


# --- the table -------------------------------------------------------------------------------


def find_table(lines: list[str]) -> list[Found]:
    found: list[Found] = []
    for i, line in enumerate(lines):
        header = _HEADER.search(line)
        if header is None or "Driver Version" not in line or ":" not in line:
            continue
        if found and i <= found[-1].last:  # parts are found in order: only the last one can hold line i
            continue
        found.append(_read_table(lines, i, header))
    return found


def _read_table(lines: list[str], start: int, header: re.Match[str]) -> Found:
    out = Found("nvidia-smi", start, start, RANK_SMI, driver=header.group("driver"))
    cuda = header.group("cuda") or ""
    out.cuda_driver = "" if cuda in ("", "N/A") else cuda
    out.versions["driver"] = out.driver
    out.facts.append(f"driver: {out.driver}" + (f", CUDA {out.cuda_driver}" if out.cuda_driver else ""))
    first = start - 1 if start > 0 and lines[start - 1].lstrip().startswith("+") else start
    # A timestamp line ("Wed Dec 29 20:55:43 2021") often comes first.
    rows: dict[int, dict[str, Any]] = {}
    processes: list[tuple[int, GpuProcess]] = []
    in_processes = False
    current: int | None = None
    i = start + 1
    blank = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            blank += 1
            if blank > 1:
                break
            i += 1
            continue
        blank = 0
        if not (line.startswith(("|", "+")) or line.startswith("=")):
            break
        if "Processes:" in line:
            in_processes = True
        elif not in_processes and (m := _ROW1.match(line)):
            current = whole(m.group("index"))
            rows[current] = dict(m.groupdict())
        elif not in_processes and current is not None and (m := _ROW2.match(line)):
            rows[current].update(m.groupdict())
        elif not in_processes and current is not None and (m := _ROW3.match(line)):
            rows[current]["mig"] = m.group("mig")
        elif in_processes and (m := _PROCESS.match(line)):
            mem = m.group("mem")
            processes.append((whole(m.group("gpu")), GpuProcess(
                whole(m.group("pid")), whole(mem) * MIB if mem.isdecimal() else Unavailable("absent", "N/A"),
                "graphics" if m.group("type") == "G" else "compute")))
        elif _is_table_furniture(line):
            pass
        else:
            out.unread.append(i)
        i += 1
    out.first, out.last = first, i - 1
    while out.last > start and not lines[out.last].strip():
        out.last -= 1
    for index, row in sorted(rows.items()):
        gpu = _table_gpu(index, row, [p for g, p in processes if g == index], in_processes)
        out.gpus.append(gpu)
        out.facts.append(f"GPU {index}: {gpu.name}, {gpu.memory_total_bytes // MIB} MiB, "
                         f"bus {gpu.pci_bus_id}")
    return out


def _is_table_furniture(line: str) -> bool:
    if set(line) <= set("+-=| "):
        return True
    return bool(re.match(r"^\|\s*(GPU|Fan|ID|\||Processes|No running|GPU\s+GI)", line)) or any(
        word in line for word in ("MIG M.", "Memory-Usage", "Persistence-M", "Compute M."))


def _table_gpu(index: int, row: dict[str, Any], processes: list[GpuProcess], had_processes: bool) -> GpuFacts:
    ecc = row.get("ecc", "")
    temp = row.get("temp") or ""
    mode = (row.get("mode") or "").lower()
    mig = row.get("mig")
    total = row.get("total")
    used = row.get("used")
    return GpuFacts(
        index=index, name=row["name"].strip(), uuid="", pci_bus_id=row["bus"],
        memory_total_bytes=whole(total) * MIB if total else 0,
        memory_used_bytes=whole(used) * MIB if used else not_pasted(),
        compute_capability=not_pasted(),
        persistence_mode=row["persist"] == "On" if row["persist"] in ("On", "Off") else not_pasted(),
        compute_mode=_COMPUTE_MODES.get(mode, not_pasted()),
        mig_mode=(mig == "Enabled") if mig in ("Enabled", "Disabled") else not_pasted(),
        ecc_enabled=(ecc != "Off") if ecc not in ("", "N/A") else not_pasted(),
        ecc_uncorrected_volatile=whole(ecc) if ecc.isdecimal() else not_pasted(),
        temperature_c=whole(temp[:-1]) if temp.endswith("C") else not_pasted(),
        throttle_reasons=not_pasted(), pcie_gen_current=not_pasted(), pcie_gen_max=not_pasted(),
        pcie_width_current=not_pasted(), pcie_width_max=not_pasted(),
        processes=processes if had_processes else not_pasted(), mig_devices=not_pasted(),
    )


# --- nvidia-smi -q ---------------------------------------------------------------------------

_Q_GPU = re.compile(r"^(\s*)GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_Q_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][^:]*?)\s*(?::\s*(?P<value>.*))?$")


class Node(dict[str, Any]):
    """One level of ``nvidia-smi -q``: key -> value (str) or Node; repeated keys become lists."""

    def add(self, key: str, value: Any) -> None:
        if key in self:
            existing = self[key]
            if isinstance(existing, list):
                existing.append(value)  # in place: a key repeated n times costs n, not n squared
            else:
                self[key] = [existing, value]
        else:
            self[key] = value


def find_query(lines: list[str]) -> list[Found]:
    found: list[Found] = []
    for i, line in enumerate(lines):
        if "NVSMI LOG" not in line or (found and i <= found[-1].last):
            continue
        found.append(_read_query(lines, i))
    return found


def _read_query(lines: list[str], start: int) -> Found:
    root = Node()
    stack: list[tuple[int, Node]] = [(-1, root)]
    out = Found("nvidia-smi -q", start, start, RANK_SMI)
    i = start + 1
    blank = 0
    while i < len(lines):
        raw = lines[i]
        if not raw.strip():
            blank += 1
            if blank > 2:
                break
            i += 1
            continue
        if "NVSMI LOG" in raw or _HEADER.search(raw):
            break
        blank = 0
        gpu_line = _Q_GPU.match(raw)
        m = None if gpu_line else _Q_LINE.match(raw.rstrip())
        if gpu_line:
            while stack and stack[-1][0] >= len(gpu_line.group(1)):
                stack.pop()
            node = Node()
            stack[-1][1].add(f"GPU {gpu_line.group(2)}", node)
            stack.append((len(gpu_line.group(1)), node))
            out.last = i
            i += 1
            continue
        if m is None:
            if stack[-1][0] < 0 and not raw.startswith(" "):
                break
            out.unread.append(i)
            i += 1
            continue
        indent = len(m.group("indent").expandtabs())
        key, value = m.group("key").strip(), m.group("value")
        if indent == 0 and value is None and not key.startswith("GPU "):
            break  # prose after the output
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value is None or (value.strip() == "" and key.startswith("GPU ")):
            node = Node()
            parent.add(key, node)
            stack.append((indent, node))
        else:
            parent.add(key, value.strip())
        out.last = i
        i += 1
    _query_facts(out, root)
    return out


def _query_facts(out: Found, root: Node) -> None:
    out.driver = _text(root.get("Driver Version"))
    cuda = _text(root.get("CUDA Version"))
    out.cuda_driver = "" if cuda in ("", "N/A", "Not Found") else cuda
    if out.driver:
        out.versions["driver"] = out.driver
        out.facts.append(f"driver: {out.driver}" + (f", CUDA {out.cuda_driver}" if out.cuda_driver else ""))
    gpus = [(k[4:], v) for k, v in root.items() if k.startswith("GPU ") and isinstance(v, Node | list)]
    index = 0
    for bus, node in gpus:
        for one in node if isinstance(node, list) else [node]:
            gpu = _query_gpu(index, bus, one)
            out.gpus.append(gpu)
            out.facts.append(f"GPU {gpu.index}: {gpu.name}, {gpu.memory_total_bytes // MIB} MiB, {gpu.uuid}")
            index += 1


def _text(value: Any) -> str:
    if isinstance(value, list):
        value = value[0]
    return value if isinstance(value, str) else ""


def _path(node: Any, *keys: str) -> str:
    for key in keys:
        if isinstance(node, list):
            node = node[0]
        if not isinstance(node, dict):
            return ""
        node = node.get(key)
    return _text(node)


def _mib(value: str) -> int | None:
    m = re.match(r"(\d+)\s*MiB", value)
    return whole(m.group(1)) * MIB if m else None


def _int(value: str) -> int | Unavailable:
    m = re.match(r"(\d+)", value)
    return whole(m.group(1)) if m else not_pasted()


def _on(value: str, yes: str = "Enabled", no: str = "Disabled") -> bool | Unavailable:
    return True if value == yes else False if value == no else not_pasted()


def _query_gpu(index: int, bus: str, g: Node) -> GpuFacts:
    minor = _path(g, "Minor Number")
    total = _mib(_path(g, "FB Memory Usage", "Total"))
    used = _mib(_path(g, "FB Memory Usage", "Used"))
    throttle = g.get("Clocks Throttle Reasons") or g.get("Clocks Event Reasons")
    reasons: list[str] | Unavailable = not_pasted()
    if isinstance(throttle, dict):
        reasons = [_THROTTLE_NAMES[k.lower()] for k, v in throttle.items()
                   if isinstance(v, str) and v == "Active" and k.lower() in _THROTTLE_NAMES]
    uncorrected = _uncorrected(g.get("ECC Errors"))
    processes: list[GpuProcess] | Unavailable = not_pasted()
    procs = g.get("Processes")
    if procs == "None":
        processes = []
    elif isinstance(procs, dict):
        infos = procs.get("Process ID")
        pids = infos if isinstance(infos, list) else [infos] if infos is not None else []
        types = procs.get("Type")
        mems = procs.get("Used GPU Memory")
        type_list = types if isinstance(types, list) else [types] * len(pids)
        mem_list = mems if isinstance(mems, list) else [mems] * len(pids)
        processes = []
        for pid, kind, mem in zip(pids, type_list, mem_list, strict=False):
            if isinstance(pid, str) and pid.isdecimal():
                size = _mib(mem) if isinstance(mem, str) else None
                processes.append(GpuProcess(whole(pid), size if size is not None else not_pasted(),
                                            "graphics" if kind == "G" else "compute"))
    return GpuFacts(
        index=whole(minor) if minor.isdecimal() else index, name=_path(g, "Product Name"),
        uuid=_path(g, "GPU UUID"), pci_bus_id=_path(g, "PCI", "Bus Id") or bus,
        memory_total_bytes=total or 0, memory_used_bytes=used if used is not None else not_pasted(),
        compute_capability=not_pasted(),
        persistence_mode=_on(_path(g, "Persistence Mode")),
        compute_mode=_COMPUTE_MODES.get(_path(g, "Compute Mode").lower(), not_pasted()),
        mig_mode=_on(_path(g, "MIG Mode", "Current")),
        ecc_enabled=_on(_path(g, "Ecc Mode", "Current")),
        ecc_uncorrected_volatile=uncorrected,
        temperature_c=_int(_path(g, "Temperature", "GPU Current Temp")),
        throttle_reasons=reasons,
        pcie_gen_current=_int(_path(g, "PCI", "GPU Link Info", "PCIe Generation", "Current")),
        pcie_gen_max=_int(_path(g, "PCI", "GPU Link Info", "PCIe Generation", "Max")),
        pcie_width_current=_int(_path(g, "PCI", "GPU Link Info", "Link Width", "Current")),
        pcie_width_max=_int(_path(g, "PCI", "GPU Link Info", "Link Width", "Max")),
        processes=processes, mig_devices=not_pasted(),
    )


def _uncorrected(errors: Any) -> int | Unavailable:
    """Volatile uncorrected ECC errors: "Double Bit" totals (drivers to 5xx), "SRAM/DRAM Uncorrectable"
    (later drivers)."""
    if not isinstance(errors, dict):
        return not_pasted()
    volatile = errors.get("Volatile")
    if not isinstance(volatile, dict):
        return not_pasted()
    total = 0
    seen = False
    double = volatile.get("Double Bit")
    if isinstance(double, dict) and isinstance(double.get("Total"), str):
        value = _int(double["Total"])
        if isinstance(value, int):
            total, seen = total + value, True
    for key, value in volatile.items():
        if "uncorrectable" in key.lower() and isinstance(value, str):
            number = _int(value)
            if isinstance(number, int):
                total, seen = total + number, True
    return total if seen else not_pasted()


# --- nvidia-smi -q -x ------------------------------------------------------------------------

_XML_START = re.compile(r"<nvidia_smi_log\b")
_XML_END = re.compile(r"</nvidia_smi_log>")


def find_xml(lines: list[str]) -> list[Found]:
    found: list[Found] = []
    i = 0
    while i < len(lines):
        if not _XML_START.search(lines[i]):
            i += 1
            continue
        start = i
        while start > 0 and lines[start - 1].lstrip().startswith("<?xml") or (
                start > 0 and lines[start - 1].lstrip().startswith("<!DOCTYPE")):
            start -= 1
        end = _xml_end(lines, i)
        cut = end is None
        if end is None:  # cut off (a collapsed comment, a stored excerpt): read what is there
            end = i
            while (end + 1 < len(lines) and lines[end + 1].lstrip().startswith("<")
                   and not _XML_START.search(lines[end + 1])):
                end += 1
        out = _read_xml(lines, start, i, end, cut)
        found.append(out)
        i = end + 1
    return found


def _xml_end(lines: list[str], root: int) -> int | None:
    """The line that closes the document opened at ``root``; None where another one opens first or
    the text ends (a cut copy): never a search to the end of the paste for each of a thousand."""
    for j in range(root, len(lines)):
        if _XML_END.search(lines[j]):
            return j
        if j > root and _XML_START.search(lines[j]):
            return None
    return None


def _read_xml(lines: list[str], start: int, root_line: int, end: int, cut: bool = False) -> Found:
    out = Found("nvidia-smi -q -x", start, end, RANK_SMI)
    body = "\n".join(lines[root_line:end + 1])
    body = body[_XML_START.search(body).start():]  # type: ignore[union-attr]
    if "<!ENTITY" in body or "<!DOCTYPE" in body:  # nothing nvidia-smi writes after its root: refuse
        out.unread.append(root_line)
        return out
    if cut:
        body = _closed(body)
        out.facts.append("cut off before </nvidia_smi_log>: read as far as it goes")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        out.unread.append(root_line + max(0, exc.position[0] - 1))
        return out
    out.driver = (root.findtext("driver_version") or "").strip()
    cuda = (root.findtext("cuda_version") or "").strip()
    out.cuda_driver = "" if cuda in ("", "N/A") else cuda
    if out.driver:
        out.versions["driver"] = out.driver
        out.facts.append(f"driver: {out.driver}" + (f", CUDA {out.cuda_driver}" if out.cuda_driver else ""))
    for index, g in enumerate(root.findall("gpu")):
        gpu = _xml_gpu(index, g)
        out.gpus.append(gpu)
        out.facts.append(f"GPU {gpu.index}: {gpu.name}, {gpu.memory_total_bytes // MIB} MiB, {gpu.uuid}")
    return out


_TAG = re.compile(r"<(/?)([A-Za-z_][\w.-]*)[^>]*?(/?)>")


def _closed(body: str) -> str:
    """A cut XML document closed: the last (perhaps partial) line dropped, open elements closed."""
    body = body[:body.rfind(">") + 1] if ">" in body else ""
    stack: list[str] = []
    for match in _TAG.finditer(body):
        closing, name, empty = match.groups()
        if empty:
            continue
        if closing:
            if stack and stack[-1] == name:
                stack.pop()
        else:
            stack.append(name)
    return body + "".join(f"</{name}>" for name in reversed(stack))


def _x(g: ET.Element, path: str) -> str:
    return (g.findtext(path) or "").strip()


def _xml_gpu(index: int, g: ET.Element) -> GpuFacts:
    total = _mib(_x(g, "fb_memory_usage/total"))
    used = _mib(_x(g, "fb_memory_usage/used"))
    throttle = g.find("clocks_throttle_reasons")
    if throttle is None:
        throttle = g.find("clocks_event_reasons")
    reasons: list[str] | Unavailable = not_pasted()
    if throttle is not None:
        reasons = []
        for child in throttle:
            name = re.sub(r"^clocks_(throttle|event)_reason_", "", child.tag)
            if (child.text or "").strip() == "Active" and name in _THROTTLE_NAMES.values():
                reasons.append(name)
    volatile = g.find("ecc_errors/volatile")
    uncorrected: int | Unavailable = not_pasted()
    if volatile is not None:
        numbers = [_int(_x(volatile, "double_bit/total"))] + [
            _int((c.text or "").strip()) for c in volatile if "uncorrectable" in c.tag]
        known = [n for n in numbers if isinstance(n, int)]
        uncorrected = sum(known) if known else not_pasted()
    processes: list[GpuProcess] | Unavailable = not_pasted()
    procs = g.find("processes")
    if procs is not None:
        processes = []
        for p in procs.findall("process_info"):
            pid = _x(p, "pid")
            if pid.isdecimal():
                size = _mib(_x(p, "used_memory"))
                processes.append(GpuProcess(whole(pid), size if size is not None else not_pasted(),
                                            "graphics" if _x(p, "type") == "G" else "compute"))
    minor = _x(g, "minor_number")
    return GpuFacts(
        index=whole(minor) if minor.isdecimal() else index, name=_x(g, "product_name"), uuid=_x(g, "uuid"),
        pci_bus_id=_x(g, "pci/pci_bus_id") or g.get("id", ""),
        memory_total_bytes=total or 0, memory_used_bytes=used if used is not None else not_pasted(),
        compute_capability=not_pasted(),
        persistence_mode=_on(_x(g, "persistence_mode")),
        compute_mode=_COMPUTE_MODES.get(_x(g, "compute_mode").lower(), not_pasted()),
        mig_mode=_on(_x(g, "mig_mode/current_mig")),
        ecc_enabled=_on(_x(g, "ecc_mode/current_ecc")),
        ecc_uncorrected_volatile=uncorrected,
        temperature_c=_int(_x(g, "temperature/gpu_temp")),
        throttle_reasons=reasons,
        pcie_gen_current=_int(_x(g, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
        pcie_gen_max=_int(_x(g, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        pcie_width_current=_int(_x(g, "pci/pci_gpu_link_info/link_widths/current_link_width")),
        pcie_width_max=_int(_x(g, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        processes=processes, mig_devices=not_pasted(),
    )
