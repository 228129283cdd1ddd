#!/bin/sh
# posenc study --decode [--keys-as-written] on the random-weight Llama
# (trained on 32 tokens; windows of 48, past it), three documents:
#   - the pass is in grid.json's settings and cells and in study.json, and
#     study.md says how the windows ran; a study without --decode writes
#     none of it (the grids made before it keep their settings);
#   - a window's loss is what `posenc ppl --decode [--keys-as-written]`
#     gives on those 48 bytes of its text;
#   - dynamic NTK's keys kept as written score other losses than the
#     consistent ones past the training length (the comparison can fail);
#   - --keys-as-written without --decode is refused (exit status 2).
#   study_decode.sh POSENC MODEL.gguf TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
cp "$text" "$dir/a.txt"
rev "$text" >"$dir/b.txt"
tr 'a-z' 'A-Z' <"$text" >"$dir/c.txt"

study() {
  "$posenc" study --model "$model" --lengths 48 --methods none dynamic-ntk --bucket 8 \
    --text "$dir/a.txt" "$dir/b.txt" "$dir/c.txt" --windows 3 "$@"
}
study --decode --keys-as-written --out "$dir/written" >"$dir/log" 2>&1 || fail "study: $(cat "$dir/log")"
study --decode --out "$dir/relowered" >"$dir/log" 2>&1 || fail "study: $(cat "$dir/log")"
study --out "$dir/prefill" >"$dir/log" 2>&1 || fail "study: $(cat "$dir/log")"
grep -q "keys as written" "$dir/written/study.md" || fail "study.md: $(cat "$dir/written/study.md")"

python3 - "$posenc" "$model" "$dir" <<'PY' || fail "the pass"
import json, subprocess, sys
posenc, model, d = sys.argv[1:]
def windows(name, method):
    report = json.load(open(f"{d}/{name}/study.json"))
    (m,) = [m for m in report["lengths"][0]["methods"] if m["method"] == method]
    return report, m["windows"]
for name, keys in (("written", "as-written"), ("relowered", "relowered")):
    g = json.load(open(f"{d}/{name}/grid.json"))
    assert g["settings"]["pass"] == "decode" and g["settings"]["cached_keys"] == keys, g["settings"]
    for key, cell in g["cells"].items():
        assert cell["params"]["pass"] == "decode" and cell["params"]["cached_keys"] == keys, cell
    report, _ = windows(name, "none")
    assert report["pass"] == "decode" and report["cached_keys"] == keys, report
g = json.load(open(f"{d}/prefill/grid.json"))
assert "pass" not in g["settings"] and all("pass" not in c["params"] for c in g["cells"].values()), g["settings"]
assert "pass" not in json.load(open(f"{d}/prefill/study.json"))
# A window's loss is ppl's on the same bytes, with the same pass.
for name, flags in (("written", ["--decode", "--keys-as-written"]), ("relowered", ["--decode"])):
    _, ws = windows(name, "dynamic-ntk")
    for w in ws:
        piece = open(f"{d}/{'abc'[w['document']]}.txt", "rb").read()[w["offset"]:w["offset"] + 48]
        open(f"{d}/piece.txt", "wb").write(piece)
        out = subprocess.run([posenc, "ppl", "--model", model, "--text", f"{d}/piece.txt", "--ctx", "48",
                              "--max-windows", "1", "--method", "dynamic-ntk", "--json", *flags],
                             capture_output=True, text=True, check=True).stdout
        got = json.loads(out[out.index("{"):])["mean_nll"]
        assert abs(got - w["nll"]) <= 1e-9 * got, (name, w, got)
# Stale keys score otherwise past the training length; the consistent
# decode pass scores what one forward pass scores, to rounding.
_, written = windows("written", "dynamic-ntk")
_, relowered = windows("relowered", "dynamic-ntk")
_, prefill = windows("prefill", "dynamic-ntk")
assert max(abs(a["nll_beyond"] - b["nll_beyond"]) for a, b in zip(written, relowered)) > 1e-3, (written, relowered)
assert max(abs(a["nll"] - b["nll"]) for a, b in zip(relowered, prefill)) < 1e-4, (relowered, prefill)
PY

study --keys-as-written --out "$dir/never" >"$dir/err" 2>&1
status=$?
[ "$status" = 2 ] || fail "exit status $status, not 2, for --keys-as-written without --decode: $(cat "$dir/err")"
grep -q -- "--keys-as-written requires --decode" "$dir/err" || fail "expected the rule, got: $(cat "$dir/err")"
[ ! -e "$dir/never" ] || fail "a refused study left $dir/never"
echo "study decode: ok"
