#!/bin/sh
# One run at a time in a grid directory, and no cell outlives its run.
# A SIGKILL to a `posenc zoo` (which no handler sees) once left its
# `posenc grid cell` workers running under PID 1, where a resume computed
# the same cell beside them; and two runs on one --out each computed every
# cell. Now a second run on a directory in use fails at once (exit status
# 2, naming the directory and the holder's pid), the cells die with their
# run, and the lock goes with it: the same command then resumes.
#   grid_lock.sh POSENC ZOO_TEXT WORKDIR
set -u
posenc=$1 text=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
out=$dir/zoo-grid-lock  # unique: the cells' command lines hold it
cells() { pgrep -f "grid cell $out" || true; }
set -- zoo --schemes rope,alibi --seeds 0 --jobs 2 --train-len 16 --tokens 50000000 --d-model 16 --layers 1 \
  --heads 2 --ffn 32 --batch 4 --corpus "$text" --text "$text" --lengths 16 --eval-bytes 64 --methods yarn \
  --out "$out"
wait_for_cells() {
  tries=0
  while [ -z "$(cells)" ]; do
    tries=$((tries + 1))
    [ $tries -le 300 ] || { kill "$1"; fail "no grid cell started in 30 s: $(cat "$dir/log")"; }
    sleep 0.1
  done
}
cleanup() {
  left=$(cells)
  # shellcheck disable=SC2086  # one process id a word
  [ -z "$left" ] || kill -KILL $left  # the test's own orphans, by process id
}
trap cleanup EXIT

"$posenc" "$@" >"$dir/log" 2>&1 &
first=$!
wait_for_cells "$first"

# A second run on the same directory: refused at once, nothing changed.
before=$(cat "$out/grid.json")
timeout -k 5 30 "$posenc" "$@" >"$dir/second" 2>&1
status=$?
[ $status -eq 2 ] || fail "a second run on a directory in use: exit status $status, expected 2 (124: it ran the grid too): $(tail -n 5 "$dir/second")"
grep -q "\[grid\] out = \".*zoo-grid-lock\": is in use by another run (pid $first, " "$dir/second" ||
  fail "the second run's error does not name the directory and pid $first: $(cat "$dir/second")"
[ "$(cat "$out/grid.json")" = "$before" ] || fail "the second run changed grid.json"

# SIGKILL: the cells must die with their run.
kill -KILL "$first"
wait "$first" 2>/dev/null
tries=0
while [ -n "$(cells)" ]; do
  tries=$((tries + 1))
  [ $tries -le 50 ] || fail "grid cell processes left running 5 s after SIGKILL to their run: $(cells)"
  sleep 0.1
done

# The lock went with the run: the same command resumes (stopped once its cells run).
"$posenc" "$@" >"$dir/resume" 2>&1 &
resume=$!
wait_for_cells "$resume"
kill -TERM "$resume"
wait "$resume"
status=$?
[ $status -eq 143 ] || fail "the resumed run's exit status is $status, expected 143 (SIGTERM): $(cat "$dir/resume")"
echo "grid lock: one run at a time, no orphans"
