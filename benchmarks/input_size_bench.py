"""Does any input make the doctor's time grow faster than the input? Masking, redaction, escaping.

A bug report from a stranger must not be able to hang the support engineer's terminal. This feeds
the functions every outside string goes through the worst inputs known for them, at sizes past
what the snapshot loader accepts (so the functions, not the loader's limits, are what is timed):

  1. credential masking (``mask_credentials``, ``mask_env_value``) of 1 MiB strings built to make
     a backtracking pattern try a long run again from each position in it (``a:a:a:…``,
     ``a@a@…``, ``eyJ-eyJ-…``, a PEM BEGIN without END, …);
  2. redaction of a snapshot with 80,000 GPUs (each UUID in its GPU's facts and in
     ``CUDA_VISIBLE_DEVICES``), and of one 1 MiB string that names them all;
  3. the human renderer's escaping of a 1 MiB string full of escape sequences;
  4. ``check --from`` of a snapshot at the loader's limits (4,096 GPUs, 64 KiB strings), as a
     real CLI process;
  5. ``check --from`` of every paste form at the paste limit (8 MiB), as a real CLI process: each
     real paste of tests/data/pastes repeated to 8 MiB, and the shapes that once made the paste
     reader quadratic (a line of blanks, ``> `` quoting, repeated headers, ``NVSMI LOG`` lines, a
     numbered list, key-value lines, a deep traceback). A paste past a limit of what it may
     describe (4,096 GPUs, 10,000 packages, an 18-digit figure) is refused: timed all the same.

Run: python benchmarks/input_size_bench.py   (or call ``main(argv)``: it returns the times).
Target: each under 5 s on the 2-core machine. That machine is shared by several sessions: the
figures are noisy, and a busy moment can double one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mgpu_doctor.model.redact import Identity, mask_snapshot, redact_snapshot  # noqa: E402
from mgpu_doctor.model.serde import from_jsonable  # noqa: E402
from mgpu_doctor.model.snapshot import Snapshot  # noqa: E402
from mgpu_doctor.process.inputs import MAX_FACT_CHARS, MAX_GPUS  # noqa: E402
from mgpu_doctor.process.masking import mask_credentials, mask_env_value  # noqa: E402
from mgpu_doctor.renderers.common import printable  # noqa: E402

MIB = 2**20
TARGET_S = 5.0
SAMPLE = REPO / "tests" / "data" / "healthy-8gpu-nvlink.json"
# Each repeated to 1 MiB: the shapes that made a pattern backtrack quadratically.
ADVERSARIAL = {
    "letters": "a", "user:": "a:", "user@": "a@", "user:pw@": "a:b@", "jwt-ish": "eyJ-",
    "token prefix": "sk-", "scheme": "h", "url": "a://b", "mixed case": "aB3", "bearer": "bearer ",
    "key=": "key=", "pem begin": "-----BEGIN PRIVATE KEY-----\n", "escape": "\x1b[2J",
    "host:port": "a:1,", "dots": "a.",
}


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def masking_times() -> dict[str, float]:
    times = {}
    for name, unit in ADVERSARIAL.items():
        text = (unit * (MIB // len(unit) + 1))[:MIB]
        times[f"mask 1 MiB of {name!r}"] = timed(lambda t=text: (mask_credentials(t),  # type: ignore[misc]
                                                                  mask_env_value("XLA_FLAGS", t)))
    return times


def many_gpus(count: int, string_chars: int = 0) -> dict[str, object]:
    data = json.loads(SAMPLE.read_text())
    gpu = data["nvml"]["gpus"][0]
    uuids = [f"GPU-{i:08x}-1111-2222-3333-444455556666" for i in range(count)]
    data["nvml"]["gpus"] = [{**gpu, "index": i, "uuid": u} for i, u in enumerate(uuids)]
    data["nvml"]["links"] = []
    data["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(uuids[:64])
    if string_chars:
        data["env"]["LD_LIBRARY_PATH"] = ("/opt/lib/a:b@" * string_chars)[:string_chars]
        data["env"]["XLA_FLAGS"] = ("a:" * string_chars)[:string_chars]
        data["nvml"]["gpus"][0]["name"] = ("\x1b]0;title\x07" * string_chars)[:string_chars]
    return data


def redaction_times(count: int) -> dict[str, float]:
    snapshot = from_jsonable(Snapshot, many_gpus(count), "snapshot")  # past the loader's limit
    identity = Identity(("gpu-node-07",), "alice", "/home/alice")
    line = " ".join(g.uuid for g in snapshot.nvml.gpus)  # type: ignore[union-attr]
    text_snapshot = dataclasses.replace(snapshot, env={**snapshot.env, "NOTE": line[:MIB]})
    return {
        f"redact a snapshot of {count} GPUs": timed(lambda: redact_snapshot(snapshot, identity)),
        f"mask a snapshot of {count} GPUs": timed(lambda: mask_snapshot(snapshot)),
        f"redact {count} GPUs and a 1 MiB string of their UUIDs":
            timed(lambda: redact_snapshot(text_snapshot, identity)),
    }


def escaping_times() -> dict[str, float]:
    text = ("\x1b[2J\x1b]0;x\x07é\u202e" * MIB)[:MIB]
    return {"escape 1 MiB of control characters": timed(lambda: printable(text))}


def cli_time() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "limits.json"
        path.write_text(json.dumps(many_gpus(MAX_GPUS, MAX_FACT_CHARS)))
        argv = [sys.executable, "-m", "mgpu_doctor", "check", "--from", str(path)]
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
        took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"check --from at the limits exited {done.returncode}: {done.stderr[-400:]}")
    return {f"check --from at the limits ({MAX_GPUS} GPUs, 64 KiB strings)": took}


PASTES = REPO / "tests" / "data" / "pastes"
PASTE_BYTES = 8 * MIB - 4096
SMI_HEADER = ("| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |\n"
              "|-------------------------------+----------------------+----------------------+\n")
SHAPES = {
    "a line of blanks after a version": "TensorFlow 2.4.1\n" + " " * PASTE_BYTES + "x\n",
    "System information, then blanks": "**System information**\n" + " " * PASTE_BYTES + "\n",
    "a line of '> ' quoting": "> " * (PASTE_BYTES // 2) + "tensorflow 2.4.1\n",
    "repeated nvidia-smi headers": SMI_HEADER,
    "repeated NVSMI LOG lines": "==============NVSMI LOG==============\n",
    "a numbered list of versions": "1. TensorFlow 1.15\n2. CUDA 10.0\n",
    "key: value lines": "Some key: some value 1.2.3\n",
    "a deep traceback": '  File "train.py", line 1, in f\n    f()\n',
    "a long '- ' bullet line": "- " * (PASTE_BYTES // 2) + "\n",
}


def to_size(unit: str, size: int = PASTE_BYTES) -> str:
    return unit if len(unit) >= size else (unit * (size // len(unit) + 1))[:size]


def paste_times(limit: int | None = None) -> dict[str, float]:
    forms = {f"paste {path.stem} x{PASTE_BYTES // max(1, path.stat().st_size)}":
             path.read_text(encoding="utf-8") for path in sorted(PASTES.glob("*.md"))}
    forms.update({f"paste shape: {name}": unit for name, unit in SHAPES.items()})
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, unit in list(forms.items())[:limit]:
            path = Path(tmp) / "paste.md"
            path.write_text(to_size(unit), encoding="utf-8")
            argv = [sys.executable, "-m", "mgpu_doctor", "check", "--from", str(path), "--format", "json"]
            start = time.perf_counter()
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
            times[name] = time.perf_counter() - start
            print(f"  {name}: {times[name]:.2f} s", file=sys.stderr, flush=True)
            if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr:
                raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-400:]}")
    return times


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=80_000)
    parser.add_argument("--no-cli", action="store_true", help="skip the check --from runs")
    parser.add_argument("--pastes", type=int, default=None, metavar="N",
                        help="time only the first N paste forms (default: all)")
    args = parser.parse_args(argv)
    times = {**masking_times(), **redaction_times(args.gpus), **escaping_times()}
    if not args.no_cli:
        times.update(cli_time())
        times.update(paste_times(args.pastes))
    width = max(len(k) for k in times)
    for name, seconds in times.items():
        verdict = "ok" if seconds < TARGET_S else "MISSED"
        print(f"{name:<{width}}  {seconds:7.2f} s  {verdict}")
    worst = max(times.values())
    print(f"slowest: {worst:.2f} s (target: each under {TARGET_S:g} s; a shared 2-core machine is noisy)")
    return times


if __name__ == "__main__":
    main()
