"""Paste benchmark: does `check --from PASTE` read the facts a user's paste states, and only those?

Runs `python -m mgpu_doctor check --from FILE --format json` on every paste listed in
benchmarks/pastes/pastes.toml and compares what the report says it read with the facts written down by hand
for that paste (tensorflow, keras, python, cuda, cudnn, driver, gpu, os, nccl, horovod).

    python benchmarks/paste_bench.py          # misreads per paste, then the figures per split (dev,
                                              # heldout, any later held-out set) and all
    python benchmarks/paste_bench.py --json   # the same figures as JSON (and the rows)

What the report "read", per kind (the facts it presents as the paste's own; a set-up it keeps apart as
previous or old is not counted, nor what TensorFlow was built with, nor a library a log line names):
  tensorflow  snapshot.pasted.versions.tensorflow (and its "others"), TensorFlow packages of a pip/conda
              list (tensorflow, tensorflow-gpu, tf-nightly, ...-base), snapshot.tensorflow.version, the
              release a tensorflow/tensorflow image tag names
  keras       versions.keras, packages keras / keras-nightly / keras-base / keras-gpu,
              snapshot.tensorflow.keras_version
  python      versions.python, snapshot.python.version, a package named python
  cuda        versions.cuda and versions.cuda_toolkit, packages cudatoolkit / cuda / cuda-toolkit /
              cuda-version / cuda-cudart / nvidia-cuda-runtime-cu*, the CUDA toolkits of snapshot.libraries
  cudnn       versions.cudnn, packages cudnn / nvidia-cudnn-cu*
  driver      versions.driver, snapshot.nvml.driver_version
  gpu         the GPU names of snapshot.nvml, snapshot.tensorflow.physical_devices and TensorFlow's "Found
              device" log lines, with how many of each; a GPU a template names ("gpu: GTX 1080 8GB" among
              the pasted parts' facts), how many unknown
  os          snapshot.host.os_release
  nccl        versions.nccl, packages nccl / nvidia-nccl-cu*
  horovod     versions.horovod, package horovod

How values are compared (the way a user means them):
  versions    a leading "v", a local label ("+cu121", "+nv23.3") and a packaging revision ("-1", ".post4")
              are dropped; pre-releases and dev builds are normalised as PEP 440 does ("2.0.0-beta1" =
              "2.0.0b1", "2.16.0-rc0" = "2.16.0rc0", "1.12.0-dev20181005" = "1.12.0.dev20181005"); the
              release keeps the precision typed: "2.1" equals "2.1" and not "2.1.0" (a reader that turns "2.1"
              into "2.1.0", or a soname "libcudart.so.11.0" into CUDA "11.0", states more than the paste
              does). A value that is not a version ("12.X") is compared as lower-case text.
  gpu         names compared without case, spaces, punctuation, a trailing "..." and the words NVIDIA,
              GeForce and Tesla; one name matches another when either contains the other ("1080Ti" and
              "GeForce GTX 1080 Ti"). Where both the expected fact ("x2") and the report give a count, the
              two must be the same.
  os          words compared without case; "linux", "lts", "gnu", "release", "core", "os" and punctuation
              dropped; a version word matches a longer one it starts ("20.04" and "20.04.5") and itself typed
              without dots ("1604"). A read value is right when it and an expected one agree in one
              direction; an expected value is found when a read value holds all its words.

Counted per kind:
  precision   read values that match an expected value of the same paste and kind / all read values
  recall      (paste, kind) pairs with an expected value the report reads / all (paste, kind) pairs expected
Counted per paste: rejected (exit code 2 and "not a paste" in the output), rejected_with_version (of those,
the paste states a version: any kind but gpu and os), timeouts and unreadable output.
Standard library only (tomllib: Python 3.11+).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import tomllib
from corpus_split import by_split  # benchmarks/, beside this script

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "pastes"
REPO = HERE.parent
TIMEOUT_S = 60
KINDS = ("tensorflow", "keras", "python", "cuda", "cudnn", "driver", "gpu", "os", "nccl", "horovod")
VERSION_KINDS = tuple(k for k in KINDS if k not in ("gpu", "os"))

PACKAGES = {
    "tensorflow": re.compile(r"^(tensorflow|tf-nightly|intel-tensorflow|nvidia-tensorflow)"
                             r"(-gpu|-cpu|-base|-gpu-base|-mkl|-macos|-intel|-rocm)?$"),
    "keras": re.compile(r"^keras(-nightly|-base|-gpu)?$"),
    "python": re.compile(r"^python$"),
    "cuda": re.compile(r"^(cudatoolkit|cuda|cuda-toolkit|cuda-version|cuda-cudart"
                       r"|nvidia-cuda-runtime-cu\d+)$"),
    "cudnn": re.compile(r"^(cudnn|nvidia-cudnn-cu\d+)$"),
    "nccl": re.compile(r"^(nccl|nvidia-nccl-cu\d+)$"),
    "horovod": re.compile(r"^horovod$"),
}
VERSION_KEYS = {  # snapshot.pasted.versions keys read as each kind
    "tensorflow": ("tensorflow",), "keras": ("keras",), "python": ("python",),
    "cuda": ("cuda", "cuda_toolkit"), "cudnn": ("cudnn",), "driver": ("driver",), "nccl": ("nccl",),
    "horovod": ("horovod",),
}

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<prenum>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)?[-_.]?\d+)*?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:[-_.]?(?:post|rev|r)?[-_.]?(?P<post>\d+))?$")
_PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc", "rc": "rc"}


def version_key(text: str) -> tuple:
    """How a version compares: (release as typed, pre-release, dev build); what is no version stays text."""
    value = text.strip().lower().split("+", 1)[0]
    match = _VERSION.match(value)
    if not match:
        return ("text", value)
    release = tuple(int(part) for part in match["release"].split("."))
    pre = (_PRE[match["pre"]], int(match["prenum"] or 0)) if match["pre"] else None
    dev = int(match["dev"] or 0) if match["dev"] is not None else None
    return ("version", release, pre, dev)


def same_version(expected: str, read: str) -> bool:
    return version_key(expected) == version_key(read)


_GPU_COUNT = re.compile(r"^(?P<name>.*?)\s+x(?P<count>\d+)$")
_GPU_NOISE = re.compile(r"\b(nvidia|geforce|tesla)\b")


def gpu_fact(text: str) -> tuple[str, int]:
    """An expected GPU fact ("GeForce GTX 1080 x2") as (normalised name, count or 0)."""
    match = _GPU_COUNT.match(text.strip())
    name, count = (match["name"], int(match["count"])) if match else (text, 0)
    return gpu_name(name), count


def gpu_name(text: str) -> str:
    text = _GPU_NOISE.sub(" ", text.lower().replace("...", " "))
    return re.sub(r"[^a-z0-9]", "", text)


def same_gpu(a: str, b: str) -> bool:
    return bool(a) and bool(b) and (a in b or b in a)


_OS_NOISE = {"linux", "lts", "gnu", "release", "core", "os"}
_OS_ALIASES = (("mac os x", "macos"), ("mac osx", "macos"), ("mac os", "macos"), ("osx", "macos"),
               ("win10", "windows 10"), ("win11", "windows 11"))


def os_words(text: str) -> list[str]:
    value = text.lower()
    for alias, name in _OS_ALIASES:
        value = re.sub(rf"\b{re.escape(alias)}\b", name, value)
    words = re.findall(r"[a-z]+|\d+(?:\.\d+)*", value)
    return [w for w in words if w not in _OS_NOISE]


def _word_in(word: str, words: list[str]) -> bool:
    if word[0].isdigit():  # "20.04" is in "20.04.5"; "1604" is "16.04" typed without its dot
        return any(w == word or w.startswith(word + ".") or w.replace(".", "") == word.replace(".", "")
                   for w in words if w[0].isdigit())
    return word in words


def os_holds(outer: str, inner: str) -> bool:
    """Whether every word of ``inner`` is in ``outer`` ("Ubuntu 20.04.5 LTS" holds "Ubuntu 20.04")."""
    inner_words, outer_words = os_words(inner), os_words(outer)
    return bool(inner_words) and all(_word_in(w, outer_words) for w in inner_words)


def _text(value: object) -> str:
    """A snapshot field's value, or "" where the snapshot says it is unavailable."""
    return value.strip() if isinstance(value, str) else ""


def read_facts(report: dict) -> dict[str, list]:
    """What the report says the paste states, per kind: version texts, os texts, and (name, count) GPUs."""
    snapshot = report.get("snapshot") or {}
    pasted = snapshot.get("pasted") or {}
    read: dict[str, list] = {kind: [] for kind in KINDS}
    versions = pasted.get("versions") or {}
    for kind, keys in VERSION_KEYS.items():
        for key in keys:
            version = versions.get(key)
            if not version:
                continue
            read[kind].append(version.get("text", ""))
            read[kind].extend(other.split(" (", 1)[0] for other in version.get("others", []))
    packages = snapshot.get("packages")
    if isinstance(packages, dict):
        for name, value in (packages.get("versions") or {}).items():
            for kind, pattern in PACKAGES.items():
                if pattern.match(name.lower().replace("_", "-")):
                    read[kind].append(value)
    tensorflow = snapshot.get("tensorflow")
    gpus: dict[str, int] = {}
    if isinstance(tensorflow, dict):
        read["tensorflow"].append(_text(tensorflow.get("version")))
        read["keras"].append(_text(tensorflow.get("keras_version")))
        devices = tensorflow.get("physical_devices")
        for device in devices if isinstance(devices, list) else []:
            if device.get("device_type") == "GPU":
                name = (device.get("details") or {}).get("device_name", "")
                gpus[name] = gpus.get(name, 0) + 1
    for image in pasted.get("images") or []:
        read["tensorflow"].append(image.get("tensorflow", ""))
    found: dict[str, set[str]] = {}  # TensorFlow's "Found device N with properties: ... name: X" lines
    for line in pasted.get("log") or []:
        if line.get("kind") == "found-device" and line.get("library"):
            index = re.search(r"Found device (\d+)", line.get("text", ""))
            found.setdefault(line["library"], set()).add(index[1] if index else line.get("text", ""))
    for name, indexes in found.items():
        gpus[name] = max(gpus.get(name, 0), len(indexes))
    typed = []  # a GPU a template names ("gpu: GTX 1080 8GB"): the name, how many unknown
    for part in pasted.get("parts") or []:
        typed.extend(fact.split(":", 1)[1].strip() for fact in part.get("facts", [])
                     if fact.startswith("gpu:"))
    python = snapshot.get("python")
    if isinstance(python, dict):
        read["python"].append(_text(python.get("version")))
    libraries = snapshot.get("libraries")
    if isinstance(libraries, dict):
        read["cuda"].extend(_text(toolkit.get("version")) for toolkit in libraries.get("toolkits") or [])
    nvml = snapshot.get("nvml")
    if isinstance(nvml, dict):
        read["driver"].append(_text(nvml.get("driver_version")))
        nvml_gpus: dict[str, int] = {}
        for gpu in nvml.get("gpus") or []:
            nvml_gpus[gpu.get("name", "")] = nvml_gpus.get(gpu.get("name", ""), 0) + 1
        for name, count in nvml_gpus.items():  # nvidia-smi and TensorFlow's log may both list the same cards
            gpus[name] = max(gpus.get(name, 0), count)
    read["gpu"] = [(gpu_name(name), count) for name, count in gpus.items() if gpu_name(name)]
    counted = [known for known, _ in read["gpu"]]
    read["gpu"] += [(gpu_name(name), 0) for name in typed
                    if gpu_name(name) and not any(same_gpu(gpu_name(name), known) for known in counted)]
    read["os"].append(_text((snapshot.get("host") or {}).get("os_release")))
    for kind in KINDS:
        if kind == "gpu":
            continue
        seen: list[str] = []
        for value in read[kind]:
            if value and not any(version_key(value) == version_key(s) for s in seen):
                seen.append(value)
        read[kind] = seen
    return read


def judge(kind: str, expected: list[str], read: list) -> tuple[list, list, bool]:
    """(read values that are right, read values that are wrong, whether an expected value was read)."""
    right, wrong = [], []
    if kind == "gpu":
        wanted = [gpu_fact(e) for e in expected]
        for name, count in read:
            ok = any(same_gpu(name, w) and (not wcount or not count or wcount == count)
                     for w, wcount in wanted)
            (right if ok else wrong).append(f"{name} x{count}" if count else name)
        found = any(same_gpu(name, w) and (not wcount or not count or wcount == count)
                    for w, wcount in wanted for name, count in read)
        return right, wrong, found
    if kind == "os":
        for value in read:
            ok = any(os_holds(value, e) or os_holds(e, value) for e in expected)
            (right if ok else wrong).append(value)
        return right, wrong, any(os_holds(value, e) for e in expected for value in read)
    for value in read:
        (right if any(same_version(e, value) for e in expected) else wrong).append(value)
    return right, wrong, bool(right)


def run_doctor(paste: Path) -> dict:
    """One doctor run on one paste: exit code, whether it was rejected, the report (or why there is none)."""
    cmd = [sys.executable, "-m", "mgpu_doctor", "check", "--from", str(paste), "--format", "json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"rc": None, "rejected": False, "report": None, "error": "timeout"}
    rejected = proc.returncode == 2 and "not a paste" in (proc.stdout + proc.stderr)
    if rejected:
        return {"rc": proc.returncode, "rejected": True, "report": None, "error": ""}
    try:
        return {"rc": proc.returncode, "rejected": False, "report": json.loads(proc.stdout), "error": ""}
    except json.JSONDecodeError:
        error = (proc.stderr.strip().splitlines() or ["no JSON output"])[-1][:200]
        return {"rc": proc.returncode, "rejected": False, "report": None, "error": error}


def score(paste: dict, result: dict) -> dict:
    read = read_facts(result["report"]) if result["report"] else {kind: [] for kind in KINDS}
    kinds = {}
    for kind in KINDS:
        expected = list(paste.get(kind, []))
        right, wrong, found = judge(kind, expected, read[kind])
        kinds[kind] = {"expected": expected, "right": right, "wrong": wrong, "found": found}
    return {
        "file": paste["file"],
        "split": paste.get("split", ""),
        "rc": result["rc"],
        "rejected": result["rejected"],
        "holds_version": any(paste.get(kind) for kind in VERSION_KINDS),
        "error": result["error"],
        "kinds": kinds,
    }


def figures(rows: list[dict]) -> dict:
    out: dict = {"pastes": len(rows),
                 "rejected_not_a_paste": sum(r["rejected"] for r in rows),
                 "rejected_with_version": sum(r["rejected"] and r["holds_version"] for r in rows),
                 "timeouts_or_errors": sum(bool(r["error"]) for r in rows)}
    groups = {kind: (kind,) for kind in KINDS}
    groups["versions"] = VERSION_KINDS
    for group, kinds in groups.items():
        right = sum(len(r["kinds"][k]["right"]) for r in rows for k in kinds)
        wrong = sum(len(r["kinds"][k]["wrong"]) for r in rows for k in kinds)
        expected = sum(bool(r["kinds"][k]["expected"]) for r in rows for k in kinds)
        found = sum(r["kinds"][k]["found"] for r in rows for k in kinds if r["kinds"][k]["expected"])
        out[group] = {
            "read": right + wrong, "right": right,
            "precision": round(right / (right + wrong), 3) if right + wrong else None,
            "expected": expected, "found": found,
            "recall": round(found / expected, 3) if expected else None,
        }
    return out


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures (and rows) as JSON")
    parser.add_argument("--corpus", type=Path, default=CORPUS / "pastes.toml")
    args = parser.parse_args(argv)

    data = tomllib.loads(args.corpus.read_text(encoding="utf-8"))
    pastes = data.get("paste", [])
    rows = [score(p, run_doctor(args.corpus.parent / p["file"])) for p in pastes]
    splits = by_split(rows, figures)

    if args.json:
        print(json.dumps({"figures": splits, "rows": rows}, indent=2))
        return 0

    for r in rows:
        notes = []
        if r["rejected"]:
            notes.append("rejected: not a paste" + (" (it states a version)" if r["holds_version"] else ""))
        if r["error"]:
            notes.append("error: " + r["error"])
        for kind, k in r["kinds"].items():
            if k["wrong"]:
                notes.append(f"{kind} misread {k['wrong']} (paste: {k['expected'] or 'nothing'})")
            if k["expected"] and not k["found"]:
                notes.append(f"{kind} missed {k['expected']}")
        if notes:
            print(f"{r['file']} [{r['split']}]: " + "; ".join(notes))
    print()
    print(f"{'kind':<11} {'split':<9} {'precision':>9} {'(right/read)':>13} {'recall':>7} "
          f"{'(found/expected)':>17}")
    for kind in (*KINDS, "versions"):
        for split, by_kind in splits.items():
            f = by_kind[kind]
            print(f"{kind:<11} {split:<9} {_ratio(f['precision']):>9} {f['right']:>6}/{f['read']:<6} "
                  f"{_ratio(f['recall']):>7} {f['found']:>8}/{f['expected']:<8}")
    print()
    for key, label in (("pastes", "pastes"), ("rejected_not_a_paste", "rejected (exit 2, not a paste)"),
                       ("rejected_with_version", "  of those, the paste states a version"),
                       ("timeouts_or_errors", "timeouts or unreadable output")):
        print(f"{label:<40} " + "  ".join(f"{split} {figs[key]:>4}" for split, figs in splits.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
