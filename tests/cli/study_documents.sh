#!/bin/sh
# posenc study over several documents, on the random-weight Llama (trained
# on 32 tokens, byte-level tokenizer: a token is a byte of these ASCII texts):
#   - --text A B C --windows 6 deals the windows round-robin over the texts,
#     two a text at offsets 0 and floor(tokens / 2); grid.json's entries and
#     study.json's windows record each one's document and offset, and a
#     window's loss is what `posenc ppl` gives on those 48 bytes cut out of
#     its text (the offset recorded is the one read);
#   - the statistics are paired per window: on losses written into the cells
#     (a grid whose methods measured them), yarn a constant 0.1 nats below
#     none on windows whose losses spread from 1 to 6 beats none (the paired
#     t interval, recomputed here from Student's t quantile, excludes 0,
#     while the unpaired one would not), and rerope, +-0.3 around none, is
#     within noise; the verdict lines say so and rank nothing else;
#   - bad input is refused with exit status 2, naming the flag, the value
#     and the rule: a missing text, a text too short for the windows it is
#     dealt, fewer windows than texts, two texts with the same content.
#   study_documents.sh POSENC MODEL.gguf TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
cp "$text" "$dir/a.txt"
rev "$text" >"$dir/b.txt"
tr 'a-z' 'A-Z' <"$text" >"$dir/c.txt"
head -c 60 "$text" >"$dir/short.txt"

study() { "$posenc" study --model "$model" --lengths 48 --methods none yarn rerope:window=8 --bucket 8 "$@"; }
study --text "$dir/a.txt" "$dir/b.txt" "$dir/c.txt" --windows 6 --out "$dir/s" >"$dir/log" 2>&1 ||
  fail "study: $(cat "$dir/log")"

python3 - "$posenc" "$model" "$dir" <<'PY' || fail "documents and offsets"
import json, os, subprocess, sys
posenc, model, d = sys.argv[1:]
g = json.load(open(f"{d}/s/grid.json"))
report = json.load(open(f"{d}/s/study.json"))
tokens = [t["tokens"] for t in report["texts"]]
assert tokens == [os.path.getsize(f"{d}/{n}.txt") for n in "abc"], tokens
expected = [(w % 3, (w // 3) * (tokens[w % 3] // 2)) for w in range(6)]
for method in ("none", "yarn", "rerope:window=8"):
    rows = sorted((e["window"], e["document"], e["offset"]) for e in g["entries"] if e["method"] == method)
    assert [(doc, off) for _, doc, off in rows] == expected, (method, rows)
    (m,) = [m for m in report["lengths"][0]["methods"] if m["method"] == method]
    assert [(w["document"], w["offset"]) for w in m["windows"]] == expected, (method, m["windows"])
# A window's loss is the model's on those bytes of its text, cut out here.
(none,) = [m for m in report["lengths"][0]["methods"] if m["method"] == "none"]
for w in (none["windows"][4], none["windows"][5]):
    piece = open(f"{d}/{'abc'[w['document']]}.txt", "rb").read()[w["offset"]:w["offset"] + 48]
    open(f"{d}/piece.txt", "wb").write(piece)
    out = subprocess.run([posenc, "ppl", "--model", model, "--text", f"{d}/piece.txt", "--ctx", "48",
                          "--max-windows", "1", "--json"], capture_output=True, text=True, check=True).stdout
    got = json.loads(out[out.index("{"):])["mean_nll"]
    assert abs(got - w["nll"]) <= 1e-9 * got, (w, got)
PY

# Constructed losses, written into the cells as a grid whose methods measured them.
python3 - "$dir" <<'PY' || fail "writing the cells"
import json, sys
d = sys.argv[1]
g = json.load(open(f"{d}/s/grid.json"))
beyond = {"none": [1, 2, 3, 4, 5, 6]}
beyond["yarn"] = [x - 0.1 + e for x, e in zip(beyond["none"], [0.01, -0.01, 0.02, -0.02, 0.0, 0.0])]
beyond["rerope:window=8"] = [x + e for x, e in zip(beyond["none"], [0.3, -0.3, 0.3, -0.3, 0.3, -0.2])]
for e in g["entries"]:
    path = f"{d}/s/cells/{e['cell']}.json"
    c = json.load(open(path))
    c["result"]["nll_beyond"] = beyond[e["method"]][e["window"]]
    json.dump(c, open(path, "w"))
PY
"$posenc" grid merge "$dir/s" >"$dir/merge.log" 2>&1 || fail "merge: $(cat "$dir/merge.log")"
grep -q "tokens >= 32: lowest mean loss \`yarn\`; within noise of it (no order among these): \`rerope:window=8\`; beaten by it: \`none\`. Against \`none\`: beat it \`yarn\`; beaten by it none of the others; within noise of it \`rerope:window=8\`." "$dir/s/study.md" ||
  fail "verdicts: $(cat "$dir/s/study.md")"

python3 - "$dir" <<'PY' || fail "paired statistics"
import json, math, statistics, sys
d = sys.argv[1]
T5 = 2.5705818366147395  # Student's t, 0.975 quantile, 5 degrees of freedom (published tables)
report = json.load(open(f"{d}/s/study.json"))
methods = {m["method"]: m for m in report["lengths"][0]["methods"]}
loss = {k: [w["nll_beyond"] for w in m["windows"]] for k, m in methods.items()}
def paired(a, b):
    diffs = [x - y for x, y in zip(a, b)]
    mean, half = statistics.mean(diffs), T5 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return mean, mean - half, mean + half
for k in ("yarn", "rerope:window=8"):
    got = methods[k]["beyond"]["vs_none"]
    want = paired(loss[k], loss["none"])
    assert all(abs(g - w) < 1e-9 for g, w in zip((got["mean"], got["low"], got["high"]), want)), (k, got, want)
assert methods["yarn"]["beyond"]["vs_none"]["excludes_zero"] is True
assert methods["rerope:window=8"]["beyond"]["vs_none"]["excludes_zero"] is False
# Unpaired, yarn's 0.1 would be lost in the windows' spread of 1 to 6 nats.
a, b = loss["yarn"], loss["none"]
half = T5 * math.sqrt(statistics.variance(a) / 6 + statistics.variance(b) / 6)
assert abs(statistics.mean(a) - statistics.mean(b)) < half
comparison = report["lengths"][0]["comparisons"]["beyond"]
assert comparison == {"best": "yarn", "within_noise_of_best": ["rerope:window=8"], "beaten_by_best": ["none"]}, comparison
PY

# Bad input: exit status 2 and a message naming the flag, the value and the rule.
refused() {
  rule=$1 && shift
  study --out "$dir/never" "$@" >"$dir/err" 2>&1
  status=$?
  [ "$status" = 2 ] || fail "exit status $status, not 2, for $*: $(cat "$dir/err")"
  grep -q -- "$rule" "$dir/err" || fail "expected \"$rule\" for $*, got: $(cat "$dir/err")"
}
refused "\[study\] --text = \"$dir/missing.txt\": is not a file" --text "$dir/a.txt" "$dir/missing.txt" --windows 2
refused "\[study\] --text = \"$dir/short.txt\": has 60 tokens, fewer than the 2 window(s) of 48 tokens it is dealt (4 windows round-robin over 2 text(s), never overlapping)" \
  --text "$dir/a.txt" "$dir/short.txt" --windows 4
refused "\[study\] --windows = 2: must be at least the number of texts (3)" \
  --text "$dir/a.txt" "$dir/b.txt" "$dir/c.txt" --windows 2
cp "$dir/a.txt" "$dir/copy.txt"
refused "\[study\] --text = \"$dir/copy.txt\": has the same content as $dir/a.txt: each text must be a distinct document" \
  --text "$dir/a.txt" "$dir/copy.txt" --windows 2
[ ! -e "$dir/never" ] || fail "a refused study left $dir/never"
echo "study documents: ok"
