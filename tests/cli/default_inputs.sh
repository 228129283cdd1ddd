#!/bin/sh
# The default --model, --text and --corpus are the files scripts/fetch-model
# and scripts/fetch-texts put under the source tree's build/ (tools/
# default_inputs.h). Run from any other directory, the tool finds them in
# the tree it was built in; where no tree has them, the error says how to
# get them (exit 2). A copy of the tool in a stand-in tree (WORKDIR/tree,
# recognized by scripts/fetch-model) with the tiny model as the default
# model, and a copy outside any tree, each run from an unrelated directory.
#   default_inputs.sh POSENC MODEL.gguf TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }

# The copy outside any tree lives in a fresh directory under /tmp: WORKDIR
# is inside this build, itself inside the real source tree.
loose=$(mktemp -d)
trap 'rm -rf "$loose"' EXIT
rm -rf "$dir" && mkdir -p "$dir/tree/build/release/tools" "$dir/tree/scripts" "$dir/tree/build/models" \
  "$dir/tree/build/texts" "$dir/elsewhere"
cp "$posenc" "$dir/tree/build/release/tools/posenc"
cp "$posenc" "$loose/posenc"
: >"$dir/tree/scripts/fetch-model"
cp "$model" "$dir/tree/build/models/SmolLM2-135M-Instruct.Q4_1.gguf"
text=$(realpath "$text")
cp "$text" "$dir/tree/build/texts/debian-handbook.txt"

# In a tree: the default model is found from another directory.
(cd "$dir/elsewhere" && ../tree/build/release/tools/posenc ppl --text "$text" --ctx 32 --max-windows 1 --json) \
  >"$dir/log" 2>&1 || fail "tree: exit $?: $(cat "$dir/log")"
grep -q "\"model\": \"$dir/tree/build/models/SmolLM2-135M-Instruct.Q4_1.gguf\"" "$dir/log" ||
  fail "tree: not the tree's model: $(cat "$dir/log")"

# ppl's --text defaults too (study's text), as docs/getting-started.md's first command uses it.
(cd "$dir/elsewhere" && ../tree/build/release/tools/posenc ppl --ctx 32 --max-windows 1 --json) \
  >"$dir/log" 2>&1 || fail "tree, ppl without --text: exit $?: $(cat "$dir/log")"
grep -q "\"text\": \"$dir/tree/build/texts/debian-handbook.txt\"" "$dir/log" ||
  fail "ppl: not the tree's default text: $(cat "$dir/log")"

# Outside any tree: the error names the option, the path and the script.
(cd "$dir/elsewhere" && "$loose/posenc" ppl --text "$text" --ctx 32) >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "no tree: exit $rc, expected 2: $(cat "$dir/log")"
grep -q '\[ppl\] --model = "build/models/SmolLM2-135M-Instruct.Q4_1.gguf": not in the current directory; run ./scripts/fetch-model in the source tree, or pass --model FILE' \
  "$dir/log" || fail "no tree: $(cat "$dir/log")"
(cd "$dir/elsewhere" && "$loose/posenc" ppl --model "$model" --ctx 32) >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "ppl without text: exit $rc, expected 2: $(cat "$dir/log")"
grep -q '\[ppl\] --text = "build/texts/debian-handbook.txt": not in the current directory; run ./scripts/fetch-texts' \
  "$dir/log" || fail "ppl without text: $(cat "$dir/log")"
(cd "$dir/elsewhere" && "$loose/posenc" train --pe rope --tokens 64 --train-len 8 --out x.gguf) >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "train without corpus: exit $rc, expected 2: $(cat "$dir/log")"
grep -q '\[train\] --text = "build/texts/train-corpus.txt": .*run ./scripts/fetch-texts' "$dir/log" ||
  fail "train without corpus: $(cat "$dir/log")"
# In the tree but not fetched: the error names the tree too.
rm "$dir/tree/build/models/SmolLM2-135M-Instruct.Q4_1.gguf"
(cd "$dir/elsewhere" && ../tree/build/release/tools/posenc study --lengths 16 --out s) >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "tree without model: exit $rc, expected 2: $(cat "$dir/log")"
grep -q "nor in the tool's source tree $dir/tree; run ./scripts/fetch-model" "$dir/log" ||
  fail "tree without model: $(cat "$dir/log")"
rm -rf "$dir"
echo "default inputs: found from the tool's tree, errors say how to fetch them"
