"""The CI gate: requirements, the acknowledge file, JUnit for Jenkins/GitLab, the JSON Schema."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from importlib import resources

import jsonschema
import pytest

from mgpu_doctor import record as records
from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.diagnose import judge_snapshot
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.gate.acks import apply_acks, parse_acks
from mgpu_doctor.gate.requirements import (
    LayerOutcome,
    RequirementSyntaxError,
    check_gpus,
    check_tensorflow,
    layer_findings,
    parse_layers,
    parse_tensorflow_spec,
)
from mgpu_doctor.model.findings import Severity
from mgpu_doctor.model.smoke_runs import SmokeRun
from mgpu_doctor.model.unavailable import skipped
from mgpu_doctor.record import replace
from tests.scenarios import SCENARIOS, path_of, with_env

TODAY = dt.date(2026, 6, 1)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def codes(findings) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in findings]


# -- requirements ---------------------------------------------------------------------------

def test_gpu_requirement_uses_tensorflows_view_when_known(scenario):
    snap = scenario("gpu-held-by-other-process")  # 4 GPUs, TensorFlow sees 4
    assert codes(check_gpus(4, resolve(snap))) == [("require.gpus-met", Severity.OK)]
    assert codes(check_gpus(5, resolve(snap))) == [("require.gpus-missing", Severity.ERROR)]
    mig = scenario("mig-enabled")  # NVML: 2 GPUs, TensorFlow: 1
    assert codes(check_gpus(2, resolve(mig))) == [("require.gpus-missing", Severity.ERROR)]


def test_gpu_requirement_in_quick_mode_counts_cuda_visible_gpus_and_says_so(scenario):
    snap = replace(scenario("sick-box"), tensorflow=skipped("--quick", cause="quick"))
    [finding] = check_gpus(4, resolve(snap))
    assert finding.severity is Severity.INFO and "not checked" in finding.title and finding.fix
    hidden = with_env(snap, CUDA_VISIBLE_DEVICES="0,1")
    [finding] = check_gpus(4, resolve(hidden))
    assert finding.code == "require.gpus-missing" and "2 usable" in finding.title


def test_gpu_requirement_without_nvml_or_tensorflow_is_an_error_not_a_pass(scenario):
    snap = replace(scenario("no-driver-no-tensorflow"))
    [finding] = check_gpus(1, resolve(snap))
    assert finding.code == "require.gpus-unverified" and finding.severity is Severity.ERROR
    assert finding.fix


@pytest.mark.parametrize("spec,expected", [
    (">=2.16", "require.tensorflow-met"),
    (">=2.22", "require.tensorflow-version"),
    ("==2.21.*", "require.tensorflow-met"),
])
def test_tensorflow_requirement_against_the_imported_version(scenario, spec, expected):
    [finding] = check_tensorflow(spec, resolve(scenario("sick-box")))
    assert finding.code == expected


def test_tensorflow_requirement_edge_cases(scenario):
    quick = replace(scenario("sick-box"), tensorflow=skipped("--quick", cause="quick"))
    assert codes(check_tensorflow(">=2.16", resolve(quick))) == [("require.tensorflow-met", Severity.INFO)]
    assert codes(check_tensorflow(">=2.22", resolve(quick))) == [("require.tensorflow-version", Severity.ERROR)]
    assert codes(check_tensorflow(">=2.16", resolve(scenario("tensorflow-import-fails")))) == [
        ("require.tensorflow-broken", Severity.ERROR)]
    assert codes(check_tensorflow(">=2.16", resolve(scenario("no-driver-no-tensorflow")))) == [
        ("require.tensorflow-missing", Severity.ERROR)]
    nightly = replace(scenario("sick-box"), tensorflow=replace(scenario("sick-box").tensorflow,
                                                                version="2.22.0.dev20260301"))
    assert codes(check_tensorflow(">=2.22", resolve(nightly))) == [("require.tensorflow-unverified", Severity.ERROR)]


def test_layer_requirement_is_a_pure_function_of_the_smoke_outcomes():
    assert codes(layer_findings(("gru",), None)) == [("require.layers-unverified", Severity.ERROR)]
    passed = {"gru": LayerOutcome.PASSED, "lstm": LayerOutcome.PASSED}
    assert codes(layer_findings(("gru", "lstm"), passed)) == [("require.layers-met", Severity.OK)]
    mixed = {"gru": LayerOutcome.FAILED, "lstm": LayerOutcome.NOT_RUN}
    found = layer_findings(("gru", "lstm", "dense"), mixed)
    assert codes(found) == [("require.layers-failed", Severity.ERROR), ("require.layers-unverified", Severity.ERROR)]
    assert "gru" in found[0].title and "lstm, dense" in found[1].title


@pytest.mark.parametrize("bad", ["2.16", "", ">>2", "latest"])
def test_bad_tensorflow_specifiers(bad):
    with pytest.raises(RequirementSyntaxError):
        parse_tensorflow_spec(bad)


def test_layer_names_are_validated_and_normalised():
    assert parse_layers("GRU, lstm,gru") == ("gru", "lstm")
    with pytest.raises(RequirementSyntaxError, match="unknown layer 'transformer'"):
        parse_layers("transformer")


def test_requirements_on_the_command_line(capsys):
    code, out, _ = run(capsys, "check", "--from", str(path_of("healthy-8gpu-nvlink")), "--format", "json",
                       "--require-gpus", "8", "--require-tensorflow", ">=2.16")
    data = json.loads(out)
    assert code == 0
    assert [c["status"] for c in data["checks"] if c["name"].startswith("require-")] == ["passed", "passed"]
    code, out, _ = run(capsys, "check", "--from", str(path_of("healthy-8gpu-nvlink")),
                       "--require-layers", "gru")
    assert code == 1 and "not verified: the smoke trainings did not run" in out


@pytest.mark.parametrize("argv,message", [
    (["--require-gpus", "two"], "--require-gpus wants a whole number"),
    (["--require-gpus", "0"], "at least 1"),
    (["--require-tensorflow", "2.16"], "has no operator"),
    (["--require-tensorflow", "=>2.16"], "not a PEP 440 specifier"),
    (["--require-layers", "gru,rnn"], "unknown layer 'rnn'"),
    (["--fail-on", "critical"], "invalid choice: 'critical'"),
])
def test_bad_gate_syntax_is_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, "check", "--from", str(path_of("sick-box")), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


# -- acknowledge file -----------------------------------------------------------------------

ACKS = """
[[acknowledge]]
code = "gpu.ecc-uncorrected"
reason = "GPU 1 is being replaced (INFRA-1)"
expires = 2026-12-31

[[acknowledge]]
code = "gpu.compute-prohibited"
reason = "old ticket"
expires = "2026-01-31"
"""


@pytest.fixture
def pinned_today(monkeypatch):
    """The CLI's clock pinned: the acknowledgements in ACKS hold (or have expired) on TODAY, and
    not only until the real date passes them."""
    import mgpu_doctor.diagnose

    monkeypatch.setattr(mgpu_doctor.diagnose, "today", lambda: TODAY)
    return TODAY


def test_acknowledged_finding_is_listed_but_does_not_fail_the_gate(capsys, tmp_path, monkeypatch, pinned_today):
    ack = tmp_path / "acks.toml"
    ack.write_text(ACKS.replace("2026-01-31", "2026-09-30"))
    code, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--ack", str(ack))
    assert code == 0, out
    assert "acknowledged until 2026-12-31" in out and "acknowledged until 2026-09-30" in out
    assert "GPU 1 is being replaced (INFRA-1)" in out and "2 acknowledged" in out
    # The same file found as .mgpu-doctor.toml in the working directory.
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mgpu-doctor.toml").write_text(ack.read_text())
    code, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["summary"]["acknowledged"] == 2 and data["summary"]["worst"] == "error"
    assert data["summary"]["gate_worst"] == "warning"


def test_expired_acknowledgement_fails_the_gate_again(capsys, tmp_path, pinned_today):
    ack = tmp_path / "acks.toml"
    ack.write_text(ACKS)
    code, out, _ = run(capsys, "check", "--from", str(path_of("sick-box")), "--ack", str(ack))
    assert code == 1 and "acknowledgement EXPIRED on 2026-01-31" in out
    junit = tmp_path / "j.xml"
    run(capsys, "check", "--from", str(path_of("sick-box")), "--ack", str(ack), "--junit", str(junit))
    suite = ET.parse(junit).getroot()
    assert suite.find("testcase[@name='gpu-compute-mode']/failure") is not None
    assert suite.find("testcase[@name='gpu-ecc']/failure") is None
    assert "acknowledged until 2026-12-31" in suite.find("testcase[@name='gpu-ecc']/system-out").text


def test_apply_acks_is_pure_and_dated(scenario):
    report = judge_snapshot(scenario("sick-box"), CHECKS, command="check", source="t", quick=False,
                          tool_version="0")
    entries = parse_acks({"acknowledge": [{"code": "gpu.ecc-uncorrected", "reason": "r",
                                           "expires": dt.date(2026, 6, 1)}]}, "f")
    on_the_day = replace(report, checks=apply_acks(report.checks, entries, TODAY))
    day_after = replace(report, checks=apply_acks(report.checks, entries, TODAY + dt.timedelta(days=1)))
    assert len(on_the_day.acknowledged) == 1 and day_after.acknowledged == []
    assert report.acknowledged == []  # the input is untouched


def test_known_issue_ids_match_findings_of_the_known_issues_check():
    from mgpu_doctor.model.findings import Finding

    [entry] = parse_acks({"acknowledge": [{"known_issue": "tf-gru-mirrored-hang", "reason": "r",
                                           "expires": TODAY}]}, "f")
    assert entry.matches(Finding("known-issue.tf-gru-mirrored-hang", Severity.ERROR, "t"))
    assert not entry.matches(Finding("known-issue.other", Severity.ERROR, "t"))


# A merged entry of the bundled matrix: the ACS hang of NCCL 2.25-2.27 became the PCIe ACS/IOMMU entry.
OLD_ACS, ACS = "nccl-2079-allreduce-deadlock-rtx5880-ada-amd-acs", "nccl-667-p2p-hang-pxb-pix-vtd"


@pytest.mark.parametrize("prefix", ["known-issue.", "smoke.known-issue.", "hang.known-issue.",
                                    "smoke.not-reproduced."])
def test_a_code_naming_a_merged_known_issue_holds_for_the_entry_it_became(prefix):
    from mgpu_doctor.gate.acks import merged_notes
    from mgpu_doctor.matrix.index import load_index
    from mgpu_doctor.matrix.paths import bundled_matrix_dir
    from mgpu_doctor.model.findings import Finding

    replaced = load_index(bundled_matrix_dir()).replaced
    assert replaced[OLD_ACS] == ACS
    [entry] = parse_acks({"acknowledge": [{"code": prefix + OLD_ACS, "reason": "r", "expires": TODAY}]}, "f")
    assert entry.named_issue() == OLD_ACS  # so the merged ids are read at all
    assert entry.matches(Finding(prefix + ACS, Severity.WARNING, "t"), replaced)
    assert not entry.matches(Finding(prefix + ACS, Severity.WARNING, "t"))  # without the merges: no
    other = "hang.known-issue." if prefix != "hang.known-issue." else "smoke.known-issue."
    assert not entry.matches(Finding(other + ACS, Severity.WARNING, "t"), replaced)  # one code, one finding
    assert merged_notes([entry], replaced) == [f"Acknowledge file f: acknowledge[1] names known issue {OLD_ACS!r}, merged "
                                               f"into {ACS!r} (one cause): it applies to that entry; write "
                                               "the new id."]


def test_every_code_that_carries_a_known_issue_id_is_read_as_one():
    from mgpu_doctor.code_table import all_declared
    from mgpu_doctor.model.codes import KNOWN_ISSUE_PREFIXES

    carrying = {code.removesuffix("ID") for code in all_declared() if code.endswith(".ID")}
    assert carrying == set(KNOWN_ISSUE_PREFIXES)


@pytest.mark.parametrize("text,message", [
    ('[[acknowledge]]\ncode = "x"\nexpires = 2026-01-01\n', "acknowledge[1]: field 'reason' is missing"),
    ('[[acknowledge]]\ncode = "x"\nreason = "r"\nexpires = "next week"\n', "acknowledge[1]: field 'expires' is not a date"),
    ('[[acknowledge]]\ncode = "x"\nreason = "r"\n', "field 'expires' is missing"),
    ('[[acknowledge]]\ncode = "x"\nreason = "r"\nexpires = 2026-01-01\nuntil = 1\n', "unknown field 'until'"),
    ('[[acknowledge]]\nreason = "r"\nexpires = 2026-01-01\n', "exactly one of 'code'"),
    ('[[acknowledge]]\ncode = "x"\nknown_issue = "y"\nreason = "r"\nexpires = 2026-01-01\n', "exactly one of 'code'"),
    ('[[acknowledge]\n', "not valid TOML"),
    ('[[ack]]\ncode = "x"\n', "unknown top-level key 'ack'"),
])
def test_bad_acknowledge_files_are_one_line_exit_2(capsys, tmp_path, text, message):
    ack = tmp_path / "acks.toml"
    ack.write_text(text)
    code, out, err = run(capsys, "check", "--from", str(path_of("sick-box")), "--ack", str(ack))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert message in err and str(ack) in err


def test_missing_ack_file_given_explicitly(capsys, tmp_path):
    code, _, err = run(capsys, "check", "--from", str(path_of("sick-box")), "--ack", str(tmp_path / "no.toml"))
    assert code == 2 and "no such file" in err


def test_an_entry_that_matches_nothing_is_noted(capsys, tmp_path, pinned_today):
    ack = tmp_path / "acks.toml"
    ack.write_text('[[acknowledge]]\ncode = "gpu.gone"\nreason = "r"\nexpires = 2099-01-01\n')
    code, out, _ = run(capsys, "check", "--from", str(path_of("healthy-8gpu-nvlink")), "--ack", str(ack))
    assert code == 0 and "acknowledge[1] matches no finding" in out


# -- JUnit for Jenkins and GitLab -------------------------------------------------------------

def test_junit_carries_what_jenkins_and_gitlab_read(capsys, tmp_path):
    junit = tmp_path / "doctor.xml"
    run(capsys, "check", "--from", str(path_of("sick-box")), "--junit", str(junit),
        "--require-gpus", "8")
    suite = ET.parse(junit).getroot()
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == len(CHECKS) + 1
    assert all(c.get("name") and c.get("classname") and c.get("time") == "0" for c in cases)
    counted = {k: int(suite.get(k)) for k in ("failures", "errors", "skipped")}
    assert counted == {"failures": sum(1 for c in cases if c.find("failure") is not None),
                       "errors": sum(1 for c in cases if c.find("error") is not None),
                       "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
    failure = suite.find("testcase[@name='require-gpus']/failure")
    # Jenkins shows the message, GitLab the element text: both carry the title and the fix.
    assert failure.get("message").startswith("8 GPU(s) required, 4 usable. Fix: Run on a machine")
    assert "8 GPU(s) required" in failure.text and "fix: Run on a machine" in failure.text
    assert suite.find("testcase[@name='cuda-visible-devices']/skipped").text


# -- JSON Schema ----------------------------------------------------------------------------

def report_schema() -> dict:
    return json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(report_schema())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_json_report_validates(capsys, name):
    _, out, _ = run(capsys, "check", "--from", str(path_of(name)), "--format", "json", "--require-gpus", "2",
                    "--require-tensorflow", ">=2.16", "--require-layers", "gru")
    jsonschema.Draft202012Validator(report_schema(), format_checker=jsonschema.FormatChecker()).validate(
        json.loads(out))


def test_live_quick_report_validates_and_schema_rejects_a_broken_one(capsys, tmp_path, pinned_today):
    ack = tmp_path / "a.toml"
    ack.write_text('[[acknowledge]]\ncode = "gpus.none"\nreason = "CPU runner"\nexpires = 2099-01-01\n')
    _, out, _ = run(capsys, "check", "--quick", "--format", "json", "--ack", str(ack))
    data = json.loads(out)
    validator = jsonschema.Draft202012Validator(report_schema())
    validator.validate(data)
    data["checks"][0]["status"] = "fine"
    del data["snapshot"]["host"]["hostname"]
    errors = {e.json_path for e in validator.iter_errors(data)}
    assert {"$.checks[0].status", "$.snapshot.host"} <= errors


def test_schema_describes_every_dataclass_field():
    """A field added to the report or snapshot must be documented in the shipped schema."""

    from mgpu_doctor.environment import library_view
    from mgpu_doctor.model import findings, pasted, report, snapshot
    from mgpu_doctor.model.device_row import DeviceRow
    from mgpu_doctor.model.drift import Drift, DriftRow
    from mgpu_doctor.model.multiworker import MultiWorkerRun, WorkerOutcome
    from mgpu_doctor.model.smoke_runs import LeakCycle
    from mgpu_doctor.smoke.checkpoint import CheckpointStep

    defs = report_schema()["$defs"]
    pairs = {
        "finding": findings.Finding, "acknowledgement": findings.Acknowledgement,
        "check": findings.CheckOutcome, "snapshot": snapshot.Snapshot, "host": snapshot.HostFacts,
        "python": snapshot.PythonFacts, "packages": snapshot.PackageFacts, "gpu": snapshot.GpuFacts,
        "gpu_process": snapshot.GpuProcess, "gpu_link": snapshot.GpuLink, "nvml": snapshot.NvmlFacts,
        "tf_device": snapshot.TfDevice, "tensorflow": snapshot.TensorFlowFacts,
        "libraries": snapshot.LibraryFacts, "library_copy": snapshot.LibraryCopy,
        "search_dir": snapshot.SearchDir, "cuda_toolkit": snapshot.CudaToolkit,
        "smoke_run": SmokeRun, "multiworker_run": MultiWorkerRun, "multiworker_worker": WorkerOutcome,
        "checkpoint_step": CheckpointStep, "leak_cycle": LeakCycle,
        "device_row": DeviceRow, "libraries_view": library_view.LibrariesView,
        "library_row": library_view.LibraryRow, "library_copy_view": library_view.CopyView,
        "pasted": pasted.PastedFacts, "pasted_part": pasted.PastedPart, "pasted_version": pasted.PastedVersion,
        "pasted_log_line": pasted.LogLine, "pasted_image": pasted.PastedImage, "pasted_launch": pasted.PastedLaunch,
        "drift": Drift, "drift_row": DriftRow,
    }
    for name, cls in pairs.items():
        assert {f.name for f in records.fields(cls)} <= set(defs[name]["properties"]), name
    top = report_schema()["properties"]
    assert {f.name for f in records.fields(report.Report)} <= set(top)


@pytest.mark.parametrize("argv", [
    ("fleet", str(path_of("healthy-8gpu-nvlink")), str(path_of("mixed-models"))),
    ("matrix", "query", "tensorflow==1.12", "keras==2.2.4", "gpus=2", "layers=gru"),
])
def test_fleet_and_query_reports_validate_against_the_schema(capsys, argv):
    """Reports without one machine's snapshot (fleet, matrix query) are described too."""
    _, out, _ = run(capsys, *argv, "--format", "json")
    data = json.loads(out)
    assert data["snapshot"] is None
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    data["snapshot"] = {"host": {}}
    assert not jsonschema.Draft202012Validator(report_schema()).is_valid(data)
