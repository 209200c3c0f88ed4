"""Planted secrets: credentials in every form, a user name and a home directory are put where the
doctor gathers (the environment, TF_CONFIG, XLA_FLAGS, paths, a child's stderr) and into a
snapshot written by another tool; no output of any command, format or file may carry them.

Credentials are masked always, ``--no-redact`` or not; the user name and home directory are
redacted unless ``--no-redact``. Every command runs as a real `python -m mgpu_doctor`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mgpu_doctor.process.masking import mask_credentials
from tests.scenarios import path_of

USER = "planteduser"
CREDENTIALS = ("s3cr3tPW1", "hunter2PW2", "p4ssw0rdPW3", "pa55wordPW4", "ghp_abcdefghij", "hf_abcdefghij",
               "plainTokenValue", "kl0pSecretPW5")


def planted_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "NCCL_", "XLA_", "KERAS_"))}
    env.update({
        "HOME": str(home), "USER": USER, "LOGNAME": USER,
        "TF_CONFIG": json.dumps({"cluster": {"worker": ["alice:s3cr3tPW1@10.1.2.3:2222", "10.1.2.4:2222"]},
                                 "task": {"type": "worker", "index": 1}}),
        "XLA_FLAGS": f"--xla_dump_to=bob:hunter2PW2@dumphost:/dumps --xla_gpu_cuda_data_dir={home}/cuda",
        "NCCL_COMM_ID": "dave@corp:p4ssw0rdPW3@10.0.0.9:1234",
        "TF_PROXY_URL": "https://carol:pa55wordPW4@proxy.corp:8080/x",
        "KERAS_HOME": f"{home}/keras-ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "MGPU_DOCTOR_NOTE": "hf_abcdefghijklmnopqrstuvwxyzABCD",
        "TF_API_TOKEN": "plainTokenValue",
        "LD_LIBRARY_PATH": f"{home}/.local/lib:/home/{USER}/lib",
        "CUDA_HOME": f"/home/{USER}/cuda-12",
        # Each smoke training's child prints secrets to its stderr and dies before importing TensorFlow.
        "PYTHONPATH": str(home / "site"),
    })
    return env


SITECUSTOMIZE = f"""
import os, sys
if sys.argv and sys.argv[0].endswith("smoke_worker.py"):
    sys.stderr.write("failed at /home/{USER}/proj token=ghp_abcdefghijklmnopqrstuvwxyz0123456789 "
                     "alice:s3cr3tPW1@10.1.2.3:2222 " + os.path.expanduser("~") + " {USER}\\n")
    sys.stderr.flush()
    os._exit(3)
"""


def foreign_snapshot() -> str:
    """A snapshot as another tool (or an old version, or --no-redact) wrote it: nothing masked."""
    data = json.loads(path_of("sick-box").read_text())
    data["host"]["hostname"] = "gpu-node-7"
    data["env"] = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["alice:s3cr3tPW1@10.1.2.3:2222"]},
                                            "task": {"type": "worker", "index": 0}}),
                   "XLA_FLAGS": "--xla_dump_to=bob:hunter2PW2@dumphost:/dumps",
                   "NCCL_COMM_ID": "dave@corp:p4ssw0rdPW3@10.0.0.9:1234",
                   "AWS_SECRET_ACCESS_KEY": "kl0pSecretPW5", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyzABCD",
                   "TF_PROXY_URL": "https://carol:pa55wordPW4@proxy.corp:8080/x",
                   "TF_NOTE": "password=plainTokenValue ghp_abcdefghijklmnopqrstuvwxyz0123456789"}
    return json.dumps(data)


# (name, argv, redacted): "{home}" and "{tmp}" are filled in; every command writes into {tmp}.
COMMANDS = [
    ("check-human", ["check", "--quick", "-v", "--junit", "{tmp}/check.xml"], True),
    ("check-json", ["check", "--quick", "--format", "json"], True),
    ("check-markdown", ["check", "--quick", "--format", "markdown"], True),
    ("check-html", ["check", "--quick", "--format", "html"], True),
    ("check-no-redact", ["check", "--quick", "--format", "json", "--no-redact"], False),
    ("snapshot", ["snapshot", "--quick", "-o", "{tmp}/snapshot.json"], True),
    ("snapshot-no-redact", ["snapshot", "--quick", "--no-redact"], False),
    ("report", ["report", "--quick", "-o", "{tmp}/report.md"], True),
    ("libs-json", ["libs", "--quick", "--format", "json"], True),
    ("libs-human", ["libs", "--quick", "-v"], True),
    ("from-foreign", ["check", "--from", "{tmp}/foreign.json", "--format", "json", "--no-redact"], False),
    ("report-from-foreign", ["report", "--from", "{tmp}/foreign.json", "--no-redact"], False),
    ("report-html-from-foreign", ["report", "--from", "{tmp}/foreign.json", "--no-redact", "--format", "html"],
     False),
    ("fleet-json", ["fleet", "{tmp}/foreign.json", str(path_of("healthy-8gpu-nvlink")), "--format", "json"], True),
    ("fleet-human", ["fleet", "{tmp}/foreign.json", str(path_of("healthy-8gpu-nvlink")), "-v",
                     "--junit", "{tmp}/fleet.xml"], True),
    ("smoke-tf-config-error", ["smoke"], True),
    ("smoke-results", ["smoke", "--layers", "dense", "--results", "{tmp}/results.jsonl", "--format", "json",
                       "--tf-config", ""], True),
]


def _run(name: str, argv: list[str], tmp: Path, env: dict[str, str]) -> str:
    argv = [a.replace("{tmp}", str(tmp)) for a in argv]
    if name == "smoke-results":
        argv = argv[:-2]  # the single-host smoke: TF_CONFIG unset for this one
        env = {k: v for k, v in env.items() if k != "TF_CONFIG"}
    proc = subprocess.run([sys.executable, "-m", "mgpu_doctor", *argv], env=env, capture_output=True,
                          text=True, errors="replace", timeout=300, cwd=tmp, check=False)
    assert "Traceback" not in proc.stdout + proc.stderr and "internal error" not in proc.stderr, (name, proc.stderr)
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("secrets")
    home = tmp / "home" / USER
    (home / "site").mkdir(parents=True)
    (home / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp / "foreign.json").write_text(foreign_snapshot())
    env = planted_env(home)
    with ThreadPoolExecutor(max_workers=4) as pool:
        printed = dict(zip([c[0] for c in COMMANDS],
                           pool.map(lambda c: _run(c[0], c[1], tmp, env), COMMANDS), strict=True))
    files = {"check.xml": "check-human", "snapshot.json": "snapshot", "report.md": "report",
             "fleet.xml": "fleet-human", "results.jsonl": "smoke-results"}
    for file, command in files.items():
        printed[f"{command} ({file})"] = (tmp / file).read_text()
    return printed


@pytest.mark.parametrize("name", [c[0] for c in COMMANDS] + [
    "check-human (check.xml)", "snapshot (snapshot.json)", "report (report.md)", "fleet-human (fleet.xml)",
    "smoke-results (results.jsonl)"])
def test_no_output_carries_a_planted_secret(outputs, name):
    text = outputs[name]
    assert text.strip()
    leaked = [s for s in CREDENTIALS if s in text]
    assert not leaked, (leaked, text[:3000])
    redacted = next((r for n, _, r in COMMANDS if name.split(" ")[0] == n), True)
    if redacted and not name.startswith(("from-foreign", "fleet")):  # those hold no local identity
        assert USER not in text, text[:3000]


def test_the_secrets_were_there_to_find(outputs):
    """The planted values reach the outputs (masked): the test above is not vacuous."""
    assert "***@10.1.2.3:2222" in outputs["check-json"]
    assert "--xla_dump_to=***@dumphost:/dumps" in outputs["check-json"]
    assert "***@10.0.0.9:1234" in outputs["fleet-json"]
    assert USER in outputs["check-no-redact"] and "/home/<user>/proj" in outputs["smoke-results (results.jsonl)"]
    assert "'***@10.1.2.3:2222': TF_CONFIG addresses take no user name" in outputs["smoke-tf-config-error"]


@pytest.mark.parametrize("text,masked", [
    ("alice:s3cr3t@10.1.2.3:2222", "***@10.1.2.3:2222"),
    ('["alice:pw@h1:1", "bob:pw2@h2:2"]', '["***@h1:1", "***@h2:2"]'),
    ('\\"alice:pw@h1:1\\"', '\\"***@h1:1\\"'),
    ("--xla_dump_to=bob:hunter2@dumphost:/dumps", "--xla_dump_to=***@dumphost:/dumps"),
    ("user@corp:pass@host", "***@host"),
    ("user:p@ss@host:22", "***@host:22"),
    ("https://carol:pw@proxy:8080", "https://***@proxy:8080"),
])
def test_user_password_forms_are_masked(text, masked):
    assert mask_credentials(text) == masked


@pytest.mark.parametrize("text", [
    "10.0.0.1:2222", "[::1]:2222", "localhost:8080/path@v1", "alice@example.com", "git@github.com:org/repo.git",
    "nvcr.io/nvidia/tensorflow:24.01-tf2-py3@sha256:0123abcd", "GPU-1a2b3c4d-aaaa-bbbb-cccc-0123456789ab",
    "MIG-GPU-1a2b3c4d/1/0", "/home/u/x:/usr/lib:/opt/cuda-12.5/lib64", "00000000:07:00.0", "2.16.1+cu121",
    "tensorflow==2.16 keras==3.3.3", "KEY==VERSION", "12:30:01 started", "sm_90:compute_90",
])
def test_ordinary_values_are_not_masked(text):
    assert mask_credentials(text) == text
