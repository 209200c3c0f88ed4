"""A real two-node Slurm cluster (tests/slurm/cluster.sh) for the tests in this folder.

The fixture installs Slurm and munge from the system packages when missing (install.sh) and
skips, with the reason, where that or the cluster cannot work: not root, no apt, no namespaces.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
CLUSTER = HERE / "cluster.sh"
NODES = ("node1", "node2")


@dataclass(frozen=True)
class SlurmCluster:
    root: Path  # configuration, state and logs (cluster.sh's DIR)

    def env(self) -> dict[str, str]:
        """The environment a user of the cluster has: this venv's mgpu-doctor first on PATH
        (srun hands it to every task), the cluster's slurm.conf."""
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["SLURM_CONF"] = str(self.root / "slurm.conf")
        for name in [n for n in env if n.startswith(("SLURM_", "TF_CONFIG", "MGPU_DOCTOR_"))]:
            if name != "SLURM_CONF":
                del env[name]
        return env

    def run(self, namespace: str, script: str, cwd: Path, timeout: float = 300,
            ) -> subprocess.CompletedProcess[str]:
        """bash -c SCRIPT inside a namespace of the cluster (`ctl`: where srun/salloc run)."""
        return subprocess.run(
            [str(CLUSTER), "run", str(self.root), namespace, "bash", "-c", script],
            cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted((self.root / "log").glob("*")))


def _usable_or_skip() -> None:
    if os.geteuid() != 0:
        pytest.skip("the Slurm cluster needs root (namespaces, veth pairs, Slurm daemons)")
    for script in ("install.sh", "check"):
        args = [str(HERE / script)] if script.endswith(".sh") else [str(CLUSTER), script]
        done = subprocess.run(args, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(done.stderr.strip() or f"{script} failed")


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    _usable_or_skip()
    root = tmp_path_factory.mktemp("slurm")
    try:
        up = subprocess.run([str(CLUSTER), "up", str(root)], capture_output=True, text=True,
                            timeout=120)
        assert up.returncode == 0, f"cluster.sh up failed:\n{up.stderr}"
        yield SlurmCluster(root)
    finally:
        subprocess.run([str(CLUSTER), "down", str(root)], timeout=120)
