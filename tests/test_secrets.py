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

from mgpu_doctor.process.masking import mask_credentials, mask_env_value
from tests.scenarios import path_of

USER = "planteduser"
PEM = ("-----BEGIN PRIVATE KEY-----\n"
       "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
       "MzEfYyjiWA4R4xM2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
       "PEMtail9Qw==\n"
       "-----END PRIVATE KEY-----")
# One secret of each kind docs/reliability.md lists: (the value planted, a part that must not show).
SECRET_KINDS = {
    "URL with a password": ("https://erin:urlPassPW6@proxy.corp:8080/x", "urlPassPW6"),
    "user:password@host": ("frank:barePassPW7@10.9.8.7:2222", "barePassPW7"),
    "user@domain:password@host": ("gina@corp:domPassPW8@10.9.8.6:1234", "domPassPW8"),
    "GitHub token": ("ghp_PLANTEDabcdefghijklmnopqrstuvwxyz01", "PLANTEDabcdefghij"),
    "GitHub fine-grained token": ("github_pat_11PLANTED0abcdefghijkl_mnopqrstuvwxyz", "11PLANTED0abcdef"),
    "GitLab token": ("glpat-PLANTEDghijKLMNOPQRSTu", "PLANTEDghijKLMN"),
    "Hugging Face token": ("hf_PLANTEDhijklmnopqrstuvwxyzABCD", "PLANTEDhijklmnop"),
    "OpenAI-style key": ("sk-proj-PLANTEDhijklmnopqrstuv", "PLANTEDhijklmnopq"),
    "AWS access key id": ("AKIAPLANTEDN7EXAMPLE", "AKIAPLANTEDN7EXAMPLE"),
    "Slack token": ("xoxb-1234567890-PLANTEDhij", "PLANTEDhij"),
    "JSON Web Token": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlUGxhbnQ", "eyJzdWIiOiJwbGFudGVkIn0"),
    "Bearer or Basic credential": ("Authorization: Bearer UExBTlRFRGJlYXJlcjEy", "UExBTlRFRGJlYXJlcjEy"),
    "key=value": ("password=PLANTEDkvValue", "PLANTEDkvValue"),
    "secret-named variable": ("PLANTEDbyName", "PLANTEDbyName"),
    "generated-looking value": ("Q2xhdWRlUGxhbnRlZFNlY3JldDEyMzQ1Njc4OTA", "Q2xhdWRlUGxhbnRlZFNlY3JldDEy"),
    "PEM block": (PEM, "PEMtail9Qw"),
    "secret-named assignment": ("aws_secret_access_key=PLANTEDawsSecret1/K7MDENG", "PLANTEDawsSecret1"),
    "webhook URL": ("https://hooks.slack.com/services/T0PLANT/B0PLANT/PLANTEDslackHook9", "PLANTEDslackHook9"),
    "conda token channel": ("https://conda.anaconda.org/t/PLANTEDcondaTok-77/mychannel", "PLANTEDcondaTok-77"),
}
CREDENTIALS = ("s3cr3tPW1", "hunter2PW2", "p4ssw0rdPW3", "pa55wordPW4", "ghp_abcdefghij", "hf_abcdefghij",
               "plainTokenValue", "kl0pSecretPW5", "MzEfYyjiWA4R4x", *(canary for _, canary in SECRET_KINDS.values()))


def planted_kinds() -> dict[str, str]:
    """Each kind in an environment variable the doctor keeps (TF_ prefix); the secret-named one under
    a name that says it is a secret."""
    return {("TF_PLANTED_API_TOKEN" if kind == "secret-named variable" else f"TF_PLANTED_{i}"): value
            for i, (kind, (value, _)) in enumerate(SECRET_KINDS.items())}


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
        # ... and the checkout under test comes before an installed mgpu-doctor.
        "PYTHONPATH": os.pathsep.join([str(home / "site"), str(Path(__file__).resolve().parent.parent)]),
        **planted_kinds(),
    })
    return env


SITECUSTOMIZE = f"""
import os, sys
if sys.argv and sys.argv[0].endswith("smoke_worker.py"):
    sys.stderr.write("failed at /home/{USER}/proj token=ghp_abcdefghijklmnopqrstuvwxyz0123456789 "
                     "alice:s3cr3tPW1@10.1.2.3:2222 " + os.path.expanduser("~") + " {USER}\\n")
    sys.stderr.write(os.environ["TF_PLANTED_15"] + "\\n")  # a PEM block, short last line and all
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
                   "TF_NOTE": "password=plainTokenValue ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                   **planted_kinds()}
    data["nvml"]["gpus"][0]["name"] = f"A100 {PEM}"  # not only in the environment
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
    ("devices", ["devices"], True),
    ("devices-json", ["devices", "--format", "json"], True),
    ("fleet-markdown", ["fleet", "{tmp}/foreign.json", str(path_of("healthy-8gpu-nvlink")), "--format",
                        "markdown", "--no-redact"], False),
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
    for name in planted_kinds():
        assert name in outputs["check-json"] and name in outputs["from-foreign"], name
    assert "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----" in outputs["check-json"]


def test_the_planted_kinds_are_the_kinds_the_documentation_lists():
    """docs/reliability.md's table of secret kinds and this test plant the same kinds."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "reliability.md").read_text()
    table = docs.split("## Secrets", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("|")[1].strip() for line in table.splitlines()
              if line.startswith("| ") and not line.startswith(("| kind", "|---"))]
    assert listed == list(SECRET_KINDS)


@pytest.mark.parametrize("kind", list(SECRET_KINDS))
def test_each_kind_is_masked_wherever_it_stands(kind):
    value, canary = SECRET_KINDS[kind]
    for text in (value, f"see {value} here", f"TF_X={value}; next"):
        assert canary not in mask_env_value("TF_PLANTED_API_TOKEN", text)
        if kind not in ("secret-named variable", "generated-looking value"):  # those by the variable only
            assert canary not in mask_credentials(text), text


@pytest.mark.parametrize("text,masked", [
    (PEM, "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"),
    (f"key: {PEM} end", "key: *** PRIVATE KEY-----***-----END PRIVATE KEY----- end"),
    (PEM.replace("\n", "\\n"), "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"),
    ("x -----BEGIN CERTIFICATE-----\nMIIB\nAB", "x -----BEGIN CERTIFICATE-----***"),  # no END: to the end
])
def test_a_pem_block_is_masked_whole_from_begin_to_end(text, masked):
    assert mask_credentials(text) == masked


# Shapes that made a backtracking pattern try a long run again from each position inside it.
ADVERSARIAL = ["a", "a:", "a@", "a:b@", "eyJ-", "sk-", "a://b", "aB3", "bearer ", "key=", "a:1,", "a.",
               "-----BEGIN X-----", "x@y:", "@:", "a_key", "token_", "=", "a_key=", "hooks.slack.com/services/a",
               "anaconda.org/t/"]
LINEAR_CHECK = """
import sys, time
from mgpu_doctor.process.masking import mask_credentials, mask_env_value
for unit in {units!r}:
    text = (unit * {size})[:{size}]
    mask_credentials(text), mask_env_value("XLA_FLAGS", text)
"""


def test_masking_takes_linear_time_on_any_text():
    """256 KiB of each shape within 60 s all together on a busy 2-core machine (a few seconds
    alone); the backtracking patterns took hours."""
    code = LINEAR_CHECK.format(units=ADVERSARIAL, size=256 * 1024)
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("text,masked", [
    ("abc-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "abc-***"),
    ("x.eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.", "x.***"),
    ("eyJhbGciOiJIUzI1NiJ9.short.sig", "eyJhbGciOiJIUzI1NiJ9.short.sig"),
    ("1https://u:pw@h/x", "1https://***@h/x"),
    ("a@b:pw@host and c:d", "***@host and c:d"),
    ("a@@b:pw@host", "a@@***@host"),
])
def test_the_linear_patterns_mask_what_the_old_ones_did(text, masked):
    assert mask_credentials(text) == masked


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


def planted_paste() -> str:
    """An issue body with every kind, in a template line, a prose line, a traceback and a TensorFlow
    log line whose token lies past the 300 characters a log line is cut to."""
    kinds = "\n".join(f"- setting {i}: {value}" for i, (value, _) in enumerate(SECRET_KINDS.values()))
    padding = "x" * 290
    return ("### System information\n- TensorFlow version: 2.15.0\n- Python version: 3.11\n" + kinds + "\n\n"
            "```\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            "RuntimeError: upload failed for WANDB_API_KEY=PLANTEDwandbKey0123456789abcdef0123\n"
            f"2024-01-01 10:00:00.000000: W tensorflow/core/x.cc:1] Could not load dynamic library "
            f"'libcudart.so.12'; dlerror: {padding} ghp_PLANTEDcutTokenabcdefghijklmnop12\n```\n")


PASTE_CANARIES = (*(canary for _, canary in SECRET_KINDS.values()), "PLANTEDwandbKey", "PLANTEDcutTok")
PASTE_COMMANDS = [
    ["check", "--from", "{paste}", "-v", "--junit", "{tmp}/paste.xml"],
    ["check", "--from", "{paste}", "--format", "json"],
    ["check", "--from", "{paste}", "--format", "markdown"],
    ["check", "--from", "{paste}", "--format", "html"],
    ["check", "--from", "{paste}", "--format", "json", "--no-redact"],
    ["report", "--from", "{paste}", "-o", "{tmp}/paste-report.md"],
    ["report", "--from", "{paste}", "--format", "html", "-o", "{tmp}/paste-report.html"],
    ["check", "--quick", "--log", "{paste}", "--format", "json", "--no-redact"],
]


def test_no_output_of_a_pasted_text_carries_a_planted_secret(tmp_path):
    paste = tmp_path / "issue.md"
    paste.write_text(planted_paste())
    shown = []
    for argv in PASTE_COMMANDS:
        argv = [a.replace("{paste}", str(paste)).replace("{tmp}", str(tmp_path)) for a in argv]
        proc = subprocess.run([sys.executable, "-m", "mgpu_doctor", *argv], capture_output=True, text=True,
                              errors="replace", timeout=120, cwd=tmp_path, check=False)
        assert proc.returncode in (0, 1), (argv, proc.stderr)
        shown.append(proc.stdout + proc.stderr)
    shown += [(tmp_path / name).read_text() for name in ("paste.xml", "paste-report.md", "paste-report.html")]
    for text in shown:
        leaked = [c for c in PASTE_CANARIES if c in text]
        assert not leaked, (leaked, text[:2000])
    # the lines were there to find, masked: the test is not vacuous
    assert "WANDB_API_KEY=***" in shown[1] and "libcudart.so.12" in shown[1]
