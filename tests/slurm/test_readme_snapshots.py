"""README "Comparing the nodes of a cluster", Slurm: the snapshot lines run verbatim inside a
two-node allocation, then `fleet` over what they wrote; then planted differences on one node."""

from __future__ import annotations

import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mgpu_doctor.model.redact import stable_hash
from mgpu_doctor.model.snapshot import load_snapshot
from tests.slurm.conftest import NODES
from tests.slurm.readme import snapshot_recipe

OTHER_TF_KERAS = "2.20.1"  # CI pins tf-keras 2.21.0 (.ci/constraints.txt)


def hashed(node: str) -> str:
    """The node's hostname as the default redaction writes it into the snapshot."""
    return f"host-{stable_hash(node)[:10]}"


def in_allocation(cluster, command: str, cwd: Path) -> None:
    done = cluster.run("ctl", f"salloc --nodes=2 bash -c {shlex.quote(command)}", cwd=cwd, timeout=180)
    assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}{cluster.logs()}"


def fleet(cluster, command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The README's fleet line, in the shell (its glob), on the submitting machine."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=cluster.env(), capture_output=True,
                          text=True, timeout=120)


def one_snapshot_per_node(folder: Path) -> None:
    files = sorted(p.name for p in folder.glob("snap-*.json"))
    assert files == [f"snap-{node}.json" for node in NODES]
    for node in NODES:
        assert load_snapshot(folder / f"snap-{node}.json").host.hostname == hashed(node)


@pytest.mark.parametrize("which", ["srun --output", "srun sh -c"])
def test_readme_snapshot_lines_take_one_snapshot_per_node(slurm_cluster, tmp_path, which):
    sruns, fleet_line = snapshot_recipe()
    in_allocation(slurm_cluster, sruns[0 if which == "srun --output" else 1], tmp_path)
    one_snapshot_per_node(tmp_path)

    done = fleet(slurm_cluster, fleet_line, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fleet of 2 nodes ({hashed('node1')}, {hashed('node2')})" in done.stdout
    assert "All 2 nodes agree on the" in done.stdout, done.stdout


@pytest.fixture
def node2_differs(slurm_cluster, tmp_path):
    """node2 gets NCCL_IB_DISABLE=1 in its tasks' environment (a TaskProlog, as a node's profile
    would) and tf-keras 2.20.1 in its venv: pip installs it into an overlay over this venv's
    site-packages that only node2's mount namespace sees."""
    wheels = tmp_path / "wheels"
    got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                          str(wheels), f"tf-keras=={OTHER_TF_KERAS}"], capture_output=True, text=True,
                         timeout=300)
    if got.returncode != 0:
        pytest.skip(f"cannot download tf-keras {OTHER_TF_KERAS}: {got.stderr.strip()[-300:]}")
    site = sysconfig.get_paths()["purelib"]
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    env_file = slurm_cluster.root / "task-env-node2"
    env_file.write_text("export NCCL_IB_DISABLE=1\n")
    mounted = slurm_cluster.run("node2", f"mount -t overlay overlay -o lowerdir={site},upperdir={upper},"
                                f"workdir={work} {site}", cwd=tmp_path, timeout=30)
    try:
        assert mounted.returncode == 0, mounted.stderr
        done = slurm_cluster.run("node2", f"{sys.executable} -m pip install -q --no-deps --no-index "
                                 f"{next(wheels.glob('*.whl'))}", cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        yield
    finally:
        env_file.unlink()
        if mounted.returncode == 0:
            slurm_cluster.run("node2", f"umount {site}", cwd=tmp_path, timeout=30)


def test_readme_fleet_reports_what_differs_on_one_node(slurm_cluster, node2_differs, tmp_path):
    sruns, fleet_line = snapshot_recipe()
    in_allocation(slurm_cluster, sruns[0], tmp_path)
    one_snapshot_per_node(tmp_path)

    done = fleet(slurm_cluster, fleet_line, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out, node1, node2 = done.stdout, hashed("node1"), hashed("node2")
    assert "[x] Same NCCL / TensorFlow settings and TF_CONFIG cluster" in out, out
    assert f"env NCCL_IB_DISABLE: 1 on {node2}" in out and f"env NCCL_IB_DISABLE: not set on {node1}" in out
    assert "[!] Same TensorFlow and Keras on every node" in out, out
    assert f"package tf-keras: {OTHER_TF_KERAS} on {node2}" in out, out
    assert f"package tf-keras: 2.21.0 on {node1}" in out, out
