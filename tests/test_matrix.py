"""The known-issue matrix: versions, matching, the bundled data, smoke matching and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from mgpu_doctor.checks.known_issues import check_known_issues, make_check_function
from mgpu_doctor.cli import main
from mgpu_doctor.environment.matrix_view import environment_from_resolved
from mgpu_doctor.environment.resolve import resolve
from mgpu_doctor.matrix.environment import BadEnvironment, Environment, parse_query
from mgpu_doctor.matrix.known_issues import load_known_issue_files, load_matrix
from mgpu_doctor.matrix.match import Verdict, assess, example_problems
from mgpu_doctor.matrix.paths import bundled_matrix_dir
from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Finding, Severity
from mgpu_doctor.model.snapshot import Snapshot, load_snapshot
from mgpu_doctor.model.unavailable import absent, skipped
from mgpu_doctor.model.versions import Tri, parse_specifier, parse_version, version_in
from mgpu_doctor.record import replace
from mgpu_doctor.smoke.known_issues import smoke_findings, with_known_issues
from tests.checking import judge

DATA = Path(__file__).parent / "data"
BROKEN = DATA / "matrix-broken"
TEAM = DATA / "matrix-team"
MATRIX = load_matrix(bundled_matrix_dir())


def environment_from_snapshot(snapshot: Snapshot) -> Environment:
    return environment_from_resolved(resolve(snapshot))


# --- versions -----------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "spec", "expected"), [
    ("2.12.0", ">=2.10,<2.13", Tri.YES),
    ("2.13.0", ">=2.10,<2.13", Tri.NO),
    ("2.1.0+cu121", "==2.1.0", Tri.YES),  # local label: how it was built, not which release
    ("2.16.0rc1", ">=2.16", Tri.UNKNOWN),  # an rc sits between releases
    ("2.16.0rc1", "<2.15", Tri.NO),
    ("2.22.0.dev20260301", ">=2.21", Tri.YES),
    ("2.20.0.dev20250211", ">=2.18.0.dev0,<2.21", Tri.YES),  # the specifier names nightlies itself
    ("2.0.0b0", "==2.0.0b0", Tri.YES),
    ("9", ">=8.0,<9.1", Tri.UNKNOWN),  # cuDNN "9" from TensorFlow's build info is any 9.x
    ("9", ">=9,<10", Tri.YES),
    ("9", "==9.3.*", Tri.UNKNOWN),  # every 9.x: 9.3 is one of them, 9.1 is not
    ("11", ">=11.2", Tri.UNKNOWN),  # CUDA 11 is not 11.0
    ("12", "==11.*", Tri.NO),
    ("1.12", ">=1.10,<1.13", Tri.YES),
    ("1.12", "==1.12.0", Tri.UNKNOWN),
    ("555.42.02", ">=555.42.2", Tri.YES),
    ("7.1.4 (from the log)", "==7.1.*", Tri.YES),
    ("not-a-version", ">=1", Tri.UNKNOWN),
    ("", ">=1", Tri.UNKNOWN),
    (None, ">=1", Tri.UNKNOWN),
])
def test_version_in(version: str | None, spec: str, expected: Tri) -> None:
    assert version_in(version, parse_specifier(spec)) is expected


@pytest.mark.parametrize("bad", ["", ">=2.0,,<", "===2.1", "==2.1.0+cu121", "~=1"])
def test_bad_specifiers_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_specifier(bad)


def test_parse_version_never_raises() -> None:
    assert parse_version("garbage") is None
    assert str(parse_version("v2.4.1")) == "2.4.1"


# --- the bundled matrix -------------------------------------------------------------------

def test_bundled_matrix_is_valid_and_every_example_behaves() -> None:
    assert not MATRIX.problems
    assert len(MATRIX.issues) >= 30
    problems = [p for i in MATRIX.issues for p in example_problems(i)]
    assert problems == []
    assert all(i.examples for i in MATRIX.issues)
    assert all(any(e.matches for e in i.examples) and any(not e.matches for e in i.examples)
               for i in MATRIX.issues)


def test_every_bundled_entry_cites_a_source_and_verified_issue_urls_are_threads() -> None:
    for issue in MATRIX.issues:
        assert issue.sources, issue.id
        for source in issue.sources:
            if source.kind == "issue":
                assert source.url.startswith("https://github.com/") and "/issues/" in source.url


def test_the_seed_problems_are_in_the_matrix() -> None:
    ids = {i.id for i in MATRIX.issues}
    assert {"keras-rnn-hang-2gpu-tf110-112", "keras-memory-leak-tf19-keras222",
            "multi-gpu-model-batchnorm-nan-empty-replica", "multi-gpu-model-save-load-nesting",
            "multi-gpu-model-removed-tf24"} <= ids
    write_ups = [i for i in MATRIX.issues if any(s.kind == "write-up" for s in i.sources)]
    assert all(i.confidence == "reported" for i in write_ups)


# --- matching -----------------------------------------------------------------------------

def _issue(issue_id: str):
    found = MATRIX.get(issue_id)
    assert found is not None
    return found


def test_missing_facts_are_cannot_tell_not_matches() -> None:
    issue = _issue("nccl-264-nvlink-2080ti-hang")
    env = Environment(versions={"tensorflow": "2.2.0"}, gpus=2, interconnect="nvlink")
    a = assess(issue, env)
    assert a.verdict is Verdict.CANNOT_TELL
    assert any("nccl" in line for line in a.unknown)
    assert assess(issue, Environment()).verdict is Verdict.CANNOT_TELL


def test_unknown_usage_matches_conditionally_at_info() -> None:
    env, _ = parse_query(["tensorflow==1.12.0", "keras==2.2.4", "gpus=2"])
    a = assess(_issue("keras-rnn-hang-2gpu-tf110-112"), env)
    assert a.verdict is Verdict.MATCHES and a.usage_unknown


@pytest.mark.parametrize("term", ["tensorflow=1.12", "gpus==2", "gpus=two", "layers=rnn", "cuda==banana",
                                  "strategy=tpu", "workers=0", "usage=dancing", "nonsense", "foo=1", "gpus="])
def test_bad_query_terms(term: str) -> None:
    with pytest.raises(BadEnvironment):
        parse_query([term])


def test_environment_from_snapshots() -> None:
    healthy = environment_from_snapshot(load_snapshot(DATA / "healthy-8gpu-nvlink.json"))
    # cuDNN and NCCL: the copies in use (TensorFlow's build info only says "9").
    assert healthy.versions["tensorflow"] == "2.21.0" and healthy.versions["cudnn"] == "9.3.0"
    assert healthy.versions["nccl"].startswith("2.")
    assert healthy.gpus == 8 and healthy.interconnect == "nvlink" and healthy.layers is None
    bare = environment_from_snapshot(load_snapshot(DATA / "no-driver-no-tensorflow.json"))
    # No NVIDIA driver at all: no GPU (an NVML that failed would leave the count unknown).
    assert bare.gpus == 0 and "driver" not in bare.versions and "tensorflow" not in bare.versions


def test_quick_snapshot_takes_cuda_versions_from_the_libraries() -> None:
    snap = load_snapshot(DATA / "healthy-8gpu-nvlink.json")
    quick = replace(snap, tensorflow=skipped("--quick", cause="quick"))
    env = environment_from_snapshot(quick)
    assert env.versions["cuda"].startswith("12.") and env.versions["cudnn"] == "9.3.0"
    # Without library facts: the nvidia-* wheels installed say which CUDA runtime and cuDNN.
    no_libs = environment_from_snapshot(replace(quick, libraries=skipped("--quick")))
    assert no_libs.versions["cuda"] == "12.5.82" and no_libs.versions["cudnn"] == "9.3.0.75"
    assert "cuda" not in no_libs.sources
    # Without wheels either: what TensorFlow's tested build predicts, and the evidence says so.
    bare_packages = replace(snap.packages, versions={k: v for k, v in snap.packages.versions.items()
                                                     if not k.startswith("nvidia-")})
    predicted = environment_from_snapshot(replace(quick, libraries=skipped("--quick"), packages=bare_packages))
    assert predicted.versions["cuda"] == "12.5" and predicted.versions["cudnn"] == "9.3"
    assert "tested build table" in predicted.sources["cuda"]


def test_modern_healthy_machine_gets_no_warning() -> None:
    snap = load_snapshot(DATA / "healthy-8gpu-nvlink.json")
    findings = check_known_issues(resolve(snap))
    assert all(f.severity <= Severity.INFO for f in findings)


def test_old_stack_gets_the_seed_warnings() -> None:
    snap = load_snapshot(DATA / "healthy-8gpu-nvlink.json")
    old = replace(snap, packages=replace(snap.packages, versions={"tensorflow-gpu": "1.9.0", "keras": "2.2.2"}),
                  tensorflow=absent("not probed"))
    findings = {f.code: f for f in check_known_issues(resolve(old))}
    leak = findings["known-issue.keras-memory-leak-tf19-keras222"]
    assert leak.severity is Severity.WARNING
    assert "matches: tensorflow 1.9.0 is in ==1.9.*" in leak.evidence
    assert leak.links == ["https://github.com/RnoldR/multi_gpu"] and "1.12" in leak.fix
    assert findings["known-issue.keras-lstm-hang-2gpu-tf19"].severity is Severity.INFO


def test_check_skips_without_tensorflow() -> None:
    from mgpu_doctor.checks import CHECKS
    snap = load_snapshot(DATA / "no-driver-no-tensorflow.json")
    outcome = judge(next(c for c in CHECKS if c.name == "known-issues"), snap)
    assert outcome.status.value == "skipped" and "TensorFlow" in outcome.skip_reason


def test_team_matrix_on_top_and_broken_files_reported() -> None:
    snap = load_snapshot(DATA / "healthy-8gpu-nvlink.json")
    findings = make_check_function((TEAM, BROKEN))(resolve(snap))
    codes = {f.code for f in findings}
    assert "known-issue.team-gru-hang-tf221" in codes
    problems = next(f for f in findings if f.code == "matrix.problems")
    assert problems.severity is Severity.WARNING
    assert any("not-toml.toml" in line for line in problems.evidence)
    assert "known-issue.multi-gpu-model-removed-tf24" in codes  # the bundled matrix still used


# --- smoke results ------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    layer: str
    variant: str
    devices: int
    device_kind: str
    scenario: str
    status: str

    @property
    def name(self) -> str:
        return f"smoke/{self.layer}-{self.variant}/{self.devices}x{self.device_kind}/{self.scenario}"


def test_smoke_hang_matches_known_issue_and_unknown_failure_is_not_in_matrix() -> None:
    env = Environment(versions={"tensorflow": "1.12.0", "keras": "2.2.4"}, gpus=2)
    runs = [Run("gru", "generic", 2, "gpu", "even", "hang"), Run("dense", "plain", 2, "gpu", "even", "ok"),
            Run("dense", "plain", 2, "gpu", "even", "crash")]
    findings = smoke_findings(MATRIX.issues, env, runs, strategy="multi_gpu_model")
    codes = [f.code for f in findings]
    assert codes == ["smoke.known-issue.keras-rnn-hang-2gpu-tf110-112",
                     "smoke.not-in-matrix.dense-plain-2gpu-even"]
    assert findings[0].links == ["https://github.com/RnoldR/multi_gpu"]
    assert findings[0].evidence[0] == ("known issue: keras-rnn-hang-2gpu-tf110-112 "
                                       "(`mgpu-doctor matrix show keras-rnn-hang-2gpu-tf110-112`)")
    # The smoke trainings use MirroredStrategy and plain model.fit: neither the multi_gpu_model
    # hang nor the Estimator-only hang of TensorFlow 1.12 explains a MirroredStrategy run.
    mirrored = [f.code for f in smoke_findings(MATRIX.issues, env, runs[:1])]
    assert mirrored == ["smoke.not-in-matrix.gru-generic-2gpu-even"]
    # The run's own finding is the error; the matrix verdict beside it is a warning.
    assert all(f.severity is Severity.WARNING for f in findings)
    assert "mgpu-doctor report -o mgpu-report.md" in findings[1].fix
    assert findings[1].title.startswith("Smoke training dense (plain) on 2 GPU device(s)")
    plain = smoke_findings(MATRIX.issues, env, [Run("dense", "", 2, "gpu", "even", "crash")])
    assert plain[0].title.startswith("Smoke training dense on 2 GPU device(s)")


def test_failed_run_outcomes_gain_the_matrix_verdict() -> None:
    env = Environment(versions={"tensorflow": "1.12.0", "keras": "2.2.4"}, gpus=2)
    hang, ok = Run("gru", "generic", 2, "gpu", "even", "hang"), Run("dense", "plain", 2, "gpu", "even", "ok")
    own = Finding("smoke.gru.hang", Severity.ERROR, "hung")
    outcomes = [CheckOutcome(hang.name, "gru", CheckStatus.FAILED, [own]),
                CheckOutcome(ok.name, "dense", CheckStatus.PASSED, [])]
    out = with_known_issues(outcomes, [hang, ok], MATRIX.issues, env, strategy="multi_gpu_model")
    assert [f.code for f in out[0].findings][0] == "smoke.gru.hang"  # worst first: its own error
    assert "smoke.known-issue.keras-rnn-hang-2gpu-tf110-112" in [f.code for f in out[0].findings]
    assert out[0].status is CheckStatus.FAILED and out[1] == outcomes[1]


def test_smoke_scenario_and_symptom_must_agree() -> None:
    env = Environment(versions={"tensorflow": "2.8.0"}, gpus=2)
    nan_uneven = smoke_findings(MATRIX.issues, env, [Run("dense", "p", 2, "gpu", "uneven_final_batch", "nan")])
    assert nan_uneven[0].code == "smoke.known-issue.tf-mirrored-nan-empty-replica-batch"
    nan_even = smoke_findings(MATRIX.issues, env, [Run("dense", "p", 2, "gpu", "even", "nan")])
    assert nan_even[0].code.startswith("smoke.not-in-matrix.")
    hang_uneven = smoke_findings(MATRIX.issues, env, [Run("dense", "p", 2, "gpu", "uneven_final_batch", "hang")])
    assert hang_uneven[0].code.startswith("smoke.not-in-matrix.")


def test_a_failure_reported_for_older_releases_still_happening_here_is_named() -> None:
    """The BatchNormalization NaN with an empty replica, reported for TF 2.0-2.8, seen on 2.21."""
    env = Environment(versions={"tensorflow": "2.21.0", "keras": "3.15.1"}, gpus=2)
    bn = Run("batchnorm", "plain", 2, "cpu-virtual", "uneven_final_batch", "nan")
    findings = smoke_findings(MATRIX.issues, env, [bn])
    assert {f.code for f in findings} == {"smoke.known-issue.tf-mirrored-nan-empty-replica-batch",
                                          "smoke.known-issue.tf-batchnorm-nan-last-batch-of-one"}
    empty = next(f for f in findings if f.code.endswith("tf-mirrored-nan-empty-replica-batch"))
    assert "reported for tensorflow >=2.0,<=2.8.0, still happens with tensorflow 2.21.0 here" in empty.title
    assert empty.severity is Severity.WARNING and empty.links and "drop_remainder" in empty.fix
    assert "known issue: tf-mirrored-nan-empty-replica-batch" in empty.evidence[0]
    # Another layer's NaN on an even split is not that issue: not in the matrix, report it.
    even = smoke_findings(MATRIX.issues, env, [Run("dense", "", 2, "cpu-virtual", "even", "nan")])
    assert [f.code for f in even] == ["smoke.not-in-matrix.dense--2cpu-virtual-even"]
    # An old entry that names no layer or scenario is no evidence for a hang today.
    hang = smoke_findings(MATRIX.issues, Environment(versions={"tensorflow": "2.8.0"}, gpus=2),
                          [Run("dense", "p", 2, "gpu", "even", "hang")])
    assert hang[0].code.startswith("smoke.not-in-matrix.")


def test_virtual_cpu_runs_do_not_match_gpu_only_entries() -> None:
    env = Environment(versions={"tensorflow": "2.2.0", "nccl": "2.6.4"}, gpus=2, interconnect="nvlink")
    gpu = smoke_findings(MATRIX.issues, env, [Run("dense", "p", 2, "gpu", "even", "hang")])
    cpu = smoke_findings(MATRIX.issues, env, [Run("dense", "p", 2, "cpu-virtual", "even", "hang")])
    assert gpu[0].code == "smoke.known-issue.nccl-264-nvlink-2080ti-hang"
    assert cpu[0].code.startswith("smoke.not-in-matrix.")


# --- CLI ----------------------------------------------------------------------------------

SEED_QUERY = ["matrix", "query", "tensorflow==1.12", "keras==2.2.4", "cuda==9.0", "cudnn==7.1",
              "driver==384.81", "gpus=2", "layers=gru,lstm", "strategy=multi_gpu_model"]


def test_matrix_query_finds_the_seed_hang(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(SEED_QUERY + ["--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["snapshot"] is None and data["query"]["tensorflow"] == "1.12"
    findings = {f["code"]: f for c in data["checks"] for f in c["findings"]}
    assert findings["known-issue.keras-rnn-hang-2gpu-tf110-112"]["severity"] == "warning"
    assert main(SEED_QUERY + ["--fail-on", "warning"]) == 1
    human = capsys.readouterr().out
    assert "matrix query: tensorflow==1.12" in human and "CuDNNGRU" in human
    assert main(SEED_QUERY + ["--format", "markdown"]) == 0
    assert "known-issue.keras-rnn-hang-2gpu-tf110-112" in capsys.readouterr().out


def test_matrix_query_bad_term_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "query", "tensorflow=1.12"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tensorflow==1.12" in err


def test_matrix_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "list"]) == 0
    assert "keras-rnn-hang-2gpu-tf110-112" in capsys.readouterr().out
    assert main(["matrix", "show", "keras-rnn-hang-2gpu-tf110-112"]) == 0
    out = capsys.readouterr().out
    assert "https://github.com/RnoldR/multi_gpu [write-up, read]" in out
    assert main(["matrix", "show", "nope"]) == 2
    assert main(["matrix", "list", "--format", "json", "--matrix", str(TEAM)]) == 0
    assert "team-gru-hang-tf221" in capsys.readouterr().out


def test_matrix_validate_reports_every_problem(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "validate"]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["matrix", "validate", str(BROKEN)]) == 2
    out = capsys.readouterr().out
    for expected in ("not-toml.toml: not valid TOML", "[bad-specifier] affects.tensorflow",
                     "[unknown-symptom] symptom", "[unknown-symptom] colour: unknown field",
                     "[no-source] sources", "[dup] id: duplicate id",
                     "[bad-example] examples[0]: should match its own entry"):
        assert expected in out, expected
    assert main(["matrix", "validate", str(TEAM)]) == 0


def test_check_with_broken_matrix_dir_still_uses_bundled(capsys: pytest.CaptureFixture[str]) -> None:
    snap = str(DATA / "healthy-8gpu-nvlink.json")
    assert main(["check", "--from", snap, "--checks", "known-issues", "--matrix", str(BROKEN),
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    codes = {f["code"] for c in data["checks"] for f in c["findings"]}
    assert {"matrix.problems", "known-issue.multi-gpu-model-removed-tf24"} <= codes
    assert main(["check", "--from", snap, "--matrix", "/no/such/dir"]) == 2


def test_loader_keeps_good_entries_next_to_bad_ones() -> None:
    result = load_known_issue_files(sorted((BROKEN / "known-issues").glob("*.toml")))
    assert {i.id for i in result.issues} == {"bad-example", "dup"}


# --- coverage -------------------------------------------------------------------------------

def test_the_coverage_table_in_the_matrix_readme_is_current() -> None:
    """Regenerate with `python -m mgpu_doctor.matrix.coverage --write` after changing entries."""
    from mgpu_doctor.matrix.coverage import END, START, documentation_page, table_for

    for page in (bundled_matrix_dir() / "README.md", documentation_page(bundled_matrix_dir())):
        text = page.read_text(encoding="utf-8")
        current = text[text.index(START):text.index(END) + len(END)]
        assert current == table_for(bundled_matrix_dir()), f"{page} is stale"


def test_every_release_is_covered_or_recorded_as_searched() -> None:
    """Issue 12's bar: at least 150 sourced entries, and every TensorFlow minor 1.12-2.21 and every
    Keras 3 minor admitted by an entry or recorded as "nothing found" in a mining log."""
    from mgpu_doctor.matrix.coverage import coverage, searched_without_result

    issues = load_matrix(bundled_matrix_dir()).issues
    assert len(issues) >= 150
    assert all(any(s.url for s in i.sources) for i in issues), "an entry without a source URL"
    cov = coverage(issues)
    searched = searched_without_result(bundled_matrix_dir() / "mining-log")
    missing = [f"tensorflow {m}" for m, n in cov.tensorflow.items() if not n and ("tensorflow", m) not in searched]
    missing += [f"keras {m}" for m, n in cov.keras3.items() if not n and ("keras", m) not in searched]
    assert missing == []


def test_every_tensorflow_2_minor_has_a_leak_entry_or_a_recorded_search() -> None:
    """The leaks the project is named for: every TensorFlow 2.x minor has a leak entry admitting it,
    or a mining log records "nothing found: leak tensorflow 2.N"."""
    from mgpu_doctor.matrix.coverage import LEAK_MINORS, coverage, searched_without_result

    cov = coverage(load_matrix(bundled_matrix_dir()).issues)
    searched = searched_without_result(bundled_matrix_dir() / "mining-log")
    assert [m for m in LEAK_MINORS if not cov.tensorflow_leaks[m] and ("leak tensorflow", m) not in searched] == []
    assert sum(i.symptom == "leak" for i in load_matrix(bundled_matrix_dir()).issues) >= 60


def test_coverage_counts_what_each_range_admits() -> None:
    from mgpu_doctor.matrix.coverage import admits_minor

    assert admits_minor(">=2.4,<2.9", "2.8") and not admits_minor(">=2.4,<2.9", "2.9")
    assert admits_minor("==2.20.*", "2.20") and not admits_minor("==2.20.0.dev20250211", "2.20")
    assert not admits_minor(None, "2.21")


def test_every_condition_an_entry_can_carry_is_a_query_term() -> None:
    """A support engineer types what the bug report says: each condition, each of its words."""
    from mgpu_doctor.matrix import vocabulary
    from mgpu_doctor.matrix.known_issues import CONDITION_KEYS

    term_of = {"min_gpus": "gpus=2", "max_gpus": "gpus=2", "min_workers": "workers=2", "max_workers": "workers=2",
               "min_ranks": "workers=17",
               "compute_capability": "compute_capability=7.5", "gpu_names": "gpu_name=RTX 2080 Ti",
               "without_usage": "usage=memory_growth"}  # decided by the usage named (or not)
    words = {"layers": vocabulary.LAYERS, "usage": vocabulary.USAGES, "strategy": vocabulary.STRATEGIES,
             "scenario": vocabulary.SCENARIOS, "platform": vocabulary.PLATFORMS,
             "cpu_vendor": vocabulary.CPU_VENDORS, "cpu_arch": vocabulary.CPU_ARCHS, "interconnect": vocabulary.INTERCONNECTS,
             "peer_access": vocabulary.PEER_ACCESS, "backend": vocabulary.BACKENDS}
    for key in CONDITION_KEYS:
        if key in term_of:
            parse_query([term_of[key]])
        else:
            for word in words[key]:
                env, _ = parse_query([f"{key}={word}"])
                assert word in (getattr(env, key) if key not in ("layers", "usage") else getattr(env, key)), key


def test_every_thread_the_smoke_engine_cites_is_a_matrix_entry() -> None:
    """`smoke` and `matrix query` tell one story: a tracker thread a smoke or multi-worker finding
    cites is a source of a known-issue entry (and the finding names that entry by id)."""
    import re

    root = Path(__file__).parents[1] / "mgpu_doctor"
    cited = set()
    for module in [*sorted((root / "smoke").glob("*.py")), *sorted((root / "multiworker").glob("*.py"))]:
        cited |= set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+/issues/\d+", module.read_text()))
    assert cited, "the smoke engine cites no thread: this test would check nothing"
    entries = load_matrix(bundled_matrix_dir())
    sourced = {s.url for i in entries.issues for s in i.sources}
    assert cited <= sourced, sorted(cited - sourced)


def test_cannot_tell_is_shown_only_when_a_version_it_names_agrees(capsys) -> None:
    """An NCCL entry is noise on a query that names no NCCL; an entry of TensorFlow 2.15 on one GPU
    architecture is worth a line on a 2.15 query that names no GPU (the version agrees, the GPU is not
    known)."""
    main(["matrix", "query", "tensorflow==2.15.0", "gpus=2", "strategy=mirrored", "--format", "json"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    assert found["known-issue.tf-62915-mirrored-nan-rtx4090"]["severity"] == "info"
    assert not [code for code in found if code.startswith("known-issue.nccl-")]
    main(["matrix", "query", "tensorflow==2.15.0", "nccl==2.8.4", "gpus=2", "--format", "json"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    assert "known-issue.nccl-shm-container-dev-shm-too-small" in found


# --- the rules of "every entry as its sources say" that `matrix validate` holds --------------

GOOD_ENTRY = '''
[[issue]]
id = "{id}"
title = "A hang"
symptom = "hang"
confidence = "reported"
summary = "Seen by a reporter with TensorFlow 2.10.0."
workaround = "{workaround}"
{fixed_in}affects = {{ tensorflow = "{affects}" }}

[[issue.sources]]
url = "{url}"
kind = "{kind}"
note = "{note}"
{extra}
[[issue.examples]]
matches = true
env = {{ tensorflow = "2.10.0" }}

[[issue.examples]]
matches = false
env = {{ tensorflow = "2.12.0" }}
'''


def entry(**changes: str) -> str:
    values = {"id": "rule-entry", "workaround": "From #1 (the reporter's fix): set NCCL_P2P_DISABLE=1.", "fixed_in": "",
              "affects": ">=2.10,<=2.10.0", "url": "https://github.com/tensorflow/tensorflow/issues/1",
              "kind": "issue", "note": "", "extra": ""}
    values.update(changes)
    return GOOD_ENTRY.format(**values)


def problems_of(tmp_path: Path, *entries: str) -> list[str]:
    path = tmp_path / "rules.toml"
    path.write_text("schema_version = 1\n" + "".join(entries))
    return [str(p) for p in load_known_issue_files([path]).problems]


PR_SOURCE = ('[[issue.sources]]\nurl = "https://github.com/tensorflow/tensorflow/pull/2"\n'
             'kind = "pull-request"\n')


@pytest.mark.parametrize(("changes", "field"), [
    # an upper bound reads as a fix: it needs fixed_in
    ({"affects": ">=2.10,<2.11"}, "affects.tensorflow"),
    # fixed_in that no release note, change or source note backs
    ({"affects": ">=2.10,<2.11", "fixed_in": 'fixed_in = "tensorflow 2.11"\n'}, "fixed_in"),
    # a reporter's "2.10" written so that it admits 2.10.0 only
    ({"affects": "==2.10"}, "affects.tensorflow"),
    ({"affects": ">=2.9,<=2.10"}, "affects.tensorflow"),
    # "None ..." that is not "None posted" / "None confirmed"
    ({"workaround": "None from the maintainers. Restart."}, "workaround"),
    ({"workaround": "No fix in the thread. Restart the job."}, "workaround"),
    # advice of our own after "None posted" or "None confirmed", not marked
    ({"workaround": "None posted. Restart the job."}, "workaround"),
    ({"workaround": "None confirmed. Restart the job."}, "workaround"),
    # the same URL twice in one entry
    ({"extra": '[[issue.sources]]\nurl = "https://github.com/tensorflow/tensorflow/issues/1"\nkind = "issue"\n'},
     "sources[1].url"),
    # a pull request that is not a pull-request address
    ({"kind": "pull-request"}, "sources[0].url"),
])
def test_validate_refuses_an_entry_that_says_more_than_its_sources(tmp_path, changes, field) -> None:
    assert problems_of(tmp_path, entry()) == []
    found = problems_of(tmp_path, entry(**changes))
    assert len(found) == 1 and "\n" not in found[0], found
    assert found[0].startswith(f"{tmp_path / 'rules.toml'} [rule-entry] {field}: "), found


@pytest.mark.parametrize("changes", [
    {"affects": ">=2.10,<2.11", "fixed_in": 'fixed_in = "tensorflow 2.11"\n', "extra": PR_SOURCE},
    {"affects": ">=2.10,<2.11", "fixed_in": 'fixed_in = "tensorflow 2.11"\n',
     "note": "maintainer: fixed in 2.11"},
    {"affects": ">=2.10,<2.11.dev0"},  # the 2.10 series as the reporter wrote it
    {"workaround": "None posted."},
    {"workaround": "None posted. Generic advice: restart the job."},
    {"workaround": "None posted in the thread. From #2: a restart helped. Generic advice (ours): restart."},
    {"affects": "==2.10.*"},
    {"affects": ">=2.9,<2.11.dev0"},
    {"workaround": "None confirmed in the thread. From #1 (a commenter): a restart."},
    {"workaround": "None confirmed in the thread."},
    {"workaround": "None posted; a maintainer said to ignore it. Generic advice, not from the thread: x."},
])
def test_validate_accepts_what_the_sources_back(tmp_path, changes) -> None:
    assert problems_of(tmp_path, entry(**changes)) == []


def test_validate_refuses_two_entries_on_one_upstream_report(tmp_path) -> None:
    found = problems_of(tmp_path, entry(), entry(id="rule-entry-two"))
    assert len(found) == 1 and found[0].startswith(
        f"{tmp_path / 'rules.toml'} [rule-entry-two] sources[0].url: the primary source of rule-entry too"), found
    # two reports in one thread, each naming the comment it retells
    assert problems_of(tmp_path, entry(note="comment by A"), entry(id="rule-entry-two", note="comment by B")) == []


def test_validate_refuses_a_line_two_entries_print_as_identifying_either(tmp_path) -> None:
    def signed(identifies: str, issue: int = 1) -> str:
        return ('[[issue.signatures]]\ntext = "AttributeError: \'DeviceSpec\' object has no attribute \'split\'"\n'
                f'source = "https://github.com/tensorflow/tensorflow/issues/{issue}"\n{identifies}')
    one = entry(extra=signed(""))
    two = entry(id="rule-entry-two", url="https://github.com/tensorflow/tensorflow/issues/3",
                extra=signed("identifies = false\n", 3))
    found = problems_of(tmp_path, one, two)
    assert len(found) == 1 and found[0].startswith(
        f"{tmp_path / 'rules.toml'} [rule-entry] signatures[0].identifies: rule-entry-two prints the same line"), found
    assert problems_of(tmp_path, entry(extra=signed("identifies = false\n")), two) == []


def test_an_upper_bound_on_a_library_is_a_compatibility_limit_not_a_fix(tmp_path) -> None:
    text = entry().replace('affects = { tensorflow = ">=2.10,<=2.10.0" }',
                           'affects = { tensorflow = ">=2.10,<=2.10.0", cudnn = "<8.6" }')
    assert 'cudnn = "<8.6"' in text
    assert problems_of(tmp_path, text) == []
    assert problems_of(tmp_path, text.replace('cudnn = "<8.6"', 'nccl = "<2.18"'))  # nccl fixes bugs


@pytest.mark.parametrize(("terms", "entry"), [
    # the uneven-batch BatchNormalization entry is for ==1.8.0 (its one reported release): "1.8" is
    # any 1.8.x (issue 36 named tensorflow==1.12 when the entry read <=1.12.0, a bound no source names)
    (["tensorflow==1.8", "gpus=2", "strategy=multi_gpu_model", "layers=batchnorm",
      "scenario=uneven_final_batch"], "multi-gpu-model-batchnorm-nan-empty-replica"),
    (["tensorflow==2.2", "gpus=2", "usage=device_subset,mixed_precision"],
     "tf-39775-set-visible-devices-mixed-precision-policy-tf22"),
    (["keras==3.6", "tensorflow==2.17.0", "gpus=2", "usage=multiprocessing_workers"],
     "keras-20425-pydataset-workers-hang-end-of-epoch"),
])
def test_a_short_version_that_straddles_an_entry_is_cannot_tell_never_dropped(capsys, terms, entry) -> None:
    main(["matrix", "query", *terms, "--format", "json"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    assert f"known-issue.{entry}" in found, sorted(found)
    assert found[f"known-issue.{entry}"]["severity"] == "info"
    assert found[f"known-issue.{entry}"]["title"].startswith("Cannot tell whether this known issue applies")


HOROVOD_GCC = "hvd-1197-segfault-tf114-horovod-built-with-newer-gcc"


@pytest.mark.parametrize(("terms", "verdict"), [
    (["horovod==0.16.4"], "applies"),  # before horovod/horovod#1199 (first in the v0.17.0 tag)
    (["horovod==0.19.4"], "does not apply"),  # the compiler is chosen by Horovod's build from 0.17.0
    ([], "cannot tell"),  # Horovod's version unknown: never a warning, never silence
])
def test_a_fix_released_in_horovod_is_judged_by_horovod_s_version(capsys, terms, verdict):
    main(["matrix", "query", "tensorflow==1.14.0", "strategy=horovod", *terms, "--format", "json", "-v"])
    findings = [f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]]
    entry = [f for f in findings if f["code"] == f"known-issue.{HOROVOD_GCC}"]
    if verdict == "applies":
        assert entry and entry[0]["severity"] == "warning"
    elif verdict == "does not apply":
        assert not entry
        assert not any(HOROVOD_GCC in json.dumps(f) and f["severity"] != "ok" for f in findings)
    else:
        assert not entry or entry[0]["severity"] == "info"
        assert any("horovod" in json.dumps(f) and f["severity"] == "info" for f in findings)


CUDNN_HANDLE = "tf-24496-cudnn-handle-internal-error-rtx-turing"


@pytest.mark.parametrize(("terms", "severity"), [
    # any GPU: the trigger is the setting; a typed usage list is partial, so "unless you enable ..."
    (["gpu_name=GeForce GTX 1660 Ti", "usage=mixed_precision"], "info"),
    (["usage=memory_growth"], None),  # memory growth on: the trigger is off
    ([], "info"),  # usage unknown: "applies unless you enable GPU memory growth"
])
def test_a_condition_on_a_setting_left_off_names_the_trigger_not_the_reporters_gpus(capsys, terms, severity):
    # Issue 36: the entry required an RTX 2070, RTX 2080 or Quadro P2000; the same failure on a
    # GTX 1660 Ti got nothing. Its threads' fix was memory growth: that is the condition now.
    main(["matrix", "query", "tensorflow==2.0.0", "gpus=1", *terms, "--format", "json", "-v"])
    findings = [f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]]
    entry = [f for f in findings if f["code"] == f"known-issue.{CUDNN_HANDLE}"]
    assert [f["severity"] for f in entry] == ([severity] if severity else [])
    if severity == "info":
        assert any("unless you enable GPU memory growth" in line for line in entry[0]["evidence"])


def test_a_word_both_wanted_and_excluded_is_refused(tmp_path):
    both = entry().replace('affects = {', 'conditions = { usage = ["save_model"], without_usage = ["save_model"] }\n'
                                          'affects = {', 1)
    assert any("conditions.without_usage" in p and "can never match" in p for p in problems_of(tmp_path, both))


def test_a_typed_usage_list_is_partial_an_entry_needing_an_unnamed_word_is_cannot_tell(capsys):
    # Issue 36: `usage=several_models` hid every entry that wants fit_in_loop; an entry that needs
    # two words was dropped when the report named one. Both are "applies if you ..." now.
    main(["matrix", "query", "tensorflow==2.3.0", "usage=several_models", "--format", "json", "-v"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    loop = found["known-issue.tf-37505-fit-consecutive-runs-leak"]
    assert loop["severity"] == "info" and loop["condition"]["wanted"] == ["fit_in_loop"]
    main(["matrix", "query", "tensorflow==2.16.1", "keras==3.3.3", "usage=python_generator", "--format", "json", "-v"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    both = found["known-issue.keras-19907-lstm-sequence-generator-folds-rss"]
    assert both["severity"] == "info" and both["condition"]["wanted"] == ["fit_in_loop"]
    main(["matrix", "query", "tensorflow==2.3.0", "usage=several_models,fit_in_loop", "--format", "json", "-v"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    assert found["known-issue.tf-37505-fit-consecutive-runs-leak"]["severity"] == "warning"


def test_a_narrow_usage_word_names_the_broader_word_it_is_a_case_of() -> None:
    """`usage=datasets_from_function` is distributing a dataset yourself: the DALI InputOptions entry
    (usage distribute_dataset) applies, with no "if you distribute a tf.data pipeline yourself"."""
    env, _ = parse_query(["tensorflow==2.14.0", "strategy=mirrored", "usage=datasets_from_function"])
    a = assess(_issue("dali-5192-mirrored-input-options-ignored-tf214"), env)
    assert a.verdict is Verdict.MATCHES and not a.usage_unknown
    assert "usage distribute_dataset (named as datasets_from_function)" in a.agrees
    env, _ = parse_query(["tensorflow==2.14.0", "strategy=mirrored", "usage=frozen_nested_model"])
    assert assess(_issue("dali-5192-mirrored-input-options-ignored-tf214"), env).verdict is Verdict.NO_MATCH


@pytest.mark.parametrize(("issue_id", "query", "phrase", "with_trigger"), [
    # the EagerTensor-to-NumPy leak: not every 2.0.0b1 user, those who hand tensors to NumPy
    ("tf-30165-tensor-to-numpy-conversion-leak-tf20b1", ["tensorflow==2.0.0b1"],
     "if you pass TensorFlow tensors straight to NumPy functions", "tensor_to_numpy"),
    # the Estimator leak: train() called again and again, not any Estimator job
    ("tf-24047-estimator-train-loop-optimizer-leak-tf112", ["tensorflow==1.12.0"],
     "if you call model.fit (or an Estimator's train) over and over", "estimator,fit_in_loop"),
    # BatchNormalization's renorm under a strategy: not every BatchNormalization
    ("tf-31531-batchnorm-renorm-under-strategy",
     ["tensorflow==2.0.0", "gpus=2", "strategy=mirrored", "layers=batchnorm"],
     "if you use batch renormalisation", "batchnorm_renorm"),
    # multi_gpu_model's LSTM shapes: the recurrent dropout mask, not every LSTM
    ("multi-gpu-model-lstm-recurrent-dropout-shapes",
     ["keras==2.1.2", "gpus=2", "strategy=multi_gpu_model", "layers=lstm"],
     "if you give recurrent layers a recurrent dropout", "recurrent_dropout"),
    # Horovod's averaged metrics on TensorFlow 2.3-2.4: MetricAverageCallback, not every Horovod job
    ("hvd-2440-metric-average-callback-logs-out-of-sync-tf23", ["tensorflow==2.3.0", "gpus=4", "strategy=horovod"],
     "if you average the metrics over Horovod's workers", "metric_average_callback"),
    # the NCCL bootstrap failure: stray connections to its port, not every 2-GPU machine
    ("nccl-1612-bootstrap-fails-peer-closes-before-magic", ["nccl==2.25.1", "gpus=2"],
     "if you run where other traffic reaches NCCL's bootstrap ports", "bootstrap_port_traffic"),
    # MultiWorkerMirroredStrategy with NCCL: a worker without a GPU, not every NCCL cluster
    ("tf-60847-mwms-nccl-cpu-worker-hang", ["tensorflow==2.11.0", "workers=2"],
     "if you include a worker without a GPU", "nccl_all_reduce,cpu_only_worker"),
    # SyncBatchNormalization's NaN: channels-first feature maps, not every SyncBatchNormalization
    ("tf-43165-syncbn-channels-first-nan", ["tensorflow==2.3.0", "gpus=2", "strategy=mirrored", "layers=sync_batchnorm"],
     "if you lay image tensors out channels-first", "channels_first"),
    # from_generator's captured objects: datasets built per fold, not every fit in a loop
    ("tf-57690-from-generator-objects-not-released-tf210", ["tensorflow==2.10.0"],
     "if you build tf.data datasets over and over", "python_generator,dataset_rebuilt"),
    # the eager tf.data leak: tf.strings.split in the map function, not every string feature
    ("tf-35152-strings-split-dataset-map-leak-tf21rc1", ["tensorflow==2.1.0rc1"],
     "if you split strings with tf.strings.split", "strings_split_map"),
    # the eager tensor leak of 2.16.1: tf.constant in a loop too, not only tf.random ops
    ("tf-68196-eager-constant-loop-leak-tf2161", ["tensorflow==2.16.1"],
     "if you create tensors eagerly in a Python loop", "eager_tensors_in_loop"),
    # NCCL's tuning by the local CPU vendor: hosts of both vendors, not every multi-worker job
    ("nccl-1136-mixed-intel-amd-nodes-hang", ["nccl==2.19.3", "workers=2"],
     "if you run one job across hosts of both CPU vendors", "mixed_cpu_vendors"),
])
def test_an_entry_narrowed_to_its_trigger_is_conditional_without_it(issue_id, query, phrase, with_trigger):
    env, _ = parse_query(query)
    a = assess(_issue(issue_id), env)
    assert a.verdict is Verdict.MATCHES and any(line.startswith(phrase) for line in a.usage_unknown), a
    named = [t for t in query if not t.startswith("usage=")] + [f"usage={with_trigger}"]
    env, _ = parse_query(named)
    a = assess(_issue(issue_id), env)
    assert a.verdict is Verdict.MATCHES and not a.usage_unknown


def test_an_estimator_query_no_longer_warns_of_the_train_loop_leak(capsys):
    # Issue 36: the Estimator train()-in-a-loop leak warned every Estimator query on 1.11-1.12.
    main(["matrix", "query", "tensorflow==1.12.0", "usage=estimator", "--format", "json", "-v"])
    found = {f["code"]: f for c in json.loads(capsys.readouterr().out)["checks"] for f in c["findings"]}
    leak = found["known-issue.tf-24047-estimator-train-loop-optimizer-leak-tf112"]
    assert leak["severity"] == "info" and leak["condition"]["wanted"] == ["fit_in_loop"]


@pytest.mark.parametrize(("statuses", "peer_access", "verdict"), [
    ({}, "supported", Verdict.NO_MATCH),  # NVML: every pair ok
    ({(0, 1): 5, (1, 0): 5}, "unsupported", Verdict.MATCHES),  # NVML_P2P_STATUS_NOT_SUPPORTED
    ({(0, 1): 6, (1, 0): 6}, None, Verdict.CANNOT_TELL),  # NVML_P2P_STATUS_UNKNOWN says nothing
])
def test_peer_access_is_nvml_s_p2p_status_and_decides_the_cumem_host_entry(statuses, peer_access, verdict):
    # nccl#1838: GPUs without peer access, whatever their name (it named the reporters' L4 and T4)
    from mgpu_doctor.environment.machine import machine_facts
    from tests.fake_nvml import FakeMachine, gpus
    from tests.scenarios import nvml_of, snapshot, tf_view

    snap = snapshot(nvml_of(FakeMachine(gpus=gpus(2, name="NVIDIA L4", cc=(8, 9)), p2p=statuses)),
                    tf_view(2, cc="8.9", name="NVIDIA L4"))
    assert machine_facts(snap).peer_access == peer_access
    env = environment_from_snapshot(snap)
    env = replace(env, versions={**env.versions, "nccl": "2.27.3"})
    a = assess(_issue("nccl-1838-cumem-host-no-p2p-error-217"), env)
    assert a.verdict is verdict, a
    if peer_access is None:
        assert "peer access unsupported: NVML gave no P2P status between the GPUs" in a.unknown


@pytest.mark.parametrize(("machine", "cpu_arch", "verdict"), [
    ("aarch64", "aarch64", Verdict.MATCHES),
    ("arm64", "aarch64", Verdict.MATCHES),  # macOS's name for it
    ("x86_64", "x86_64", Verdict.NO_MATCH),
    ("", None, Verdict.CANNOT_TELL),  # a pasted text without the machine type
])
def test_cpu_arch_is_the_host_s_machine_type_and_decides_the_arm_proxy_hang(machine, cpu_arch, verdict):
    # NCCL 2.28.9's weak CAS "can only happen on aarch64 (Grace)" (marin#7344): not the GB200 name
    from mgpu_doctor.environment.machine import machine_facts
    from tests.scenarios import healthy_8gpu_nvlink

    snap = healthy_8gpu_nvlink()
    snap = replace(snap, host=replace(snap.host, machine=machine))
    assert machine_facts(snap).cpu_arch == cpu_arch
    env = environment_from_snapshot(snap)
    env = replace(env, versions={**env.versions, "nccl": "2.28.9"})
    assert assess(_issue("nccl-2293-arm-proxy-op-slot-leak-silent-hang"), env).verdict is verdict


@pytest.mark.parametrize(("terms", "verdict"), [
    (["workers=17", "gpus=8"], Verdict.MATCHES),  # 136 ranks
    (["workers=16", "gpus=8"], Verdict.NO_MATCH),  # 128: the thread's "> 128 ranks" is not met
    (["workers=33", "gpus=4"], Verdict.MATCHES),  # 132: the ranks count, however the GPUs are spread
    (["workers=17"], Verdict.CANNOT_TELL),  # GPUs per worker not known
])
def test_min_ranks_counts_every_gpu_of_every_worker(terms, verdict):
    # nccl#947: "Running > 128 ranks we reproducibly get an error" (UCX + SHARP over InfiniBand)
    env, _ = parse_query(["nccl==2.18.3", "usage=infiniband", *terms])
    a = assess(_issue("nccl-947-ucx-sharp-socket-reset-2171-218"), env)
    assert a.verdict is verdict, a


def test_a_last_batch_of_one_is_a_case_of_an_uneven_last_batch() -> None:
    # tensorflow#46205: len(train) % batch_size == 1, not any uneven last batch
    one = _issue("tf-batchnorm-nan-last-batch-of-one")
    env, _ = parse_query(["tensorflow==2.8.2", "gpus=1", "layers=batchnorm", "scenario=uneven_final_batch"])
    a = assess(one, env)
    assert a.verdict is Verdict.MATCHES and a.usage_unknown == ("if the last batch holds exactly one sample "
                                                                "(the dataset size is one more than a multiple "
                                                                "of the batch size)",), a
    env, _ = parse_query(["tensorflow==2.8.2", "gpus=1", "layers=batchnorm", "scenario=final_batch_of_one"])
    assert assess(one, env).verdict is Verdict.MATCHES and not assess(one, env).usage_unknown
    # an entry that needs any uneven last batch holds for a last batch of one
    env, _ = parse_query(["tensorflow==2.8.0", "gpus=2", "strategy=mirrored", "scenario=final_batch_of_one"])
    a = assess(_issue("tf-mirrored-nan-empty-replica-batch"), env)
    assert a.verdict is Verdict.MATCHES and "scenario uneven_final_batch (named as final_batch_of_one)" in a.agrees
