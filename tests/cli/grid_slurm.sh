#!/bin/sh
# shellcheck disable=SC2086  # $passkey is split into words on purpose
# The Slurm executor with hostile options and stand-ins for sbatch and
# squeue (tests/cli/fake_slurm): a newline in --partition, --time or --mem
# once became a shell line of the batch script (the stand-in sbatch ran an
# injected `touch`); an odd --out path must stay one word for sh; a squeue
# or sbatch that hangs or prints garbage once hung posenc forever. Each
# must now be refused (exit status 2, naming the option or the program) or
# work, within the timeout.
#   grid_slurm.sh POSENC MODEL.gguf FAKE_SLURM_DIR WORKDIR
set -u

posenc=$1 model=$2 fake_slurm=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
PATH="$fake_slurm:$PATH"
export PATH

# expect STATUS REGEX COMMAND...: exit status and a line of stdout+stderr,
# within 60 s (a hang ends in 124 or 137 and fails).
expect() {
  want=$1 regex=$2
  shift 2
  timeout -k 5 60 "$@" >"$dir/log" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || fail "$*: exit $rc, expected $want (124, 137: it hung): $(tail -n 5 "$dir/log")"
  grep -Eq -- "$regex" "$dir/log" || fail "$*: no /$regex/ in: $(tail -n 5 "$dir/log")"
}
# A one-cell passkey grid on the Slurm executor (word-split: the test's
# paths hold no blanks; the odd --out path below is one argument).
passkey="passkey --model $model --lengths 300 --depths 0 --methods none --executor slurm"

injected="x
touch $dir/injected"
expect 2 '\[grid\] --partition = "x\\x0atouch .*": must be Slurm partition names' \
  "$posenc" $passkey --partition "$injected" --out "$dir/p"
expect 2 '\[grid\] --time = "x\\x0atouch .*": must be a Slurm time' "$posenc" $passkey --time "$injected" --out "$dir/p"
expect 2 '\[grid\] --mem = "x\\x0atouch .*": must be a Slurm memory size' "$posenc" $passkey --mem "$injected" --out "$dir/p"
[ ! -e "$dir/injected" ] || fail "an injected line ran"
# Good values pass.
expect 0 'submitted Slurm job 4242' "$posenc" $passkey --partition gpu,cpu_long --time 1-02:30:00 --mem 4G --no-wait \
  --out "$dir/good"

# A grid directory whose path holds a newline, quotes, $(...) and a %:
# one word in the script, the logs where the pattern says, the same report.
odd="$dir/a b'\$(touch $dir/substituted)%a\"
c"
expect 0 'passkey: 1 trials, 1 cells' "$posenc" $passkey --out "$odd"
[ ! -e "$dir/substituted" ] || fail "a command substitution in the --out path ran"
ls "$odd"/slurm/array-*-0.log >/dev/null 2>&1 || fail "no task log under the odd directory"

# sbatch and squeue that hang or print garbage: bounded by --slurm-timeout.
expect 2 '\[grid\] squeue = job 4242: gave no answer in 2 s \(--slurm-timeout\), so it was killed' \
  env FAKE_SQUEUE=hang "$posenc" passkey --model "$model" --lengths 300 --depths 0 --methods none \
  --executor slurm --slurm-timeout 2 --out "$dir/hang"
expect 2 '\[grid\] squeue = job 4242: printed what is not a list of job states \(PENDING, RUNNING, \.\.\.\): "RUNNING\\x0anot a state \\x1b\[31m"' \
  env FAKE_SQUEUE=garbage "$posenc" passkey --model "$model" --lengths 300 --depths 0 --methods none \
  --executor slurm --slurm-timeout 2 --out "$dir/garbage"
expect 2 '\[grid\] squeue = job 4242: gave no answer in 2 s .*; it printed: GARBAGE' \
  env FAKE_SQUEUE=endless "$posenc" passkey --model "$model" --lengths 300 --depths 0 --methods none \
  --executor slurm --slurm-timeout 2 --out "$dir/endless"
expect 2 '\[grid\] sbatch = ".*\.sh": gave no answer in 2 s \(--slurm-timeout\)' \
  env FAKE_SBATCH=hang "$posenc" passkey --model "$model" --lengths 300 --depths 0 --methods none \
  --executor slurm --slurm-timeout 2 --out "$dir/sbatch_hang"
expect 2 '\[grid\] --slurm-timeout = 0: must be in \(0, 3600\]' "$posenc" $passkey --slurm-timeout 0 --out "$dir/p"
echo "grid slurm: all bounded"
