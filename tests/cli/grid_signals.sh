#!/bin/sh
# SIGTERM to a grid's parent process (kill, not Ctrl-C at a terminal, which
# reaches the whole process group) once left its `posenc grid cell`
# children running as orphans, still writing cells. The parent must send
# the signal on, wait for its cells, and die of it (exit status 143); no
# cell of the grid may be left running.
#   grid_signals.sh POSENC ZOO_TEXT WORKDIR
set -u
posenc=$1 text=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
out=$dir/zoo-grid-signals  # unique: the cells' command lines hold it
cells() { pgrep -f "grid cell $out" || true; }

# Two cells at once that each train for many seconds.
"$posenc" zoo --schemes rope,alibi --seeds 0 --jobs 2 --train-len 16 --tokens 50000000 --d-model 16 --layers 1 \
  --heads 2 --ffn 32 --batch 4 --corpus "$text" --text "$text" --lengths 16 --eval-bytes 64 --methods yarn \
  --out "$out" >"$dir/log" 2>&1 &
parent=$!
tries=0
while [ -z "$(cells)" ]; do
  tries=$((tries + 1))
  [ $tries -le 300 ] || { kill "$parent"; fail "no grid cell started in 30 s: $(cat "$dir/log")"; }
  sleep 0.1
done
sleep 0.5
kill -TERM "$parent"
# The parent must end within 30 s, by SIGTERM (128 + 15), after its cells.
tries=0
while kill -0 "$parent" 2>/dev/null; do
  tries=$((tries + 1))
  [ $tries -le 300 ] || fail "the parent did not end in 30 s after SIGTERM"
  sleep 0.1
done
wait "$parent"
status=$?
left=$(cells)
if [ -n "$left" ]; then
  # shellcheck disable=SC2086  # one process id a word
  kill $left  # the test's own orphans, by process id
  fail "grid cell processes left running after SIGTERM to their parent: $left"
fi
[ $status -eq 143 ] || fail "the parent's exit status is $status, expected 143 (SIGTERM): $(cat "$dir/log")"
grep -q "grid: Terminated: stopping 2 running cell(s)" "$dir/log" || fail "no stopping line in: $(cat "$dir/log")"
echo "grid signals: cells stopped"
