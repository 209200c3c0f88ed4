"""The documented Slurm recipes, as the tests run them: taken from docs/cluster.md, never copied."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[2] / "docs" / "cluster.md"
ALTERNATIVE = "# or, equivalently: "


def section(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    assert text.startswith(f"# {heading}\n"), f"{README.name} is not the page {heading!r}"
    return text


def bash_block(heading: str, containing: str) -> str:
    """The one ```bash block of the section that contains `containing`."""
    blocks = [b for b in re.findall(r"```bash\n(.*?)```", section(heading), re.S) if containing in b]
    assert len(blocks) == 1, f"README section {heading!r}: {len(blocks)} bash blocks with {containing!r}"
    return blocks[0]


def snapshot_recipe() -> tuple[list[str], str]:
    """The Slurm snapshot commands (the srun line, then its documented alternative) and the
    fleet command that compares what they wrote."""
    block = bash_block("Comparing the nodes of a cluster", "mgpu-doctor snapshot")
    lines = block.splitlines()
    sruns = [line for line in lines if line.startswith("srun ")]
    sruns += [line.removeprefix(ALTERNATIVE) for line in lines if line.startswith(ALTERNATIVE)]
    fleets = [line for line in lines if line.startswith("mgpu-doctor fleet ")]
    assert len(sruns) == 2 and len(fleets) == 1, block
    return sruns, fleets[0]


def tf_config_recipe() -> str:
    """The srun command that builds TF_CONFIG from the allocation and runs the smoke."""
    block = bash_block("Comparing the nodes of a cluster", "TF_CONFIG")
    assert block.startswith("srun "), block
    return block
