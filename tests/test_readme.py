"""README and documentation parts that are made, not written: the example output (README), the
finding-code table, the check reference, the smoke layer table and the matrix coverage (docs/).

All are regenerated with MGPU_DOCTOR_UPDATE_GOLDEN=1 (then read the diff), like the goldens.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mgpu_doctor.checks import CHECKS
from mgpu_doctor.cli import main
from mgpu_doctor.code_table import all_declared, markdown_table
from mgpu_doctor.model.codes import AREAS, RENAMED, is_declared

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DOCUMENTS = [README, *sorted(DOCS.rglob("*.md"))]
EXAMPLE_SNAPSHOT = "tests/data/sick-box.json"
# Files the README names that look like codes.
NOT_CODES = {"cpu.max", "nccl.h"}


def block(name: str, text: str) -> tuple[int, int]:
    """Where README's generated block ``name`` starts and ends (between its two markers)."""
    begin, end = f"<!-- {name}:begin (generated: MGPU_DOCTOR_UPDATE_GOLDEN=1) -->\n", f"<!-- {name}:end -->"
    assert begin in text and end in text, f"no {name} block"
    return text.index(begin) + len(begin), text.index(end)


def check_block(name: str, made: str, normalize=lambda s: s, page: Path = README) -> None:
    text = page.read_text(encoding="utf-8")
    start, stop = block(name, text)
    if os.environ.get("MGPU_DOCTOR_UPDATE_GOLDEN"):
        page.write_text(text[:start] + made + text[stop:], encoding="utf-8")
        text = page.read_text(encoding="utf-8")
        start, stop = block(name, text)
    assert normalize(text[start:stop]) == normalize(made), (
        f"{page.relative_to(ROOT)}'s {name} block is stale: regenerate it with MGPU_DOCTOR_UPDATE_GOLDEN=1 "
        f"{Path(__file__).name} and read the diff")


def test_the_finding_code_table_lists_every_code():
    table = markdown_table()
    check_block("finding-codes", f"{len(all_declared())} finding codes.\n\n{table}", page=DOCS / "reference" / "codes.md")


def test_the_example_is_what_the_cli_prints(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    main(["check", "--from", EXAMPLE_SNAPSHOT])
    printed = capsys.readouterr().out
    # The version in the header changes with every release; the output does not.
    version = re.compile(r"^mgpu-doctor \S+:", re.M)
    check_block("example", f"```text\n$ mgpu-doctor check --from {EXAMPLE_SNAPSHOT}\n{printed}```\n",
                normalize=lambda s: version.sub("mgpu-doctor VERSION:", s))


def test_the_examples_snapshot_has_every_part_a_snapshot_holds_now():
    """No fact of the README's example reads "not in this snapshot (written by an older mgpu-doctor)"."""
    assert "old-snapshot" not in (ROOT / EXAMPLE_SNAPSHOT).read_text(encoding="utf-8")


def test_every_check_has_its_row_in_what_it_checks():
    text = (DOCS / "checks.md").read_text(encoding="utf-8")
    missing = [c.name for c in CHECKS if f"\n| `{c.name}` | " not in text]
    assert not missing, f"add a row `| \\`NAME\\` | finds |` to docs/checks.md's check table for {missing}"


def test_the_check_reference_is_the_registry():
    from mgpu_doctor.code_table import check_reference

    check_block("checks", check_reference(), page=DOCS / "reference" / "checks.md")


def test_every_code_the_readme_names_exists():
    """A code in README's or the documentation's prose or tables (``area.condition`` in backticks)
    is a declared one, or an old name in the code table's 'formerly' column."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in DOCUMENTS)
    declared = all_declared()
    named = set(re.findall(r"`([a-z][a-z0-9-]*\.[A-Za-z0-9.-]*[A-Za-z0-9])`", text))
    unknown = [c for c in sorted(named - NOT_CODES) if c.split(".")[0] in AREAS and not c.endswith((".py", ".toml", ".md", ".json"))
               and not is_declared(c, declared) and c not in RENAMED and not _describes_declared(c, declared)]
    assert not unknown, unknown


def _describes_declared(pattern: str, declared: tuple[str, ...]) -> bool:
    """``smoke.LAYER.CONDITION``: some declared code fits it (its upper-case segments are any)."""
    parts = [".+" if s.isupper() else re.escape(s) for s in pattern.split(".")]
    return any(s.isupper() for s in pattern.split(".")) and any(
        re.fullmatch(r"\.".join(parts), d) for d in declared)


def test_the_smoke_layer_table_is_the_table():
    from mgpu_doctor.smoke.layers import markdown_table
    check_block("smoke-layers", markdown_table(), page=DOCS / "smoke.md")


def test_the_tensorflow_support_table_is_the_table():
    from mgpu_doctor.smoke.support import markdown_table
    from tests.tf_envs import TESTED
    for page in (README, DOCS / "smoke.md"):
        check_block("tf-versions", markdown_table(TESTED), page=page)
