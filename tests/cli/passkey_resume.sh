#!/usr/bin/env bash
# posenc passkey keeps each finished trial: a rerun computes nothing, and a
# last line cut short by an interrupt is skipped and that trial alone redone.
# Usage: passkey_resume.sh POSENC MODEL DIR
set -euo pipefail
posenc=$1 model=$2 dir=$3
rm -rf "$dir"
args=(passkey --model "$model" --lengths 400 --depths 0,1 --methods "none;yarn:factor=2" --out "$dir")
"$posenc" "${args[@]}" >"$dir.first" 2>&1 || { cat "$dir.first"; exit 1; }
grep -q "4 trials, 0 from earlier runs" "$dir.first" || { echo "first run: $(tail -1 "$dir.first")"; exit 1; }
"$posenc" "${args[@]}" >"$dir.second" 2>&1
grep -q "4 trials, 4 from earlier runs" "$dir.second" || { echo "rerun: $(tail -1 "$dir.second")"; exit 1; }
# Cut the last cell in half, as a kill during the write would.
lines=$(wc -l <"$dir/cells.jsonl")
last=$(tail -n 1 "$dir/cells.jsonl")
head -n $((lines - 1)) "$dir/cells.jsonl" >"$dir/cut"
printf '%s' "${last:0:40}" >>"$dir/cut"
mv "$dir/cut" "$dir/cells.jsonl"
"$posenc" "${args[@]}" >"$dir.third" 2>&1
grep -q "is not a whole cell" "$dir.third" || { echo "no note on the cut line"; exit 1; }
grep -q "4 trials, 3 from earlier runs" "$dir.third" || { echo "after the cut: $(tail -1 "$dir.third")"; exit 1; }
# And the file reads whole again afterwards.
"$posenc" "${args[@]}" >"$dir.fourth" 2>&1
grep -q "4 trials, 4 from earlier runs" "$dir.fourth" || { echo "after the redo: $(tail -1 "$dir.fourth")"; exit 1; }
echo "passkey resume: ok"
