#!/usr/bin/env bash
# posenc zoo end to end on a model small enough for a test: the tables (every
# scheme asked, a learned table without rows past L and with Su's
# decomposition, RoPE under methods, two seeds with their spread, the byte
# n-grams in every table, the loss past L beside RoPE + window and minus
# it with paired intervals, the ranking's steps, the convergence check's
# half-budget twins and the learning curves), the files, a rerun that
# trains nothing, an added seed that trains only its models, and the same
# numbers with 2 threads a cell as with 1.
# Usage: zoo.sh POSENC TEXT DIR
set -euo pipefail
posenc=$1 text=$2 dir=$3
rm -rf "$dir" "$dir.threads" "$dir.lengths16,32" "$dir.lengths16,32,64" "$dir.fire"
fail() { echo "FAIL: $*"; exit 1; }
zoo() {
  "$posenc" zoo --schemes rope,learned,alibi --train-len 16 --tokens 4096 --d-model 16 --layers 1 --heads 2 --ffn 32 \
    --batch 4 --corpus "$text" --text "$text" --lengths 16,32,64 --eval-bytes 512 --methods "yarn;rerope;window" "$@" \
    >"$dir.log" 2>&1 || fail "zoo $*: $(cat "$dir.log")"
}
expect() { grep -q -E -- "$1" "$dir.log" || fail "expected /$1/ in: $(cat "$dir.log")"; }

zoo --seeds 0,1 --out "$dir"
expect "12 cells, 0 finished earlier, 12 to compute"
expect "^\| encoding \| 16 \(1×\) \| 32 \(2×\) \| 64 \(4×\) \| at L, minus the 5-gram \|$"
# The n-grams score the same bytes at every length: one number across a row.
expect "^\| byte 2-gram \(Witten-Bell\) \| ([0-9.]+) \| \1 \| \1 \| — \|$"
expect "^\| byte 5-gram \(Witten-Bell\) \| ([0-9.]+) \| \1 \| \1 \| — \|$"
interval="[+-][0-9.]+ \[[+-][0-9.]+, [+-][0-9.]+\]( within noise)?"
margin="$interval( \*\*has not learned context\*\*| \(of the n-gram\))?"
expect "^\| rope \(as trained\) \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| $margin \|$"
expect "^\| learned \(no rows past L\) \| [0-9.]+ ±[0-9.]+ \| no rows \| no rows \| $margin \|$"
expect "^\| learned \+ hierarchical \(Su\) \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| $margin \|$"
expect "^\| rope \+ rerope \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \| \`rerope:window=8\` \|$"
expect "^\| rope \+ yarn \| .* \| \`yarn:factor=4\` \|$"
# Past L: the bytes predicted at positions >= 16, RoPE + window the control.
expect "^### Past the training length$"
expect "^\| encoding or method \| 32 \(2×\) \| 64 \(4×\) \|$"
expect "^\| rope \+ window \(control: never looks past L\) \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \|$"
expect "^\| learned \(no rows past L\) \| no rows \| no rows \|$"
# Minus the control, paired over the seeds; the ranking's steps; the check.
expect "^\| rope \(as trained\) \| $interval \| $interval \|$"
expect "^### Which steps of the ranking are real$"
expect "^- [a-z0-9 +()]+ \([0-9.]+\) − [a-z0-9 +()]+ \([0-9.]+\): $interval$"
expect "^### Trained to convergence\?$"
expect "^\| encoding \| 2048 bytes \| 4096 bytes \| full − half, 95% paired interval \| seeds' sd \(full\) \| verdict \|$"
expect "^\| alibi \| [0-9.]+ \| [0-9.]+ \| $interval \| [0-9.]+ \| (converged|\*\*still learning\*\*) \|$"
expect "Byte-unigram baseline: [0-9.]+ nats/byte"
expect "wrote .*zoo\.md, .*zoo\.json, .*zoo\.png"
expect "zoo: 12 models, 12 cells"
expect "zoo: this run took [0-9]+ s"
for f in zoo.md zoo.json zoo.png grid.json; do test -s "$dir/$f" || fail "$f missing"; done
# Within L, YaRN and the window are the model's own RoPE: the same numbers
# as trained; ReRoPE's window (L/2 = 8) already changes distances >= 8.
python3 - "$dir/zoo.json" <<'PY' || fail "zoo.json: methods within L differ from the model as trained"
import json, sys
z = json.load(open(sys.argv[1]))
v = {x["variant"]: x for x in z["variants"]}
for name in ("rope+yarn", "rope+window"):
    assert v[name]["lengths"][0]["losses"] == v["rope"]["lengths"][0]["losses"], name
assert v["rope+rerope"]["lengths"][0]["losses"] != v["rope"]["lengths"][0]["losses"]
assert v["learned"]["lengths"][1]["mean"] is None and "16 rows" in v["learned"]["lengths"][1]["error"]
assert len(z["models"]) == 6 and all(m["final_loss"] < 5.5 for m in z["models"])
# The learning curves: 64 points (one a step at this budget: 64 steps), the
# last at the budget; the twins at half of it, scored at L only.
assert all(len(m["curve"]) == 64 and m["curve"][-1]["tokens"] == 4096 for m in z["models"])
assert z["half_budget_tokens"] == 2048 and len(z["half_budget_models"]) == 6
assert all(m["tokens"] == 2048 and [l["length"] for l in m["evaluations"][0]["lengths"]] == [16]
           for m in z["half_budget_models"])
c = {x["scheme"]: x for x in z["convergence"]}
assert sorted(c) == ["alibi", "learned", "rope"], sorted(c)
for x in c.values():
    assert x["converged"] == (abs(x["difference"]) < x["sd"]) and x["low"] <= x["difference"] <= x["high"]
# The paired interval of a row minus the control holds its mean difference.
rope = v["rope"]["lengths_past_train"][1]
assert rope["low"] <= rope["mean"] <= rope["high"] and rope["sd"] > 0
# The n-grams: every order, the same loss at every length, below the unigram,
# the 5-gram below the bigram on the text it was counted on.
n = {x["variant"]: x for x in z["variants"] if x["variant"].endswith("-gram")}
assert sorted(n) == ["2-gram", "3-gram", "4-gram", "5-gram"], sorted(n)
losses = [n[f"{k}-gram"]["lengths"][0]["mean"] for k in (2, 3, 4, 5)]
assert all(len({l["mean"] for l in n[k]["lengths"]}) == 1 for k in n), n
assert losses[0] < z["unigram"]["corpus_frequencies"] and losses[3] < losses[0], losses
assert z["reference"] == "5-gram" and len(z["ngrams"]) == 4
# Within L RoPE + window is RoPE: the same loss past L needs a longer length.
assert v["rope"]["lengths_past_train"][0]["mean"] is None
assert v["rope"]["has_learned_context"] in (True, False)
assert len(v["rope"]["position_loss_minus_reference_at_longest"]) == 64 // 2
PY

zoo --seeds 0,1 --out "$dir"
expect "12 cells, 12 finished earlier, 0 to compute"
zoo --seeds 0,1,2 --out "$dir"
expect "18 cells, 12 finished earlier, 6 to compute"
expect "zoo: 18 models, 18 cells"

# Every length predicts the same bytes whatever other lengths are asked:
# the loss at 16 beside 32 is the loss at 16 beside 32 and 64, to the bit
# (the windows' spacing used to follow the longest length).
for lengths in 16,32 16,32,64; do
  "$posenc" zoo --schemes alibi,rope --methods window --seeds 0 --train-len 16 --tokens 4096 --d-model 16 --layers 1 --heads 2 --ffn 32 \
    --batch 4 --corpus "$text" --text "$text" --lengths "$lengths" --eval-bytes 512 --no-half-budget --out "$dir.lengths$lengths" \
    >"$dir.log" 2>&1 || fail "zoo --lengths $lengths: $(cat "$dir.log")"
done
at16() { python3 -c 'import json,sys
print(repr(json.load(open(sys.argv[1]))["models"][0]["evaluations"][0]["lengths"][0]["loss"]))' "$1"; }
[ "$(at16 "$dir.lengths16,32/zoo.json")" = "$(at16 "$dir.lengths16,32,64/zoo.json")" ] ||
  fail "the loss at 16 changed with 64 added: $(at16 "$dir.lengths16,32/zoo.json") vs $(at16 "$dir.lengths16,32,64/zoo.json")"

# A zoo without a RoPE model (a scheme beyond the default list, by name):
# its tables and its picture, whose RoPE-method panels are left out.
"$posenc" zoo --schemes fire --fire-mlp-width 4 --seeds 0 --train-len 16 --tokens 2048 --d-model 16 --layers 1 --heads 2 \
  --ffn 32 --batch 4 --corpus "$text" --text "$text" --lengths 16,64 --eval-bytes 512 --no-half-budget --out "$dir.fire" \
  >"$dir.log" 2>&1 || fail "zoo --schemes fire: $(cat "$dir.log")"
expect "^\| fire \| [0-9.]+ \| [0-9.]+ \| [+-][0-9.]+ \(one seed: no interval\)( \*\*has not learned context\*\*)? \|$"  # one seed: no spread
grep -q "Trained to convergence" "$dir.fire/zoo.md" && fail "--no-half-budget planned the convergence check"
expect "wrote .*zoo\.md, .*zoo\.json, .*zoo\.png"

# Bitwise the same models and losses with 2 threads a cell (the seconds differ).
zoo --seeds 0,1,2 --jobs 1 --threads 2 --out "$dir.threads"
strip() { python3 -c 'import json,sys
z = json.load(open(sys.argv[1]))
for m in z["models"]:
    print(m["scheme"], m["seed"], m["final_loss"], [(e["variant"], [l["loss"] for l in e["lengths"]]) for e in m["evaluations"]])' "$1"; }
[ "$(strip "$dir/zoo.json")" = "$(strip "$dir.threads/zoo.json")" ] || fail "2 threads a cell gave other numbers"
echo "zoo: ok"
