#!/bin/sh
# posenc passkey's independent trials and their paired report, on the
# random-weight Llama (which finds no key, so the outcomes the verdicts are
# tested on are written into the cells, as a grid whose methods found them):
#   - the trial set is fixed by --seed, the same for every method (the same
#     depth in grid.json, the same key and prompt digest in every cell), and
#     another seed draws other trials;
#   - McNemar's verdicts on constructed outcomes: 12/12 against 0/12 and
#     2/12 is "beats" (p = 2/2^12, 2/2^10), 3 discordant trials against 0 is
#     within noise (p = 0.25), and the exact p-values are in the JSON;
#   - an independent trial's depth edited in grid.json is refused;
#   - the fixed-depth grids committed under docs/gallery still read as
#     finished and merge, with no interval.
#   passkey_paired.sh POSENC MODEL.gguf SOURCE_DIR WORKDIR
set -u
posenc=$1 model=$2 source=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"

run() { "$posenc" passkey --model "$model" --lengths 300 --trials 12 --methods "none;self-extend;yarn" "$@" \
          >"$dir/log" 2>&1 || fail "passkey $*: $(cat "$dir/log")"; }
run --seed 3 --out "$dir/a"
run --seed 3 --out "$dir/b"
run --seed 4 --out "$dir/c"

python3 - "$dir" <<'PY' || fail "trial set"
import json, sys
d = sys.argv[1]
def trials(name):
    g = json.load(open(f"{d}/{name}/grid.json"))
    assert g["settings"]["design"] == "independent", g["settings"]
    return g, {(e["method"], e["trial"]): e["depth"] for e in g["entries"]}
ga, a = trials("a")
gb, b = trials("b")
gc, c = trials("c")
assert sorted(ga["cells"]) == sorted(gb["cells"]), "the same seed planned other cells"
assert a == b, "the same seed drew other depths"
assert len(a) == 36, len(a)
for t in range(12):
    depths = {a[(m, t)] for m in ("none", "self-extend", "yarn")}
    assert len(depths) == 1, f"trial {t}: depths differ between methods: {depths}"
assert len({a[("none", t)] for t in range(12)}) == 12, "two trials share a depth"
assert all(a[("none", t)] != c[("none", t)] for t in range(12)), "seed 4 drew seed 3's depths"
cells = json.load(open(f"{d}/a/passkey.json"))["cells"]
by_trial = {}
for cell in cells:
    by_trial.setdefault(cell["trial"], set()).add((cell["key"], cell["depth"], cell["prompt_sha256"]))
assert len(by_trial) == 12
for t, seen in by_trial.items():
    assert len(seen) == 1, f"trial {t}: the methods saw different prompts: {seen}"
assert len({next(iter(s))[2] for s in by_trial.values()}) == 12, "two trials share a prompt"
PY

# set_found NAME METHOD TRIALS: the cells of METHOD in grid NAME found the key
# exactly at the trials listed (comma-separated; "" for none).
set_found() {
  python3 - "$dir/$1" "$2" "$3" <<'PY' || fail "set_found $*"
import glob, json, sys
d, method, found = sys.argv[1], sys.argv[2], {int(t) for t in sys.argv[3].split(",") if t}
g = json.load(open(f"{d}/grid.json"))
keys = {e["cell"]: e["trial"] for e in g["entries"] if e["method"] == method}
for key, trial in keys.items():
    path = f"{d}/cells/{key}.json"
    cell = json.load(open(path))
    cell["result"]["found"] = trial in found
    json.dump(cell, open(path, "w"))
PY
}
merge() {
  "$posenc" grid merge "$dir/$1" >"$dir/merge.log" 2>&1 || fail "merge $1: $(cat "$dir/merge.log")"
}
expect_line() {
  grep -Fq -- "$2" "$dir/$1/passkey.md" || fail "$1: no \"$2\" in: $(cat "$dir/$1/passkey.md")"
}

# none finds all 12, self-extend none, yarn 2: none beats both (12/0 and
# 10/0 discordant), self-extend and yarn are within noise (0/2).
set_found a none 0,1,2,3,4,5,6,7,8,9,10,11
set_found a self-extend ""
set_found a yarn 4,9
merge a
expect_line a "| none | 12/12 (0) 100% [76, 100] |"
expect_line a "| yarn | 2/12 (0) 17% [5, 45] |"
expect_line a "**300 tokens.** Most found: none 12/12. No method within noise of it. It beats self-extend 0/12 (12/0, p = 0.00049); yarn 2/12 (10/0, p = 0.002). Every other pair is within noise."
python3 - "$dir/a/passkey.json" <<'PY' || fail "comparisons in passkey.json"
import json, sys
r = json.load(open(sys.argv[1]))
(at,) = r["comparisons"]
assert at["length"] == 300 and at["most_found"] == "none", at
pairs = {(p["a"], p["b"]): p for p in at["pairs"]}
def check(a, b, only_a, only_b, p, verdict):
    q = pairs[(a, b)]
    assert (q["only_a"], q["only_b"], q["trials"], q["verdict"]) == (only_a, only_b, 12, verdict), q
    assert abs(q["p_value"] - p) < 1e-12, q
check("none", "self-extend", 12, 0, 2 / 2**12, "none beats")
check("none", "yarn", 10, 0, 2 / 2**10, "none beats")
check("self-extend", "yarn", 0, 2, 0.5, "within noise")
assert len(r["cells"]) == 36 and all("found" in c and "depth" in c for c in r["cells"])
PY

# Three trials only none found, none only self-extend: p = 2/8, within noise;
# yarn 4/0 against self-extend: p = 0.125, within noise too.
set_found a none 0,1,2,3,4,5
set_found a self-extend 0,1,2
set_found a yarn 0,1,2,3,4,5,6
merge a
expect_line a "Most found: yarn 7/12. Within noise of it: none 6/12 (1/0, p = 1); self-extend 3/12 (4/0, p = 0.12). It beats no method."
expect_line a "Every other pair is within noise."
python3 - "$dir/a/passkey.json" <<'PY' || fail "within noise in passkey.json"
import json, sys
(at,) = json.load(open(sys.argv[1]))["comparisons"]
(q,) = [p for p in at["pairs"] if (p["a"], p["b"]) == ("none", "self-extend")]
assert (q["only_a"], q["only_b"], q["verdict"]) == (3, 0, "within noise") and abs(q["p_value"] - 0.25) < 1e-12, q
PY

# An independent trial's depth is its draw: an edited one is refused.
python3 - "$dir/b/grid.json" <<'PY' || fail "tamper"
import json, sys
g = json.load(open(sys.argv[1]))
key = next(iter(g["cells"]))
g["cells"][key]["params"]["depth"] = 0.5
json.dump(g, open(sys.argv[1], "w"))
PY
"$posenc" grid status "$dir/b" >"$dir/log" 2>&1 && fail "an edited depth was accepted"
grep -Eq 'params\.depth: \[passkey\] depth = 0\.5: must be the depth drawn for trial [0-9]+ from seed 3' "$dir/log" ||
  fail "edited depth: $(cat "$dir/log")"

# The committed fixed-depth grids: every cell still finished (their keys
# unchanged), and they merge, by depth, without intervals.
for grid in passkey passkey-rates gemma-passkey gemma-passkey-rates; do
  cp -r "$source/docs/gallery/$grid" "$dir/$grid"
  "$posenc" grid status "$dir/$grid" >"$dir/log" 2>&1 || fail "status $grid: $(cat "$dir/log")"
  grep -Eq 'cells: ([0-9]+), finished \1, missing 0' "$dir/log" || fail "status $grid: $(cat "$dir/log")"
  merge "$grid"
  expect_line "$grid" "the fixed-depth design"
  grep -q '%' "$dir/$grid/passkey.md" && fail "$grid: a rate printed for trials that are not independent"
done
expect_line passkey-rates "| rerope | 5 / 5 / 5 * | 5 / 5 / 5 | 5 / 5 / 5 |"
echo "passkey paired: ok"
