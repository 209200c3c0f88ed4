"""The test cluster itself: two nodes, each its own hostname and address, one job on both."""

from __future__ import annotations


def test_srun_runs_one_task_on_each_node(slurm_cluster, tmp_path):
    done = slurm_cluster.run(
        "ctl", "srun --nodes=2 --ntasks-per-node=1 --label sh -c "
               "'echo $(hostname) $SLURMD_NODENAME $SLURM_PROCID $(getent hosts $(hostname))'",
        cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr + slurm_cluster.logs()
    lines = sorted(done.stdout.split("\n")[:-1])
    assert lines == ["0: node1 node1 0 10.231.19.11 node1", "1: node2 node2 1 10.231.19.12 node2"]
