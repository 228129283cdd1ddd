#!/bin/sh
# Inputs a hostile user gives posenc, each once a crash, a hang or a silent
# success: every one must now end in an error that names the problem.
#   hostile_inputs.sh POSENC MODEL.gguf TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"

# expect STATUS REGEX COMMAND...: exit status and a line of stderr+stdout.
expect() {
  want=$1 regex=$2
  shift 2
  timeout 120 "$@" >"$dir/log" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || fail "$*: exit $rc, expected $want: $(tail -n 5 "$dir/log")"
  grep -Eq -- "$regex" "$dir/log" || fail "$*: no /$regex/ in: $(tail -n 5 "$dir/log")"
}

# Output that cannot be written is an error, not exit 0 with an empty file.
for args in "sinusoidal --dim 4 --positions 2 --json" "bias alibi --heads 8 --json" \
            "analyze decay --max-distance 8 --samples 2 --json" \
            "ppl --model $model --text $text --ctx 32 --max-windows 1 --json"; do
  # shellcheck disable=SC2086
  "$posenc" $args >/dev/full 2>"$dir/log"
  rc=$?
  [ $rc -ne 0 ] || fail "$args > /dev/full: exit 0"
  grep -q "standard output cannot be written" "$dir/log" || fail "$args > /dev/full: $(cat "$dir/log")"
done

# A FIFO, a directory or a device as an input: refused at once, no blocking.
mkfifo "$dir/fifo"
expect 2 'path = ".*fifo": is not a regular file' "$posenc" ppl --model "$model" --text "$dir/fifo" --ctx 32
expect 2 'path = ".*fifo": is not a regular file' "$posenc" ppl --model "$dir/fifo" --text "$text" --ctx 32
expect 2 'path = ".*": is a directory' "$posenc" ppl --model "$model" --text "$dir" --ctx 32
expect 2 'path = "/dev/zero": is not a regular file' "$posenc" rope freqs --hf-config /dev/zero

# A thread count the system refuses (a process limit for an unprivileged
# user) is an error naming the count, not a hang in SetNumThreads.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v prlimit >/dev/null; then
  cp "$posenc" "$dir/posenc" && chmod 755 "$dir" "$dir/posenc"
  expect 2 '\[threads\] n = 40: the system refused to start worker thread' \
    setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --nproc=16 "$dir/posenc" bench rope --tokens 64 --reps 1 --threads 40
else
  echo "thread-limit case not run: needs root, setpriv and prlimit"
fi
echo "hostile inputs: all errors"
