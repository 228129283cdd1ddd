#!/usr/bin/env bash
# A grid's cells (tools/grid/grid.h): a rerun computes nothing, a cell cut short
# by a kill is computed again, added methods compute only what is new, the
# Slurm executor (a stand-in sbatch that runs the array here) gives the same
# numbers as the local one, and a directory holding another version's cells
# is refused by name.
# Usage: grid_resume.sh POSENC MODEL FAKE_SLURM_DIR DIR
set -euo pipefail
posenc=$1 model=$2 fake_slurm=$3 dir=$4
rm -rf "$dir" "$dir.slurm"
fail() { echo "FAIL: $*"; exit 1; }
run() { "$posenc" passkey --model "$model" --lengths 400 --depths 0,1 --out "$dir" "$@" >"$dir.log" 2>&1 ||
          fail "passkey $*: $(cat "$dir.log")"; }
expect() { grep -q -- "$1" "$dir.log" || fail "expected \"$1\" in: $(cat "$dir.log")"; }

run --methods "none;yarn:factor=2"
expect "4 cells, 0 finished earlier, 4 to compute"
run --methods "none;yarn:factor=2"
expect "4 cells, 4 finished earlier, 0 to compute"
# A cell cut in half, as a kill during a copy would leave it.
cell=$(ls "$dir"/cells/*.json | head -n 1)
head -c 40 "$cell" >"$dir/cut" && mv "$dir/cut" "$cell"
"$posenc" grid status "$dir" >"$dir.log" && expect "finished 3, missing 1"
! "$posenc" grid merge "$dir" >"$dir.log" 2>&1 || fail "merge with a missing cell succeeded"
expect "1 of 4 cells are missing (1 cut short or invalid)"
run --methods "none;yarn:factor=2"
expect "not a whole cell (cut short by an interrupt?), computed again"
expect "4 cells, 3 finished earlier, 1 to compute"
# More methods: only their cells run; a method equal to the model's RoPE
# (linear at factor 1) shares none's cells.
run --methods "none;yarn:factor=2;window:window=16;linear:factor=1"
expect "6 cells, 4 finished earlier, 2 to compute"
"$posenc" grid merge "$dir" --json >"$dir.local.json"

# The same grid through the Slurm executor: the same numbers.
PATH="$fake_slurm:$PATH" "$posenc" passkey --model "$model" --lengths 400 --depths 0,1 \
  --methods "none;yarn:factor=2;window:window=16;linear:factor=1" --executor slurm --out "$dir.slurm" \
  --json >"$dir.slurm.json" 2>"$dir.log" || fail "slurm executor: $(cat "$dir.log")"
expect "submitted Slurm job array 4242: 6 cells"
strip() { grep -v '"seconds"' "$1"; }
[ "$(strip "$dir.local.json")" = "$(strip "$dir.slurm.json")" ] || fail "local and slurm reports differ"

# sbatch failing or missing: errors naming it.
rm -rf "$dir.slurm"
! FAKE_SBATCH=fail PATH="$fake_slurm:$PATH" "$posenc" passkey --model "$model" --lengths 400 --depths 0 \
  --executor slurm --partition nope --out "$dir.slurm" >"$dir.log" 2>&1 || fail "failing sbatch succeeded"
expect "sbatch = .*failed (exit status 1): sbatch: error: invalid partition specified: nope"
! PATH=/nonexistent "$posenc" passkey --model "$model" --lengths 400 --depths 0 --executor slurm \
  --out "$dir.slurm" >"$dir.log" 2>&1 || fail "slurm without sbatch succeeded"
expect "executor = slurm: needs sbatch on PATH"

# Another version's cell in the directory: refused, by name.
other=000000000000000000000000
sed 's/"version":"[^"]*"/"version":"0.0.0-other"/' "$(ls "$dir"/cells/*.json | head -n 1)" >"$dir/cells/$other.json"
sed -i "s/\"key\":\"[^\"]*\"/\"key\":\"$other\"/" "$dir/cells/$other.json"
! "$posenc" grid merge "$dir" >"$dir.log" 2>&1 || fail "merge with a foreign cell succeeded"
expect "$other.json: computed by posenc 0.0.0-other, this grid is posenc"
echo "grid resume: ok"
