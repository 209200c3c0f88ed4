#!/usr/bin/env bash
# Installs Slurm and munge from the system packages (Debian/Ubuntu) when they are missing.
# Called by the Slurm tests' fixture; exit 1 with the reason on stderr when it cannot.
set -euo pipefail
missing=0
for c in slurmctld slurmd srun munged; do command -v "$c" >/dev/null || missing=1; done
(( missing )) || exit 0
[[ $(id -u) == 0 ]] || { echo "Slurm is not installed and installing it needs root" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "Slurm is not installed and there is no apt-get" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { apt-get install -y -q slurm-wlm munge || { apt-get update -q && apt-get install -y -q slurm-wlm munge; }; } >"$log" 2>&1; then
    echo "apt-get install slurm-wlm munge failed: $(tail -n 3 "$log" | tr '\n' ' ')" >&2
    exit 1
fi
