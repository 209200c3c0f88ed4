"""`mgpu-doctor report`, replay of the report with `check --from`, and redaction."""

from __future__ import annotations

import json
import re

import pytest

import mgpu_doctor.probes.nvml as nvml_probe
from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.diagnose import judge_snapshot
from mgpu_doctor.model.redact import Identity, redact_snapshot
from mgpu_doctor.model.snapshot import load_snapshot
from mgpu_doctor.process.masking import mask_env_value
from mgpu_doctor.record import replace
from tests.fake_nvml import FakeGpu, FakeMachine, FakeNvml, bus
from tests.scenarios import SCENARIOS, path_of, with_env

IDENTITY = Identity(("gpu-node-07",), "alice", "/home/alice")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def outcome_summary(snapshot) -> list[tuple[str, str, list[tuple[str, str]]]]:
    report = judge_snapshot(snapshot, CHECKS, command="check", source="", quick=False, tool_version="0")
    return [(c.name, c.status.value, [(f.code, f.severity.value) for f in c.findings]) for c in report.checks]


def write_report(capsys, tmp_path, scenario: str = "sick-box") -> str:
    out = tmp_path / "report.md"
    code, _, err = run(capsys, "report", "--from", str(path_of(scenario)), "-o", str(out))
    assert code == 0 and "report written" in err
    return out.read_text()


# -- the report and its replay ----------------------------------------------------------------

def test_report_has_every_section_and_replays_to_the_same_diagnosis(capsys, tmp_path):
    text = write_report(capsys, tmp_path)
    for heading in ("# mgpu-doctor report: 4 check(s) with problems (2 warning, 2 failed), worst: error",
                    "## Findings", "**Fix:**",
                    "## Smoke trainings", "## Known issues", "## Environment", "### Packages",
                    "### NVIDIA driver and GPUs", "### TensorFlow", "## Checks", "<details>", "```json"):
        assert heading in text, heading
    replayed = load_snapshot(tmp_path / "report.md")
    original = load_snapshot(path_of("sick-box"))
    assert replayed == redact_snapshot(original, Identity.current())
    assert outcome_summary(replayed) == outcome_summary(original)
    code, out, _ = run(capsys, "check", "--from", str(tmp_path / "report.md"))
    assert code == 1 and "report.md" in out.splitlines()[0]


@pytest.mark.parametrize("mangle", [
    lambda t: t.replace("\n", "\r\n"),  # pasted through Windows
    lambda t: t.replace("\n", "\r"),  # old Mac line endings
    lambda t: "\ufeff" + t,  # byte order mark
    lambda t: "Hi, my training hangs, report below.\n\n" + t + "\nThanks!\n",
    lambda t: "\n".join("> " + line for line in t.split("\n")),  # quoted in an email reply
    lambda t: t.split("## Smoke trainings")[0] + t[t.index("<details>"):],  # middle cut out
])
def test_mangled_reports_still_replay(capsys, tmp_path, mangle):
    text = write_report(capsys, tmp_path)
    mangled = tmp_path / "mangled.md"
    mangled.write_bytes(mangle(text).encode())
    code, out, err = run(capsys, "check", "--from", str(mangled))
    assert code == 1 and err == "" and "GPU 1 has 3 uncorrected ECC error(s)" in out


def _cut_json(t: str) -> str:
    return t[: t.index("```json") + 2000]


@pytest.mark.parametrize("mangle,message", [
    (_cut_json, "is cut off: no closing ``` and the JSON ends early (line "),
    (lambda t: t[: t.index("<details>")], "no ```json block found"),
    (lambda t: t.replace('"kernel": "5.15.0-105-generic",\n', ""), "field snapshot.host.kernel: missing"),
    (lambda t: t.replace('"cpu_count": 64', '"cpu_count": 64,,'), "is not valid JSON (line "),
    (lambda t: t.replace('"cpu_count": 64', '"cpu_count": "lots"'), "field snapshot.host.cpu_count: expected int"),
    (lambda t: t.replace('"schema_version": 1,\n  "kind": "mgpu-doctor-snapshot"', '"schema_version": 7,\n  "kind": "mgpu-doctor-snapshot"'),
     "schema_version 7 is not supported"),
])
def test_broken_reports_say_what_is_missing_with_exit_2(capsys, tmp_path, mangle, message):
    text = write_report(capsys, tmp_path)
    broken = tmp_path / "broken.md"
    broken.write_text(mangle(text))
    code, out, err = run(capsys, "check", "--from", str(broken))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert message in err and str(broken) in err


def test_json_report_output_replays_too(capsys, tmp_path):
    _, out, _ = run(capsys, "check", "--from", str(path_of("mixed-models")), "--format", "json", "--no-redact")
    saved = tmp_path / "report.json"
    saved.write_text(out)
    assert load_snapshot(saved) == load_snapshot(path_of("mixed-models"))


def test_text_that_is_neither_json_nor_a_report(capsys, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("my GPUs are broken\n")
    code, _, err = run(capsys, "check", "--from", str(bad))
    assert code == 2 and "not valid JSON" in err and "Markdown report" in err


# -- redaction as a pure function --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_redaction_keeps_every_diagnosis(scenario, name):
    snap = scenario(name)
    redacted = redact_snapshot(snap, IDENTITY)
    assert outcome_summary(redacted) == outcome_summary(snap)
    assert redact_snapshot(redacted, IDENTITY) == redacted  # idempotent
    assert "gpu-node-07" not in redacted.to_json()


def test_gpu_uuids_are_hashed_stably_and_stay_distinct(scenario):
    snap = scenario("healthy-8gpu-nvlink")
    a, b = redact_snapshot(snap, IDENTITY), redact_snapshot(snap, Identity())
    uuids = [g.uuid for g in a.nvml.gpus]
    assert uuids == [g.uuid for g in b.nvml.gpus] and len(set(uuids)) == 8
    assert all(u.startswith("GPU-redacted-") for u in uuids)
    assert not any(g.uuid in a.to_json() for g in snap.nvml.gpus)


def test_cuda_visible_devices_uuid_prefixes_follow_their_gpu(scenario):
    snap = scenario("sick-box")
    full, prefix = snap.nvml.gpus[2].uuid, snap.nvml.gpus[1].uuid[:12]
    snap = with_env(snap, CUDA_VISIBLE_DEVICES=f"{full},{prefix}")
    redacted = redact_snapshot(snap, IDENTITY)
    assert redacted.env["CUDA_VISIBLE_DEVICES"] == f"{redacted.nvml.gpus[2].uuid},{redacted.nvml.gpus[1].uuid}"
    assert outcome_summary(redacted) == outcome_summary(snap)


def test_paths_lose_home_user_and_host(scenario):
    snap = scenario("sick-box")
    python = replace(snap.python, executable="/home/alice/envs/train/bin/python",
                     site_packages=["/scratch/alice/site", "/home/bob/x", "/srv/gpu-node-07/lib"])
    redacted = redact_snapshot(replace(snap, python=python), IDENTITY)
    assert redacted.python.executable == "~/envs/train/bin/python"
    assert redacted.python.site_packages[:2] == ["/scratch/<user>/site", "/home/<user>/x"]
    assert re.fullmatch(r"/srv/host-[0-9a-f]{10}/lib", redacted.python.site_packages[2])


@pytest.mark.parametrize("name,value,masked", [
    ("TF_HUB_TOKEN", "abc", "***"),
    ("KERAS_API_KEY", "abc", "***"),
    ("NCCL_DEBUG", "INFO", "INFO"),
    ("TF_URL", "https://bob:hunter2@example.com/x", "https://***@example.com/x"),
    ("TF_OPTS", "--password=hunter2 --x=1", "--password=*** --x=1"),
    ("TF_X", "ghp_0123456789abcdefABCDEF0123456789", "***"),
    ("TF_X", "Zx9aLkQ2mP0rT7vW3yB5nC8dE1fG4hJ6", "***"),
    ("XLA_FLAGS", "--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/tmp/x",
     "--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/tmp/x"),
    ("CUDA_VISIBLE_DEVICES", "0,1", "0,1"),
])
def test_credential_looking_values_are_masked(name, value, masked):
    assert mask_env_value(name, value) == masked


# -- planted secrets never reach any output ----------------------------------------------------

SECRETS = ("secret-host-zx81", "zorblaxuser", "hunter2", "ghp_SECRET0123456789abcdefABCDEF01",
           "5ec7e75e", "AWSSECRETVALUE")


@pytest.fixture
def planted(monkeypatch, tmp_path):
    """A machine whose hostname, user, home, environment and GPU UUID carry secrets."""
    home = tmp_path / "zorblaxuser"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USER", "zorblaxuser")
    monkeypatch.setenv("LOGNAME", "zorblaxuser")
    monkeypatch.setattr("platform.node", lambda: "secret-host-zx81")
    monkeypatch.setenv("TF_HUB_TOKEN", "ghp_SECRET0123456789abcdefABCDEF01")
    monkeypatch.setenv("NCCL_PROXY", "http://zorblaxuser:hunter2@proxy.secret-host-zx81:3128")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "AWSSECRETVALUE")
    monkeypatch.setenv("KERAS_HOME", f"{home}/.keras")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5ec7e75e-aaaa-bbbb-cccc-ddddeeeeffff,1")
    fleet = [FakeGpu(uuid="GPU-5ec7e75e-aaaa-bbbb-cccc-ddddeeeeffff", bus_id=bus(0)),
             FakeGpu(uuid="GPU-5ec7e75e-1111-2222-3333-444455556666", bus_id=bus(1))]
    monkeypatch.setattr(nvml_probe, "load_pynvml", lambda: FakeNvml(FakeMachine(gpus=fleet)))
    monkeypatch.chdir(home)
    return home


def test_planted_secrets_appear_in_no_output(capsys, planted):
    outputs = {}
    code, outputs["snapshot"], _ = run(capsys, "snapshot", "--quick")
    assert code == 0
    (planted / "snap.json").write_text(outputs["snapshot"])
    for fmt in ("human", "json", "markdown", "html"):
        code, outputs[fmt], _ = run(capsys, "check", "--from", str(planted / "snap.json"), "--format", fmt,
                                    "-v", "--junit", str(planted / "j.xml"))
        assert code in (0, 1)
    outputs["junit"] = (planted / "j.xml").read_text()
    code, outputs["live-json"], _ = run(capsys, "check", "--quick", "--format", "json", "--require-gpus", "3")
    code, outputs["report"], _ = run(capsys, "report", "--quick")
    assert code == 0
    # The planted facts were really gathered (so their absence means something).
    data = json.loads(outputs["live-json"])
    assert len(data["snapshot"]["nvml"]["gpus"]) == 2 and "NCCL_PROXY" in data["snapshot"]["env"]
    assert data["snapshot"]["env"]["CUDA_VISIBLE_DEVICES"].startswith("GPU-redacted-")
    assert data["snapshot"]["env"]["KERAS_HOME"] == "~/.keras"
    for name, text in outputs.items():
        for secret in SECRETS:
            assert secret.lower() not in text.lower(), (name, secret)


def test_no_redact_keeps_identity_but_never_credentials(capsys, planted):
    code, out, _ = run(capsys, "snapshot", "--quick", "--no-redact")
    data = json.loads(out)
    assert data["host"]["hostname"] == "secret-host-zx81"
    assert data["nvml"]["gpus"][0]["uuid"] == "GPU-5ec7e75e-aaaa-bbbb-cccc-ddddeeeeffff"
    assert "hunter2" not in out and "ghp_SECRET" not in out and "AWSSECRETVALUE" not in out
