#!/usr/bin/env bash
# A grid through a real Slurm gives the numbers of the local executor.
#
# Starts a single-node Slurm cluster on this machine (scripts/slurm-cluster:
# Debian's slurmctld, slurmd and munge on localhost, a slurm.conf with this
# machine's CPUs and memory), submits a small passkey grid and a small
# study grid on the real model as job arrays (`--executor slurm`), runs the
# same grids with the local executor, and compares the merged reports: every
# number identical (posenc's kernels are bitwise deterministic for any
# thread count), only the timings differ. Skips, saying why, when the
# daemons cannot start here.
# Usage: tests/slurm/slurm_matches_local.sh POSENC MODEL TEXT WORKDIR
set -euo pipefail
posenc=$(realpath "$1") model=$(realpath "$2") text=$(realpath "$3") work=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster="$work/cluster"
rm -rf "$work/local" "$work/slurm"
mkdir -p "$work"

status=0
"$root/scripts/slurm-cluster" start "$cluster" >"$work/cluster.log" 2>&1 || status=$?
if [ "$status" -eq 3 ]; then
  echo "slurm: SKIPPED, the local cluster cannot start here: $(tail -n 3 "$work/cluster.log")"
  exit 0
elif [ "$status" -ne 0 ]; then
  cat "$work/cluster.log"
  exit "$status"
fi
trap '"$root/scripts/slurm-cluster" stop "$cluster" >/dev/null 2>&1 || true' EXIT
eval "$("$root/scripts/slurm-cluster" env "$cluster")"
sinfo

passkey=(passkey --model "$model" --lengths 600,1200 --depths 0.2,0.8
         --methods "yarn:factor=4;self-extend:group=4,window=256")
study=(study --model "$model" --text "$text" --lengths 256,512 --methods "none;ntk:factor=8;window:window=128")
# The reports' JSON (every number at full precision) less the timings.
strip() { grep -v -e '"seconds"' -e '"tokens_per_s"' "$1"; }
for kind in passkey study; do
  declare -n args=$kind
  echo "== $kind grid, local executor"
  "$posenc" "${args[@]}" --out "$work/local/$kind" | tail -n 1
  echo "== $kind grid, Slurm executor (job array)"
  "$posenc" "${args[@]}" --out "$work/slurm/$kind" --executor slurm --cpus-per-task 1 | tail -n 1
  local_json="$work/local/$kind/$kind.json" slurm_json="$work/slurm/$kind/$kind.json"
  if [ "$(strip "$local_json")" != "$(strip "$slurm_json")" ]; then
    diff <(strip "$local_json") <(strip "$slurm_json") | head -n 20
    echo "slurm: FAILED, the $kind grid's numbers differ between the executors"
    exit 1
  fi
  cells=$(ls "$work/slurm/$kind/cells" | wc -l)
  echo "$kind: $cells cells computed by Slurm array tasks, identical to the local executor's"
done
"$posenc" grid status "$work/slurm/passkey"
echo "slurm: 2 passed, 0 failed"
