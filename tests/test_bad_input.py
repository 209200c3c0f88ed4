"""Bad input through the real CLI (`python -m mgpu_doctor` in a subprocess): every case is its exit
code, a phrase of its one-line message, and never a traceback.

The cases run concurrently in one module fixture (about a second each, none imports TensorFlow);
each is then its own test. The limits are those of :mod:`mgpu_doctor.process.inputs`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mgpu_doctor.process.inputs import MAX_JSON_DEPTH
from tests.scenarios import path_of

SNAPSHOT = str(path_of("sick-box"))
GOOD_TF_CONFIG = {"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker", "index": 0}}


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]  # "{tmp}" is the folder holding the files of FILES
    code: int
    phrase: str  # in stderr (exit 2) or stdout (other codes); "" for none
    env: dict[str, str] = field(default_factory=dict)
    redirect: str = ""  # shell redirections of the doctor's standard streams
    before: str = ""  # shell commands run first, in the same shell ("cd {tmp}/x && ...")
    absent: str = ""  # must not appear anywhere in the output


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def _snapshot_with(**changes: object) -> str:
    data = json.loads(Path(SNAPSHOT).read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    return json.dumps(data)


BIG = "9" * 5000
SMI_HEADER = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 410.78       Driver Version: 410.78       CUDA Version: 10.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
"""
SMI_ROW = """|   {index}  Quadro P1000        Off  | 00000000:18:00.0  On |                  N/A |
| 34%   37C    P0    N/A /  N/A |    {used}MiB /  4038MiB |      1%      Default |
+-------------------------------+----------------------+----------------------+
"""
FILES: dict[str, str | bytes] = {
    "deep.json": _deep(),
    # Nested too deeply, yet a string a snapshot may hold (at most 64 KiB): 2 x 30 000 brackets.
    "deep-cluster.json": _snapshot_with(env__TF_CONFIG=_deep(30_000)),
    "long-cluster.json": _snapshot_with(env__TF_CONFIG=_deep()),
    "deep.md": "# mgpu-doctor report\n\n```json\n" + _deep() + "\n```\n",
    "bigint.json": _snapshot_with(schema_version=0).replace('"schema_version": 0', f'"schema_version": {BIG}'),
    "long-driver.json": _snapshot_with(nvml__driver_version=BIG),
    "utf16.json": Path(SNAPSHOT).read_text().encode("utf-16"),
    "latin1.json": b'{\n "host": "caf\xe9"}',
    "elf": b"\x7fELF\x02\x01\x01" + bytes(200),
    "deep.toml": "acknowledge = " + _deep() + "\n",
    "utf16.toml": '[[acknowledge]]\ncode = "x"\n'.encode("utf-16"),
    "bigint.toml": f"x = {BIG}\n",
    "matrix/a.toml": b"\x7fELF\x02\x01" + bytes(100),
    "paste-long-memory.md": SMI_HEADER + SMI_ROW.format(index=0, used=BIG),
    "paste-long-index.md": SMI_HEADER + SMI_ROW.format(index=BIG, used=1),
    "paste-4097-gpus.md": SMI_HEADER + "".join(SMI_ROW.format(index=i, used=1) for i in range(4097)),
    "paste-10001-packages.md": "$ pip list\nPackage    Version\n---------- -------\n"
                               + "".join(f"package{i}   1.{i}.0\n" for i in range(10_001)),
    "paste-200001-lines.md": "TensorFlow 2.4.1\n" + "x\n" * 200_000,
    "v6.json": json.dumps({"cluster": {"worker": ["[::1:12345"]}, "task": {"type": "worker", "index": 0}}),
}

CASES = [
    # --- files: nesting, size, numbers, encodings ---------------------------------------------
    Case("check-from-deep-json", ["check", "--from", "{tmp}/deep.json"], 2,
         f"deep.json: JSON nested more than {MAX_JSON_DEPTH} levels deep"),
    Case("libs-from-deep-json", ["libs", "--from", "{tmp}/deep.json"], 2, "nested more than"),
    Case("report-from-deep-markdown", ["report", "--from", "{tmp}/deep.md"], 2,
         "deep.md: the JSON block at line 3: JSON nested more than"),
    Case("fleet-deep-json", ["fleet", "{tmp}/deep.json", SNAPSHOT], 2, "deep.json: JSON nested more than"),
    Case("check-from-dev-zero", ["check", "--from", "/dev/zero"], 2,
         "/dev/zero: larger than 64 MiB, the most mgpu-doctor reads"),
    Case("fleet-dev-zero", ["fleet", SNAPSHOT, "/dev/zero"], 2, "larger than 64 MiB"),
    Case("check-from-5000-digit-integer", ["check", "--from", "{tmp}/bigint.json"], 2,
         "bigint.json: holds an integer with 5000 digits", absent="set_int_max_str_digits"),
    Case("fleet-5000-digit-integer", ["fleet", "{tmp}/bigint.json", SNAPSHOT], 2, "integer with 5000 digits"),
    Case("check-from-5000-digit-driver-string", ["check", "--from", "{tmp}/long-driver.json"], 1,
         "checks:", absent="set_int_max_str_digits"),
    Case("check-from-utf16", ["check", "--from", "{tmp}/utf16.json"], 2,
         "utf16.json: is UTF-16 text; mgpu-doctor reads UTF-8"),
    Case("fleet-utf16", ["fleet", SNAPSHOT, "{tmp}/utf16.json"], 2, "is UTF-16 text"),
    Case("check-from-latin1", ["check", "--from", "{tmp}/latin1.json"], 2,
         "latin1.json: is not UTF-8 text (byte 0xe9 at line 2, column 14)"),
    Case("check-from-executable", ["check", "--from", "{tmp}/elf"], 2, "elf: is an ELF executable"),
    Case("check-from-deep-tf-config-in-snapshot", ["check", "--from", "{tmp}/deep-cluster.json"], 1, "checks:"),
    Case("check-from-string-over-64-kib", ["check", "--from", "{tmp}/long-cluster.json"], 2,
         "long-cluster.json: field snapshot.env.TF_CONFIG: a string of 200000 characters; no fact of a real "
         "machine has more than 65536"),
    Case("fleet-string-over-64-kib", ["fleet", "{tmp}/long-cluster.json", SNAPSHOT], 2,
         "field snapshot.env.TF_CONFIG: a string of 200000 characters"),
    Case("fleet-deep-tf-config-in-snapshot", ["fleet", "{tmp}/deep-cluster.json", SNAPSHOT], 1,
         "TF_CONFIG cluster"),
    # --- pasted text: what no machine has is refused, as in a snapshot (issue 40) -----------------
    Case("paste-5000-digit-memory", ["check", "--from", "{tmp}/paste-long-memory.md"], 2,
         "paste-long-memory.md: a number of 5,000 digits", absent="set_int_max_str_digits"),
    Case("paste-5000-digit-gpu-index", ["check", "--from", "{tmp}/paste-long-index.md"], 2,
         "a number of 5,000 digits"),
    Case("paste-4097-gpus", ["check", "--from", "{tmp}/paste-4097-gpus.md"], 2,
         "nvidia-smi at line 1 lists 4,097 GPUs: more than the 4,096 a snapshot may hold"),
    Case("paste-10001-packages", ["check", "--from", "{tmp}/paste-10001-packages.md"], 2,
         "lists 10,001 packages: more than the 10,000"),
    Case("paste-200001-lines", ["check", "--from", "{tmp}/paste-200001-lines.md"], 2,
         "200,002 lines: more than the 200,000 a pasted text may have (give a long training log with "
         "`check --log FILE`"),
    Case("paste-given-to-fleet", ["fleet", "{tmp}/paste-long-index.md", SNAPSHOT], 2,
         "paste-long-index.md: plain text, not a snapshot or report"),
    Case("paste-given-as-baseline", ["check", "--from", SNAPSHOT, "--baseline", "{tmp}/paste-long-index.md"], 2,
         "a pasted text is read by `mgpu-doctor check --from`"),
    # --- the working directory, empty options --------------------------------------------------
    Case("working-directory-deleted-quick", ["check", "--quick"], 0, "checks:",
         before="mkdir -p {tmp}/gone-a && cd {tmp}/gone-a && rmdir {tmp}/gone-a &&"),
    Case("working-directory-deleted-from", ["check", "--from", SNAPSHOT], 1, "checks:",
         before="mkdir -p {tmp}/gone-b && cd {tmp}/gone-b && rmdir {tmp}/gone-b &&"),
    Case("pyproject-symlink-loop", ["check", "--quick"], 2,
         "pyproject.toml: cannot read: Too many levels of symbolic links",
         before="mkdir -p {tmp}/loop && cd {tmp}/loop && ln -sfn pyproject.toml pyproject.toml &&"),
    Case("baseline-empty", ["check", "--from", SNAPSHOT, "--baseline", ""], 2, "argument --baseline: is empty"),
    Case("fleet-empty-path", ["fleet", "", SNAPSHOT], 2, "argument SNAPSHOT: is empty"),
    Case("log-empty", ["check", "--from", SNAPSHOT, "--log", ""], 2, "argument --log: is empty"),
    # --- acknowledge and matrix files ---------------------------------------------------------
    Case("ack-deep-toml", ["check", "--from", SNAPSHOT, "--ack", "{tmp}/deep.toml"], 2,
         "deep.toml: nested too deeply to read"),
    Case("ack-utf16", ["check", "--from", SNAPSHOT, "--ack", "{tmp}/utf16.toml"], 2, "utf16.toml: is UTF-16 text"),
    Case("ack-5000-digit-number", ["check", "--from", SNAPSHOT, "--ack", "{tmp}/bigint.toml"], 2,
         "bigint.toml: holds a number too long to read", absent="set_int_max_str_digits"),
    Case("ack-executable", ["check", "--from", SNAPSHOT, "--ack", "{tmp}/elf"], 2, "is an ELF executable"),
    Case("matrix-validate-binary-toml", ["matrix", "validate", "{tmp}/matrix"], 2, "1 problem(s) in 1 file(s)"),
    Case("check-matrix-binary-toml", ["check", "--from", SNAPSHOT, "--matrix", "{tmp}/matrix", "-v"], 1,
         "is an ELF executable or library, not a TOML file"),
    # --- options --------------------------------------------------------------------------------
    Case("checks-minus-skip-is-nothing", ["check", "--from", SNAPSHOT, "--checks", "gpus", "--skip", "gpus"], 2,
         "no checks left to run"),
    Case("checks-empty", ["check", "--from", SNAPSHOT, "--checks", ","], 2, "--checks names no check"),
    Case("require-gpus-5000-digits", ["check", "--from", SNAPSHOT, "--require-gpus", BIG], 2,
         "--require-gpus wants a number of GPUs, got '999"),
    Case("python-empty", ["check", "--quick", "--python", ""], 2, "--python is empty"),
    Case("stall-timeout-nan", ["smoke", "--stall-timeout", "nan"], 2, "--stall-timeout must be a number of seconds"),
    Case("stall-timeout-inf", ["smoke", "--stall-timeout", "inf"], 2, "got inf"),
    Case("stall-timeout-negative", ["check", "--no-smoke", "--quick", "--stall-timeout", "-1"], 2, "got -1"),
    Case("virtual-devices-1", ["smoke", "--virtual-devices", "1"], 2, "--virtual-devices must be from 2 to"),
    Case("virtual-devices-checked-without-smoke", ["check", "--quick", "--virtual-devices", "1"], 2,
         "--virtual-devices must be"),
    Case("gpus-more-than-nvml-finds", ["smoke", "--gpus", "1,999"], 2, "--gpus asks for 999 GPUs but NVML finds",
         absent="TensorFlow: counting"),
    Case("gpus-zero", ["smoke", "--gpus", "0"], 2, "--gpus takes numbers from 1 to 1024"),
    # "²" is a digit to str.isdigit, and int() refuses it: was an internal error
    Case("gpus-superscript-digit", ["smoke", "--gpus", "²"], 2, "--gpus takes comma-separated whole numbers"),
    Case("matrix-query-superscript-gpus", ["matrix", "query", "gpus=²"], 2, "'²' is not a number of GPUs"),
    Case("batch-sizes-huge", ["smoke", "--batch-sizes", "99999999999"], 2, "--batch-sizes takes numbers from 1 to"),
    Case("layers-empty", ["smoke", "--layers", ","], 2, "--layers names no layer"),
    Case("workers-too-many", ["smoke", "--workers", "100000"], 2, "--workers takes a number from 2 to 32"),
    Case("matrix-query-5000-digit-gpus", ["matrix", "query", f"gpus={BIG}"], 2, "is not a number of GPUs"),
    Case("matrix-query-5000-digit-driver", ["matrix", "query", f"driver=={BIG}"], 2,
         "is not a version", absent="set_int_max_str_digits"),
    # --- TF_CONFIG ------------------------------------------------------------------------------
    Case("tf-config-binary-file", ["smoke", "--tf-config", "@{tmp}/elf"], 2,
         "--tf-config: {tmp}/elf: is an ELF executable"),
    Case("tf-config-dev-zero", ["smoke", "--tf-config", "@/dev/zero"], 2, "larger than 64 MiB"),
    Case("tf-config-deep", ["smoke", "--tf-config", _deep(5000)], 2, "--tf-config: JSON nested more than"),
    Case("tf-config-empty", ["smoke", "--tf-config", ""], 2, "--tf-config is empty"),
    Case("tf-config-directory", ["smoke", "--tf-config", "@{tmp}"], 2, "Is a directory"),
    Case("tf-config-unbalanced-ipv6", ["smoke", "--tf-config", "@{tmp}/v6.json"], 2,
         "cluster.worker[0] '[::1:12345': unbalanced brackets"),
    Case("tf-config-env-unbalanced-ipv6", ["smoke"], 2, "unbalanced brackets",
         env={"TF_CONFIG": json.dumps({"cluster": {"worker": ["[::1:12345"]}, "task": {"type": "worker", "index": 0}})}),
    Case("tf-config-env-bare-ipv6", ["smoke"], 2, "an IPv6 address needs brackets ([::1]:2222)",
         env={"TF_CONFIG": json.dumps({"cluster": {"worker": ["::1:2222"]}, "task": {"type": "worker", "index": 0}})}),
    Case("tf-config-env-deep", ["smoke"], 2, "JSON nested more than", env={"TF_CONFIG": _deep(1000)}),
    Case("tf-config-index-5000-digits", ["smoke", "--tf-config", json.dumps(GOOD_TF_CONFIG).replace(
        '"index": 0', f'"index": {BIG}')], 2, "integer with 5000 digits"),
    Case("tf-config-password-is-masked", ["smoke", "--tf-config", json.dumps(
        {"cluster": {"worker": ["alice:s3cr3tPW@10.0.0.1:2222"]}, "task": {"type": "worker", "index": 0}})], 2,
        "'***@10.0.0.1:2222': TF_CONFIG addresses take no user name or password", absent="s3cr3tPW"),
    # --- standard streams -----------------------------------------------------------------------
    Case("stdout-closed", ["check", "--from", SNAPSHOT], 2, "stdout is closed", redirect=">&-"),
    Case("stdout-full", ["check", "--from", SNAPSHOT, "--format", "json"], 2,
         "cannot write the output to stdout: No space left on device", redirect=">/dev/full"),
    Case("report-stdout-full", ["report", "--from", SNAPSHOT], 2, "No space left on device", redirect=">/dev/full"),
    Case("junit-full", ["check", "--from", SNAPSHOT, "--junit", "/dev/full"], 2,
         "cannot write /dev/full: No space left on device"),
    Case("stderr-closed-and-bad-input", ["check", "--from", "{tmp}/deep.json"], 2, "", redirect="2>&-"),
    Case("stdout-and-stderr-closed", ["check", "--from", SNAPSHOT], 2, "", redirect=">&- 2>&-"),
]


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


def _run(case: Case, tmp: Path) -> Ran:
    argv = [a.replace("{tmp}", str(tmp)) for a in case.argv]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "MGPU_DOCTOR_DEBUG")}
    env.update(case.env)
    out, err = tmp / f"{case.name}.out", tmp / f"{case.name}.err"
    # The doctor's own streams redirected as the case says, ours read back from files.
    command = " ".join(_quote(a) for a in [sys.executable, "-m", "mgpu_doctor", *argv])
    before = case.before.replace("{tmp}", str(tmp))
    shell = f"{{ {before} {command} {case.redirect} ; }} >{_quote(str(out))} 2>{_quote(str(err))}"
    proc = subprocess.Popen(["bash", "-c", shell], env=env, start_new_session=True)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # a doctor that ran on instead of refusing: this case fails
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    return Ran(code, out.read_text(errors="replace"), err.read_text(errors="replace"))


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, Ran]:
    tmp = tmp_path_factory.mktemp("bad-input")
    for name, content in FILES.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    with ThreadPoolExecutor(max_workers=4) as pool:
        ran = dict(zip([c.name for c in CASES], pool.map(lambda c: _run(c, tmp), CASES), strict=True))
    return {name: Ran(r.code, r.out.replace(str(tmp), "{tmp}"), r.err.replace(str(tmp), "{tmp}"))
            for name, r in ran.items()}


def test_cases_have_distinct_names():
    assert len({c.name for c in CASES}) == len(CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(results, case):
    ran = results[case.name]
    assert "Traceback" not in ran.out + ran.err and "internal error" not in ran.err, ran
    assert ran.code == case.code, ran
    if case.code == 2 and case.phrase:
        assert ran.err.startswith("mgpu-doctor: error: ") and ran.err.count("\n") == 1, ran
        assert case.phrase in ran.err, ran
    elif case.phrase:
        assert case.phrase in ran.out, ran
    if case.absent:
        assert case.absent not in ran.out + ran.err


def test_a_named_pipe_nothing_writes_to_is_an_error_not_a_hang(tmp_path, monkeypatch):
    import threading

    from mgpu_doctor.process import inputs

    pipe = tmp_path / "snap.fifo"
    os.mkfifo(pipe)
    monkeypatch.setattr(inputs, "FIFO_WAIT_S", 0.3)
    with pytest.raises(inputs.InputError, match="a named pipe nothing wrote to within 0.3 s"):
        inputs.read_text(pipe)

    def write() -> None:
        with open(pipe, "w") as fh:
            fh.write('{"a": 1}')

    writer = threading.Thread(target=write)
    writer.start()
    assert inputs.read_text(pipe) == '{"a": 1}'
    writer.join()


def test_results_to_a_full_disk_exits_2_like_junit_after_the_report(tmp_path):
    """`smoke --results /dev/full`: the runs go on and are in the report on stdout, then exit 2 with
    the one error line `--junit /dev/full` gets (the training is stopped at its start, to be quick)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\nif sys.argv and sys.argv[0].endswith('smoke_worker.py'):\n    os._exit(3)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "MGPU_DOCTOR_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).resolve().parent.parent)])
    done = subprocess.run([sys.executable, "-m", "mgpu_doctor", "smoke", "--layers", "dense", "--results",
                           "/dev/full", "--format", "json"], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["smoke_runs"]  # the report of the runs came first
    assert done.stderr.splitlines()[-1] == ("mgpu-doctor: error: cannot write /dev/full: No space left on "
                                            "device (the runs went on: their results are in the report)")
    assert "Traceback" not in done.stderr
