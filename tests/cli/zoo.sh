#!/usr/bin/env bash
# posenc zoo end to end on a model small enough for a test: the tables (every
# scheme asked, a learned table without rows past L and with Su's
# decomposition, RoPE under methods, two seeds with their spread, the byte
# n-grams in every table, the loss past L beside RoPE + window and minus
# it with paired intervals, the ranking's steps, the convergence check's
# half-budget twins and the learning curves), the files, a rerun that
# trains nothing, an added seed that trains only its models, and the same
# numbers with 2 threads a cell as with 1; the n-grams on the models' bytes
# and the verdict rule; a grid planned only, and priced by grid status.
# Usage: zoo.sh POSENC TEXT DIR
set -euo pipefail
posenc=$1 text=$2 dir=$3
rm -rf "$dir" "$dir.threads" "$dir.lengths16,32" "$dir.lengths16,32,64" "$dir.fire" "$dir.plan"
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
expect "^### Past the training length( \(early training for the schemes above\))?$"
expect "^\| encoding or method \| 32 \(2×\) \| 64 \(4×\) \|$"
expect "^\| rope \+ window \(control: never looks past L\) \| [0-9.]+ ±[0-9.]+ \| [0-9.]+ ±[0-9.]+ \|$"
expect "^\| learned \(no rows past L\) \| no rows \| no rows \|$"
# Minus the control, paired over the seeds; the ranking's steps; the check.
expect "^\| rope \(as trained\) \| $interval \| $interval \|$"
expect "^### Which steps of the ranking are real$"
# No scheme of 4096 bytes passes the verdict rule: no ranking is printed.
expect "^No ranking: it needs two schemes that pass the verdict rule \(early training\)\.$"
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
# The n-grams on the models' bytes: one set a seed, counted on its batches
# (64 steps x 4 windows x 17 bytes), the same orders; fitted on 4352 bytes
# and not on the text it scores (the corpus is the text here), the 5-gram is
# worse than the corpus's.
seen = z["ngrams_on_models_bytes"]
assert [x["seed"] for x in seen] == [0, 1] and all(x["bytes"] == 64 * 4 * 17 for x in seen), seen
assert all([e["variant"] for e in x["ngrams"]] == ["2-gram", "3-gram", "4-gram", "5-gram"] for x in seen)
assert all(x["ngrams"][3]["lengths"][0]["loss"] > losses[3] for x in seen)
assert seen[0]["ngrams"][3]["lengths"][0]["loss"] != seen[1]["ngrams"][3]["lengths"][0]["loss"]
# Each scheme's loss at L minus its seed's 5-gram, paired over the two seeds.
margins = {x["scheme"]: x for x in z["margin_to_ngram_on_models_bytes"]}
assert sorted(margins) == ["alibi", "learned", "rope"], margins
for s, x in margins.items():
    per_seed = [m["evaluations"][0]["lengths"][0]["loss"] - n["ngrams"][3]["lengths"][0]["loss"]
                for m in sorted((m for m in z["models"] if m["scheme"] == s), key=lambda m: m["seed"])
                for n in seen if n["seed"] == m["seed"]]
    assert abs(x["mean"] - sum(per_seed) / 2) < 1e-12 and x["seeds"] == 2 and x["low"] <= x["mean"] <= x["high"]
    assert x["below"] == (x["high"] < 0)
# The verdict rule: a scheme is early training exactly when it is still
# learning or not below its bytes' 5-gram beyond noise (such tiny models are).
early = {x["scheme"]: x["reasons"] for x in z["early_training"]}
for s in margins:
    assert (s in early) == (not c[s]["converged"] or not margins[s]["below"]), (s, early)
assert early, "a 4096-byte model passed the verdict rule"
PY
expect_md() { grep -q -E -- "$1" "$dir/zoo.md" || fail "expected /$1/ in zoo.md: $(cat "$dir/zoo.md")"; }
expect_md "^### Verdict rule$"
expect_md "\*\*Early training\*\* — no extrapolation verdict for:"
expect_md "^### The n-grams on the models' bytes$"
expect_md "^\| byte 5-gram on the models' bytes \| [0-9.]+ ±[0-9.]+ \| — \| — \|$"
expect_md "^\| rope \(as trained\) \| [0-9.]+ \| $interval \| (below it|\*\*not below it beyond noise\*\*) \|$"

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
# Without the check no verdict: the report says why (the committed default
# zoo's cells, computed before the check, merged to `convergence: []` and
# verdicts all the same).
python3 - "$dir.fire/zoo.json" <<'PY' || fail "zoo.json: a zoo without the convergence check is not early training"
import json, sys
z = json.load(open(sys.argv[1]))
assert z["convergence"] == [] and z["half_budget_models"] == []
early = {x["scheme"]: x["reasons"] for x in z["early_training"]}
assert "no convergence check (needs half-budget models of two seeds)" in early["fire"], early
PY
grep -q "No ranking: it needs two schemes that pass the verdict rule" "$dir.fire/zoo.md" || fail "a ranking without verdicts"
expect "wrote .*zoo\.md, .*zoo\.json, .*zoo\.png"

# Bitwise the same models and losses with 2 threads a cell (the seconds differ).
zoo --seeds 0,1,2 --jobs 1 --threads 2 --out "$dir.threads"
strip() { python3 -c 'import json,sys
z = json.load(open(sys.argv[1]))
for m in z["models"]:
    print(m["scheme"], m["seed"], m["final_loss"], [(e["variant"], [l["loss"] for l in e["lengths"]]) for e in m["evaluations"]])' "$1"; }
[ "$(strip "$dir/zoo.json")" = "$(strip "$dir.threads/zoo.json")" ] || fail "2 threads a cell gave other numbers"
# --plan-only writes the grid and computes nothing; grid status prices it
# (flops in all; core-hours at another grid's finished cells' rate), before
# and without a cell of its own.
rm -rf "$dir.plan"
zoo --seeds 0,1,2,3,4 --plan-only --out "$dir.plan"
expect "planned .*\.plan: 30 cells to compute\. Its cost: posenc grid status .*\.plan"
[ -z "$(ls -A "$dir.plan/cells" 2>/dev/null)" ] || fail "--plan-only computed cells"
"$posenc" grid status "$dir.plan" >"$dir.log" 2>&1 || fail "status: $(cat "$dir.log")"
expect "^cells: 30, finished 0, missing 30$"
expect "^cost: [0-9.e+-]+ TFLOP in all$"
"$posenc" grid status "$dir.plan" --rate-from "$dir" >"$dir.log" 2>&1 || fail "status --rate-from: $(cat "$dir.log")"
expect "^cost: [0-9.e+-]+ TFLOP in all, about [0-9.]+ core-hours at [0-9.]+ GFLOP/s per core \(.*'s finished cells\)$"
expect "^compute left: about [0-9.]+ core-minutes"
"$posenc" grid status "$dir.plan" --rate-from "$dir.plan" >"$dir.log" 2>&1 && fail "a rate from no finished cell"
expect "\[grid\] --rate-from = .*: has no finished cell to measure a rate from"
echo "zoo: ok"
