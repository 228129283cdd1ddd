#!/usr/bin/env bash
# posenc eval prints the strings a checkpoint holds with their control bytes
# escaped: training.corpus (the --text of posenc train, written by the GGUF
# writer) named with an ANSI colour, a newline and a carriage return reaches
# the terminal as \x1b[31m, \x0a and \x0d, never raw.
# Usage: eval_escapes_checkpoint_strings.sh POSENC TEXT DIR
set -euo pipefail
posenc=$1 text=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
corpus="$dir/red$(printf '\033[31m\nline\rX')"
cp "$text" "$corpus"
"$posenc" train --pe alibi --train-len 16 --tokens 256 --d-model 16 --layers 1 --heads 2 --ffn 32 --batch 4 \
  --text "$corpus" --out "$dir/m.gguf" >/dev/null 2>&1 || fail "train"
out=$("$posenc" eval --model "$dir/m.gguf" --text "$text" --lengths 16 --windows 2 2>/dev/null) || fail "eval"
case $out in
  *$'\033'* | *$'\r'*) fail "raw control bytes reach the terminal: $(cat -v <<<"$out")" ;;
esac
grep -qF 'red\x1b[31m\x0aline\x0dX' <<<"$out" || fail "no escaped corpus name in: $out"
echo "eval escapes: ok"
