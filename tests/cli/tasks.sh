#!/usr/bin/env bash
# posenc tasks end to end on a model small enough for a test: the tables
# (every task asked, a learned table without rows past L and with Su's
# decomposition, RoPE under methods, intervals over two seeds), the JSON
# (per-seed counts, the needle by depth), the pictures, a rerun that
# trains nothing, recall's training mix, and models at randomized positions.
# Usage: tasks.sh POSENC DIR
set -euo pipefail
posenc=$1 dir=$2
rm -rf "$dir"
fail() { echo "FAIL: $*"; exit 1; }
tasks() {
  "$posenc" tasks --schemes rope,learned,alibi --tasks copy,needle --train-len 12 --tokens 2048 --d-model 16 \
    --layers 1 --heads 2 --ffn 32 --batch 4 --lengths 12,24 --sequences 4 --depths 0,1 --methods "yarn;window" \
    --seeds 0,1 --out "$dir" "$@" >"$dir.log" 2>&1 || fail "tasks $*: $(cat "$dir.log")"
}
expect() { grep -q -E -- "$1" "$dir.log" || fail "expected /$1/ in: $(cat "$dir.log")"; }

tasks
expect "12 cells, 0 finished earlier, 12 to compute"
expect "^## copy$"
expect "^## needle$"
expect "^\| variant \| train loss \| 12 \(1x\) \| 24 \(2x\) \|$"
ci="[0-9.]+ \[[0-9.]+, [0-9.]+\]†?"
expect "^\| rope \| [0-9.]+ \| $ci \| $ci \|$"
expect "^\| rope\+yarn \| [0-9.]+ \| $ci \| $ci \|$"
expect "^\| learned \| [0-9.]+ \| $ci \| - \|$"
expect "^\| learned\+hierarchical \| [0-9.]+ \| $ci \| $ci \|$"
expect "^\| alibi \| [0-9.]+ \| $ci \| $ci \|$"
# Each seed's own accuracy beside the table, in the order of the seeds.
expect "^Each seed's accuracy \(%\), seeds 0 / 1:$"
expect "^\| rope \| 0 / 1 \| [0-9.]+ / [0-9.]+ \| [0-9.]+ / [0-9.]+ \|$"
expect "^\| learned \| 0 / 1 \| [0-9.]+ / [0-9.]+ \| - / - \|$"
# Past L, the best variant and those within noise of it (paired over the seeds).
expect "^Best past L, and the variants within noise of it \(their paired difference over the seeds, a 95% t interval, holds 0; no order is drawn among them\):$"
expect "^- 24: [a-z+-]+ [0-9.]+%; (within noise: [a-z+, -]+|above every other beyond noise)$"
expect "wrote .*tasks\.md, .*tasks\.json, .*tasks\.png"
expect "tasks: 12 models, 12 cells"
expect "tasks: this run took [0-9]+ s"
for f in tasks.md tasks.json tasks.png tasks-depth.png grid.json; do test -s "$dir/$f" || fail "$f missing"; done
python3 - "$dir/tasks.json" <<'PY' || fail "tasks.json"
import json, sys
t = json.load(open(sys.argv[1]))
copy, needle = t["tasks"]["copy"], t["tasks"]["needle"]
# Copy at 12: 4 sequences of 5 answers a seed; the needle: 4 at each of 2 depths.
assert [s["answers"] for s in copy["rope"][0]["seeds"]] == [20, 20], copy["rope"][0]
assert [s["answers"] for s in needle["rope"][1]["seeds"]] == [8, 8], needle["rope"][1]
for entry in copy["rope"] + needle["alibi"]:
    assert 0 <= entry["low"] <= entry["accuracy"] <= entry["high"] <= 1, entry
    # The seed is the unit: the mean of the seeds' own accuracies, never a zero-width interval.
    rates = [s["correct"] / s["answers"] for s in entry["seeds"]]
    assert [s["seed"] for s in entry["seeds"]] == [0, 1], entry
    assert abs(entry["accuracy"] - sum(rates) / len(rates)) < 1e-12, entry
    assert entry["degenerate"] == (rates[0] == rates[1]) and entry["low"] < entry["high"], entry
# Within L, YaRN and the window are the model's own RoPE: the same counts.
assert copy["rope+yarn"][0]["seeds"] == copy["rope"][0]["seeds"]
assert "accuracy" not in copy["learned"][1] and "accuracy" in copy["learned+hierarchical"][1]
# The needle's depths 0 and 1 fall in the first and the last depth bin.
bins = needle["rope"][0]["by_depth"]
assert bins[0] is not None and bins[-1] is not None and bins[2] is None, bins
assert len(t["models"]) == 12
PY
tasks
expect "12 cells, 12 finished earlier, 0 to compute"
# A plain model's cells leave the optional position_range out: grids
# written before it existed keep their keys (and stay finished).
python3 - "$dir/grid.json" <<'PY' || fail "grid.json of plain models"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"].values()
assert all("position_range" not in c["params"]["model"] for c in cells)
PY
# Recall: twice the budget, a quarter of its rows from the previous-byte
# stream, said in the report and kept in its cells' parameters only.
rm -rf "$dir"
"$posenc" tasks --schemes rope --tasks copy,recall --train-len 12 --tokens 2048 --d-model 16 --layers 1 --heads 2 \
  --ffn 32 --batch 4 --lengths 12 --sequences 4 --methods none --seeds 0 --out "$dir" >"$dir.log" 2>&1 ||
  fail "tasks with recall: $(cat "$dir.log")"
expect "^A recall model trains on 8192 bytes, 25% of its rows from the previous-byte stream"
expect "^## recall$"
python3 - "$dir/grid.json" <<'PY' || fail "grid.json of recall models"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"].values()
recall = [c["params"] for c in cells if c["params"]["task"] == "recall"]
copy = [c["params"] for c in cells if c["params"]["task"] == "copy"]
assert recall and all(p["previous_share"] == 0.25 and p["train"]["tokens"] == 8192 for p in recall), recall
assert copy and all("previous_share" not in p and p["train"]["tokens"] == 2048 for p in copy), copy
PY
# Randomized positions: the models train and run at positions from [0, 24),
# and the report says so.
rm -rf "$dir"
tasks --position-range 24
expect "\*\*Randomized positions\*\* \(Ruoss et al. 2023\)"
expect "^\| learned \| [0-9.]+ \| $ci \| $ci \|$"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['model']['position_range'] == 24" "$dir/tasks.json" ||
  fail "position_range in tasks.json"
python3 - "$dir/grid.json" <<'PY' || fail "grid.json of randomized models"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"].values()
assert all(c["params"]["model"]["position_range"] == 24 for c in cells)
PY
echo "tasks: ok"
