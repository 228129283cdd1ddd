#!/usr/bin/env bash
# What `posenc study` does without --lengths and --out, and what it says
# before the cells run (the random-weight Llama, trained on 32 tokens):
# - the default length is 1.5x the model's training length (48 here);
# - an estimate of the cells' time is printed first, as `posenc ppl` does;
# - a cell's log gets progress lines while it runs (POSENC_PROGRESS_SECONDS=0:
#   at every step, instead of every 30 s);
# - lengths all within the training length get a note naming a length past it;
# - without --out each study has a directory of its own, named by its
#   settings under build/studies: a second study with other settings leaves
#   the first one's files alone, and the same command again resumes in its
#   directory (nothing to compute);
# - study.md has "vs none" columns, 0 for none itself, and says that one
#   window gives no interval.
# Usage: study_defaults.sh POSENC MODEL TEXT DIR
set -euo pipefail
posenc=$1 model=$2 text=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
expect() { grep -q -- "$1" "$dir/log" || fail "expected \"$1\" in: $(cat "$dir/log")"; }
study() { (cd "$dir" && POSENC_PROGRESS_SECONDS=0 "$posenc" study --model "$model" --text "$text" "$@") >"$dir/log" 2>&1 ||
            fail "study $*: $(cat "$dir/log")"; }

study --methods none yarn
expect "### 48 tokens (1.50x the training length), 1 window from 1 document"
expect "study: 2 of 2 cell(s) to compute in build/studies/random-llama-L48-[0-9a-f]\{8\}, [0-9.e+-]* TFLOP: about [0-9]* s"
expect "| method | as run | ppl, tokens < 32 | ppl, tokens >= 32 | vs none, tokens < 32 | vs none, tokens >= 32 | vs best, tokens >= 32 |"
# One window: values with no interval (a zero-width one would read as certainty).
expect "| none | none | [0-9.]* | [0-9.]* | 0 | 0 | "
expect "| yarn | yarn:factor=1.5 | [0-9.]* | [0-9.]* | [-+][0-9.]* | "
expect "With one window there is no interval"
if grep -q "within the model's training length" "$dir/log"; then fail "a note for a length past it: $(cat "$dir/log")"; fi
first=$(ls -d "$dir"/build/studies/random-llama-L48-*)
grep -q "L 48 none window 0 (random-llama @ 0): [0-9]* of 48 tok ([0-9]*%), [0-9]* tok/s, [0-9.]* s; about [0-9]* s left" "$first"/logs/*.log ||
  fail "no progress lines in the cells' logs: $(cat "$first"/logs/*.log)"
cp "$first/study.md" "$dir/first.md"

# Within the training length: the note, on stderr and in study.md; its own directory.
study --methods none yarn --lengths 16
expect "study: note: every length is within the model's training length of 32 tokens.*--lengths 48 (1.5x)"
expect "Every length here is within the training length.*e.g. 48 (1.5x)"
expect "| method | as run | ppl, all tokens | vs none, all tokens | vs best, all tokens |"
[ "$(ls -d "$dir"/build/studies/* | wc -l)" = 2 ] || fail "not two directories: $(ls "$dir"/build/studies)"
cmp -s "$first/study.md" "$dir/first.md" || fail "the second study changed the first one's study.md"

# Other methods at the same length: another directory still (the digest).
study --methods none --lengths 48
[ "$(ls -d "$dir"/build/studies/* | wc -l)" = 3 ] || fail "not three directories: $(ls "$dir"/build/studies)"
cmp -s "$first/study.md" "$dir/first.md" || fail "the third study changed the first one's study.md"

# The first command again: its own directory, nothing left to compute.
study --methods none yarn
expect "2 cells, 2 finished earlier, 0 to compute"
if grep -q "cell(s) to compute" "$dir/log"; then fail "an estimate with nothing to compute: $(cat "$dir/log")"; fi
echo "study defaults: ok"
