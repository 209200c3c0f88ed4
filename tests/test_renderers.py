"""Reporters: exact expected output (golden files), and every format renders every scenario.

After an intended change of wording, regenerate with MGPU_DOCTOR_UPDATE_GOLDEN=1 and read the diff.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mgpu_doctor import record as records
from mgpu_doctor.checks import CHECKS
from mgpu_doctor.diagnose import judge_snapshot
from mgpu_doctor.model.findings import Section, Severity
from mgpu_doctor.renderers import OutputFormat, RenderOptions, junit
from tests.scenarios import SCENARIOS

GOLDEN = Path(__file__).parent / "data" / "golden"
# The goldens test the rendering, not which checks exist: they render these checks, so adding a
# check (CONTRIBUTING.md) leaves them alone. The known-issue check is not among them: its findings
# change whenever a matrix entry is added. Regenerate with MGPU_DOCTOR_UPDATE_GOLDEN=1.
GOLDEN_CHECK_NAMES = (
    "gpus", "cuda-visible-devices", "gpu-memory-in-use", "gpu-ecc", "gpu-throttling", "gpu-compute-mode",
    "gpu-mig", "gpu-pcie-link", "gpu-uniformity", "cuda-device-order", "interpreter", "tensorflow-import",
    "tensorflow-distributions", "versions-agree", "keras", "python", "tensorflow-requires",
    "tensorflow-gpus", "cuda-libraries",
    "and-cuda-wheels", "library-copies", "driver-cuda", "gpu-architecture", "ptxas", "cuda-environment",
    "gpu-interconnect", "pcie-p2p", "shared-memory", "cpu-affinity", "nccl-environment", "container-gpus",
)
RENDERED_CHECKS = tuple(c for c in CHECKS if c.name in GOLDEN_CHECK_NAMES)


def report_for(snapshot, name):
    return judge_snapshot(snapshot, RENDERED_CHECKS, command="check", source=f"snapshot {name}.json",
                          quick=False, tool_version="0.1.0")


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("MGPU_DOCTOR_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("scenario_name,fmt,options,golden", [
    ("mixed-models", OutputFormat.HUMAN, RenderOptions(unicode=True), "mixed-models.human.txt"),
    ("sick-box", OutputFormat.HUMAN, RenderOptions(unicode=False), "sick-box.ascii.txt"),
    ("sick-box", OutputFormat.HUMAN, RenderOptions(unicode=False, verbose=True), "sick-box.verbose.txt"),
    ("mixed-models", OutputFormat.MARKDOWN, RenderOptions(), "mixed-models.md"),
])
def test_exact_output(scenario, scenario_name, fmt, options, golden):
    assert_golden(golden, fmt.renderer()(report_for(scenario(scenario_name), scenario_name), options))


def test_junit_exact(scenario):
    report = report_for(scenario("mixed-models"), "mixed-models")
    assert_golden("mixed-models.junit.xml", junit.render(report, RenderOptions(fail_on=Severity.WARNING)))


def test_the_goldens_checks_exist():
    assert len(RENDERED_CHECKS) == len(GOLDEN_CHECK_NAMES)


def test_the_level_that_ran_heads_the_human_and_markdown_reports(scenario):
    from mgpu_doctor.record import replace

    report = report_for(scenario("mixed-models"), "mixed-models")
    human, markdown = OutputFormat.HUMAN.renderer(), OutputFormat.MARKDOWN.renderer()
    assert "level" not in human(report, RenderOptions()).splitlines()[0]  # none ran: --from
    leveled = replace(report, level="long")
    assert human(leveled, RenderOptions()).splitlines()[0].endswith(", level long")
    assert markdown(leveled, RenderOptions()).splitlines()[0].endswith("mixed-models.json (level long)")
    assert json.loads(OutputFormat.JSON.renderer()(leveled, RenderOptions()))["level"] == "long"
    from mgpu_doctor.renderers import bug_report

    assert f"from {report.source}, level long;" in bug_report.render(leveled, RenderOptions())


def test_colour_only_when_asked(scenario):
    report = report_for(scenario("sick-box"), "sick-box")
    plain = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=True, color=False))
    coloured = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=True, color=True))
    assert "\x1b[" not in plain and "\x1b[31m✗\x1b[0m" in coloured


@pytest.mark.parametrize("fmt", list(OutputFormat))
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_format_renders_every_scenario(scenario, fmt, name):
    text = fmt.renderer()(report_for(scenario(name), name), RenderOptions())
    assert text.endswith("\n")
    if fmt is OutputFormat.JSON:
        assert json.loads(text)["kind"] == "mgpu-doctor-report"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_junit_is_valid_and_counts_add_up(scenario, name):
    report = report_for(scenario(name), name)
    suite = ET.fromstring(junit.render(report, RenderOptions()))
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == len(report.checks)
    assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)


def test_skipped_checks_with_one_reason_share_a_line_unless_verbose(scenario):
    report = report_for(scenario("no-driver-no-tensorflow"), "x")
    short = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=False))
    # Counted from the report, never written down: adding a check must not break this test.
    nvml = [c for c in report.checks if c.section is Section.GPUS and c.skip_reason.startswith("NVML absent")]
    assert len(nvml) >= 2
    line = next(line for line in short.splitlines() if "checks skipped (NVML absent:" in line)
    assert line.startswith(f"[-] {len(nvml)} checks skipped (NVML absent:")
    verbose = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=False, verbose=True))
    assert "checks skipped" not in verbose and "[-] GPU memory is free (skipped: NVML absent" in verbose


class _WideCharsWcwidth:
    """Stands in for the optional ``wcwidth`` package: emoji and East Asian wide characters
    count as two columns, as the real one counts them."""

    @staticmethod
    def wcswidth(text: str) -> int:
        import unicodedata
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    wcwidth = wcswidth


def test_goldens_do_not_depend_on_wcwidth_being_installed(scenario, monkeypatch):
    """tabulate pads columns by wcwidth's widths when that optional package is importable: the
    markdown status column (✅) would then differ between a clean checkout and a machine with it."""
    import tabulate
    monkeypatch.setattr(tabulate, "wcwidth", _WideCharsWcwidth(), raising=False)
    monkeypatch.setattr(tabulate, "WIDE_CHARS_MODE", True)
    report = report_for(scenario("mixed-models"), "mixed-models")
    assert OutputFormat.MARKDOWN.renderer()(report, RenderOptions()) == (GOLDEN / "mixed-models.md").read_text()


def test_the_schema_names_every_section():
    from importlib import resources
    schema = json.loads(resources.files("mgpu_doctor").joinpath("schemas/report.schema.json").read_text())
    assert schema["$defs"]["check"]["properties"]["section"]["enum"] == [s.value for s in Section] + [None]


def test_sections_come_in_their_order_with_a_heading_each(scenario):
    report = report_for(scenario("sick-box"), "sick-box")
    lines = OutputFormat.HUMAN.renderer()(report, RenderOptions(unicode=False)).splitlines()
    present = [s for s in Section if any(c.section is s for c in report.checks)]
    assert [line for line in lines if line in {s.title for s in Section}] == [s.title for s in present]


def conditional_report():
    """A known-issues check by hand (the matrix changes; the rendering must not): one warning, three
    entries that depend on the training (two facts), one that cannot be told; a declared profile."""
    from mgpu_doctor.model.findings import CheckOutcome, CheckStatus, Condition, Finding
    from mgpu_doctor.model.report import new_report
    from mgpu_doctor.model.training import TrainingFacts, TrainingProfile

    def conditional(n, condition):
        return Finding(f"known-issue.entry-{n}", Severity.INFO, f"Known issue for these versions: entry {n}",
                       [f"matches: tensorflow 2.21.0 is in >=2.{n}", condition.phrase], fix=f"fix {n}",
                       links=[f"https://example.org/{n}"], condition=condition)

    loop = Condition("usage", ("custom_training_loop",), "if you train with a custom loop",
                     "--usage custom_training_loop", True)
    saved = Condition("usage", ("save_model",), "if you save the distributed model", "--usage save_model", True)
    gru = Condition("layers", ("gru", "lstm"), "if your model uses GRU or LSTM layers",
                    "--model-layers gru or lstm", True)
    numpy = Condition("numpy", (">=2",), "without the numpy version (>=2)", "", False)
    findings = [
        Finding("known-issue.entry-0", Severity.WARNING, "Known issue applies: entry 0",
                ["matches: usage save_model (declared in pyproject.toml: [tool.mgpu-doctor.training] usage)"],
                fix="fix 0"),
        conditional(1, loop), conditional(2, gru), conditional(3, loop), conditional(4, saved),
        conditional(5, numpy),
    ]
    outcome = CheckOutcome("known-issues", "Known multi-GPU issues for these versions", CheckStatus.WARNING,
                           findings, section=Section.KNOWN_ISSUES)
    profile = TrainingProfile(declared=TrainingFacts(strategy="mirrored"),
                              declared_from={"strategy": "pyproject.toml: [tool.mgpu-doctor.training] strategy"},
                              observed=TrainingFacts(layers=("dense",)),
                              observed_from={"layers": "model: trainer.models:build"})
    return new_report("check", "snapshot conditional.json", [outcome], tool_version="0.1.0", training=profile)


@pytest.mark.parametrize("fmt,options,golden", [
    (OutputFormat.HUMAN, RenderOptions(unicode=False), "conditional.ascii.txt"),
    (OutputFormat.HUMAN, RenderOptions(unicode=False, verbose=True), "conditional.verbose.txt"),
    (OutputFormat.MARKDOWN, RenderOptions(), "conditional.md"),
])
def test_conditional_findings_are_grouped_after_what_applies(fmt, options, golden):
    assert_golden(golden, fmt.renderer()(conditional_report(), options))


def test_the_json_report_carries_the_groups_and_the_profile():
    data = json.loads(OutputFormat.JSON.renderer()(conditional_report(), RenderOptions()))
    assert [(g["key"], g["wanted"], g["codes"]) for g in data["conditional"]] == [
        ("usage", ["custom_training_loop"], ["known-issue.entry-1", "known-issue.entry-3"]),
        ("usage", ["save_model"], ["known-issue.entry-4"]),
        ("layers", ["gru", "lstm"], ["known-issue.entry-2"]),
        ("numpy", [">=2"], ["known-issue.entry-5"]),
    ]
    assert data["training"]["unknown"] == ["usage", "gpus", "workers", "backend", "scenario"]
    assert data["training"]["observed_from"] == {"layers": "model: trainer.models:build"}


def test_the_html_report_has_a_block_per_group():
    html = OutputFormat.HTML.renderer()(conditional_report(), RenderOptions())
    assert "<summary>2 apply if you train with a custom loop: --usage custom_training_loop</summary>" in html
    assert "<summary>1 cannot be told without the numpy version (&gt;=2)</summary>" in html
    assert "<h2>Training</h2>" in html and "model: trainer.models:build" in html


HOSTILE = {"screen": "\x1b[2J", "title": "\x1b]0;owned\x07", "csi": "\x9b31m", "cr": "fake\rline",
           "bidi": "\u202eevil", "html": "<img src=x onerror=alert(1)>", "script": "<script>x</script>",
           "fence": "```\n<b>out of the fence</b>"}


def hostile_report():
    """A stranger's snapshot whose values carry escape sequences and HTML: a GPU name, the
    TensorFlow version, an environment variable, a path."""

    from tests.scenarios import with_env

    snap = SCENARIOS["mixed-models"]()
    bad = "".join(HOSTILE.values())
    gpus = [records.replace(g, name=f"A100 {bad}") for g in snap.nvml.gpus]
    snap = records.replace(snap, nvml=records.replace(snap.nvml, gpus=gpus),
                               tensorflow=records.replace(snap.tensorflow, version=f"2.21.0{bad}"),
                               python=records.replace(snap.python, executable=f"/opt/{bad}/python"))
    return report_for(with_env(snap, TF_NOTE=bad, CUDA_VISIBLE_DEVICES=f"0,{bad}"), "hostile")


@pytest.mark.parametrize("options", [RenderOptions(unicode=True, verbose=True),
                                     RenderOptions(unicode=False, verbose=True)], ids=["unicode", "ascii"])
def test_human_output_shows_control_characters_escaped_never_raw(options):
    text = OutputFormat.HUMAN.renderer()(hostile_report(), options)
    raw = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
           or c in "\u202e"]
    assert raw == []
    assert "\\x1b[2J" in text and "\\x1b]0;owned\\x07" in text and "\\x9b31m" in text
    assert "fake\\x0dline" in text
    if options.unicode:
        assert "\\u202eevil" in text


def outside_code(markdown: str) -> str:
    """What a Markdown renderer reads as text and HTML: fenced blocks (closed by a fence at least as
    long as the opening one) and inline code spans left out."""
    import re

    kept, fence = [], ""
    for line in markdown.splitlines():
        opening = re.match(r"^(`{3,})", line)
        if fence:
            if opening and line.strip() == "`" * len(line.strip()) and len(line.strip()) >= len(fence):
                fence = ""
        elif opening:
            fence = opening.group(1)
        else:
            kept.append(re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", line))
    return "\n".join(kept)


def test_markdown_outputs_show_html_from_values_escaped():
    from mgpu_doctor.renderers import bug_report

    report = hostile_report()
    for text in (OutputFormat.MARKDOWN.renderer()(report, RenderOptions(verbose=True)),
                 bug_report.render(report, RenderOptions(verbose=True))):
        shown = outside_code(text)
        assert "<img" not in shown and "<script>" not in shown and "<b>" not in shown
        assert "&lt;img src=x onerror=alert(1)>" in shown


def test_the_support_report_keeps_html_of_values_inside_code_only():
    """Where a value is shown as code (an environment variable's value) it is inert, and its fence or
    backticks cannot be closed by the value."""
    from mgpu_doctor.renderers import bug_report

    text = bug_report.render(hostile_report(), RenderOptions())
    env_line = next(line for line in text.splitlines() if line.startswith("| `TF_NOTE`"))
    assert env_line.count("````") == 2  # longer than the value's own run of three backticks


def test_html_report_escapes_values():
    from mgpu_doctor.renderers import html_report

    text = html_report.render(hostile_report(), RenderOptions(verbose=True))
    assert "<img src=x" not in text and "<script>x" not in text and "<b>out" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
