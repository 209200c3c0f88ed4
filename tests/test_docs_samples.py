"""Every sample of a command's output in README.md and docs/ is that command's real output.

A sample sits between ``<!-- NAME:begin (generated: MGPU_DOCTOR_UPDATE_GOLDEN=1) -->`` and
``<!-- NAME:end -->``; :data:`SAMPLES` says which command makes it and which part of its output
the page shows. Regenerate them all (then read the diff):

    MGPU_DOCTOR_UPDATE_GOLDEN=1 python -m pytest tests/test_docs_samples.py tests/test_readme.py

A sample that cannot come from a command here (it needs live hardware or a running job, or it is
a benchmark's dated table) is preceded by ``<!-- illustrative: WHY -->``; a ``text`` block that is
neither fails :func:`test_every_output_sample_is_generated_or_marked_illustrative`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from tests.test_readme import check_block

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
GENERATED = re.compile(r"<!-- ([\w-]+):begin \(generated: MGPU_DOCTOR_UPDATE_GOLDEN=1\) -->\n(.*?)<!-- \1:end -->", re.S)
ILLUSTRATIVE = re.compile(r"<!-- illustrative: [^>]{10,} -->\n+$")
FENCE = re.compile(r"^```(\w*)\n.*?^```\n", re.S | re.M)
# Blocks that are input (files, code, commands), not output; `mermaid` pictures are tested in
# test_readme_pictures.
INPUT_LANGUAGES = {"bash", "yaml", "toml", "python", "mermaid", "json"}


def section(title: str) -> Callable[[str], str]:
    """The output's section ``title`` (its heading line to the blank line after it), after '...'."""
    def part(out: str) -> str:
        lines = out.splitlines()
        start = lines.index(title)
        stop = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
        return "...\n" + "\n".join(lines[start:stop]) + "\n"
    return part


def check_lines(title_start: str) -> Callable[[str], str]:
    """Every check whose line starts with ``title_start`` ("[!] Smoke training"), with its details."""
    def part(out: str) -> str:
        shown, inside = [], False
        for line in out.splitlines():
            if re.match(r"\[.\] ", line):
                inside = line[4:].startswith(title_start)
            elif not line.startswith(" "):
                inside = False
            if inside:
                shown.append(line)
        assert shown, f"no check {title_start!r} in the output"
        return "\n".join(shown) + "\n"
    return part


def code_reading(out: str) -> str:
    """The ``FILE:LINE why -> word`` lines of the code reading, unindented."""
    lines = [line.strip() for line in out.splitlines() if re.match(r"\s+\S+\.py:\d+ .* -> \w+$", line)]
    assert lines, "no code reading in the output"
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Sample:
    """One sample: ``argv`` run in ``cwd`` (relative to the repository), ``shown`` picks the part
    the page shows, ``prompt`` puts the command line above it."""
    page: str
    name: str
    argv: tuple[str, ...]
    shown: Callable[[str], str]
    cwd: str = "."
    prompt: bool = True


SAMPLES = (
    Sample("docs/matrix.md", "matrix-query", ("matrix", "query", "tensorflow==2.0.0", "gpus=2"),
           section("Known issues")),
    Sample("docs/matrix.md", "code-reading",
           ("check", "--from", "../sick-box.json", "--code", "tf2_mirrored_predict_loop.py", "-v"),
           code_reading, cwd="tests/data/code", prompt=False),
    # Real smoke runs recorded by RECORDED's commands, replayed by `check --from`.
    Sample("docs/smoke.md", "leak-probe", ("check", "--from", "tests/data/smoke-leak-probe.json"),
           check_lines("Smoke training: dense on 2 simulated CPU device(s), leak probe"), prompt=False),
    Sample("docs/smoke.md", "input-bound", ("check", "--from", "tests/data/smoke-input-bound.json"),
           check_lines("Smoke training: dense on 2 simulated CPU device(s), even batches"), prompt=False),
)


# How the recorded runs were made (on a machine without a GPU, TensorFlow 2.21 and Keras 3): run
# again after a change of what the smoke measures, then regenerate the samples.
RECORDED = {
    "tests/data/smoke-leak-probe.json":
        "MGPU_DOCTOR_SMOKE_FAULT=dense:leak_predict mgpu-doctor smoke --layers dense --leak-probe --format json",
    "tests/data/smoke-input-bound.json":
        "MGPU_DOCTOR_SMOKE_FAULT=dense:slow_input mgpu-doctor smoke --layers dense --format json",
}


def output_of(sample: Sample, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT / sample.cwd)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    main(list(sample.argv))
    shown = sample.shown(capsys.readouterr().out)
    prompt = f"$ mgpu-doctor {' '.join(sample.argv)}\n" if sample.prompt else ""
    return f"```text\n{prompt}{shown}```\n"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s.page}:{s.name}")
def test_the_sample_is_what_the_command_prints(sample: Sample, capsys, monkeypatch):
    check_block(sample.name, output_of(sample, capsys, monkeypatch), page=ROOT / sample.page)


def test_every_output_sample_is_generated_or_marked_illustrative():
    loose = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        generated = [m.span(2) for m in GENERATED.finditer(text)]
        for fence in FENCE.finditer(text):
            if fence.group(1) in INPUT_LANGUAGES or any(a <= fence.start() < b for a, b in generated):
                continue
            if not ILLUSTRATIVE.search(text[:fence.start()]):
                line = text[:fence.start()].count("\n") + 1
                loose.append(f"{page.relative_to(ROOT)}:{line}")
    assert not loose, (f"output samples neither generated nor marked illustrative: {loose}; add them to "
                       f"{Path(__file__).name}'s SAMPLES, or precede them with <!-- illustrative: WHY -->")


def test_every_recorded_run_is_a_file_of_the_tests():
    for path in RECORDED:
        assert json.loads((ROOT / path).read_text(encoding="utf-8"))["smoke_runs"], path


def test_every_sample_names_a_block_that_exists():
    for sample in SAMPLES:
        assert f"<!-- {sample.name}:begin" in (ROOT / sample.page).read_text(encoding="utf-8"), sample


# -- claims in a command's comment: `mgpu-doctor matrix query ...  # -> code (why), code` -----------

CLAIM = re.compile(r"^(mgpu-doctor matrix query [^\n#]+)\n# -> ([^\n]+)$", re.M)


def claims() -> list[tuple[str, str, list[str]]]:
    found = []
    for page in PAGES:
        for command, said in CLAIM.findall(page.read_text(encoding="utf-8")):
            codes = re.findall(r"(?:^|, )([a-z][\w-]*\.[\w.-]+)", re.sub(r"\([^)]*\)", "", said))
            found.append((str(page.relative_to(ROOT)), command.strip(), codes))
    return found


def test_there_are_claims_to_test():
    assert claims()


@pytest.mark.parametrize("page,command,codes", claims(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_query_comment_names_the_problems_the_query_finds(page, command, codes, capsys):
    main([*command.split()[1:], "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    problems = {f["code"] for c in report["checks"] for f in c["findings"] if f["severity"] in ("warning", "error")}
    assert codes and set(codes) == problems, (page, command, codes, sorted(problems))
