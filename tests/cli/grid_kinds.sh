#!/bin/sh
# shellcheck disable=SC2086  # $plan is split into words on purpose
# Every grid kind (study, passkey, zoo, tasks) through every grid subcommand, on
# settings small enough for a test: the run, `grid status` (finished and
# missing), `grid cell` computing a removed cell again, `grid merge`, and a
# rerun that computes nothing. (`grid status` once failed on every zoo grid:
# it read an input `model` that a zoo grid does not have.)
#   grid_kinds.sh POSENC MODEL.gguf TEXT ZOO_TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 zoo_text=$4 dir=$5
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"

# expect STATUS REGEX COMMAND...: exit status and a line of stdout+stderr.
expect() {
  want=$1 regex=$2
  shift 2
  timeout -k 5 300 "$@" >"$dir/log" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || fail "$*: exit $rc, expected $want: $(tail -n 5 "$dir/log")"
  grep -Eq -- "$regex" "$dir/log" || fail "$*: no /$regex/ in: $(tail -n 5 "$dir/log")"
}

for kind in study passkey zoo tasks; do
  out=$dir/$kind
  # The command of each kind (word-split: the test's paths hold no blanks).
  case $kind in
    study) plan="study --model $model --text $text --lengths 16,24 --methods none yarn --bucket 8 --out $out" ;;
    passkey) plan="passkey --model $model --lengths 300 --depths 0,1 --methods none --out $out" ;;
    zoo) plan="zoo --schemes rope,alibi --seeds 0 --train-len 16 --tokens 256 --d-model 16 --layers 1 --heads 2
               --ffn 32 --batch 4 --corpus $zoo_text --text $zoo_text --lengths 16,32 --eval-bytes 64
               --methods yarn --no-half-budget --out $out" ;;
    tasks) plan="tasks --schemes rope,alibi --tasks copy --seeds 0 --train-len 16 --tokens 256 --d-model 16 --layers 1
                 --heads 2 --ffn 32 --batch 4 --lengths 16,32 --sequences 2 --methods yarn --out $out" ;;
  esac
  # shellcheck disable=SC2086
  expect 0 " 2 cells, 0 finished earlier, 2 to compute" "$posenc" $plan
  expect 0 "^$out: a $kind grid of posenc " "$posenc" grid status "$out"
  expect 0 "^cells: 2, finished 2, missing 0$" "$posenc" grid status "$out"
  cell=$(ls "$out"/cells/*.json | head -n 1)
  key=$(basename "$cell" .json)
  rm "$cell"
  expect 0 "^cells: 2, finished 1, missing 1$" "$posenc" grid status "$out"
  expect 2 "1 of 2 cells are missing" "$posenc" grid merge "$out"
  expect 0 "" "$posenc" grid cell "$out" "$key"
  [ -s "$cell" ] || fail "$kind: grid cell $key wrote no $cell"
  expect 0 "wrote .*$kind\.md, .*$kind\.json, .*$kind\.png" "$posenc" grid merge "$out"
  # shellcheck disable=SC2086
  expect 0 " 2 cells, 2 finished earlier, 0 to compute" "$posenc" $plan
done
echo "grid kinds: ok"
