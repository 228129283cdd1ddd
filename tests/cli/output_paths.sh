#!/bin/sh
# What an output path may be (include/posenc/output_file.h), end to end:
# every --out is checked before the command's work (an empty name, a
# directory, a missing directory, a FIFO; a grid's --out DIR that is a
# file), exit 2 with a message naming it; a symlink's target is written and
# the link stays; a character device is written through, never replaced
# (/dev/full is an error naming it); and a killed writer's temporary is
# removed by the next write of the file.
#   output_paths.sh POSENC TEXT WORKDIR
# /dev/full and /dev/null themselves are written only after a symlink to
# /dev/full has shown that devices are written through: a posenc that
# renamed over its target would replace the link, never the device.
set -u
posenc=$1 text=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
tiny="--pe rope --train-len 16 --d-model 16 --layers 1 --heads 2 --ffn 32 --batch 4"
train() { timeout 60 "$posenc" train $tiny --tokens 512 --text "$text" "$@"; }
# A budget of 10^9 bytes trains for many minutes: an --out checked only
# after training runs into the timeout (exit 124), not exit 2.
refused_before_training() { timeout 10 "$posenc" train $tiny --tokens 1000000000 --text "$text" "$@"; }
# expect_error WHAT PATTERN COMMAND...: exit 2 and PATTERN in its message.
expect_error() {
  what=$1 pattern=$2
  shift 2
  "$@" >"$dir/log" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, expected 2: $(cat "$dir/log")"
  grep -q -- "$pattern" "$dir/log" || fail "$what: no '$pattern' in: $(cat "$dir/log")"
}
device() { stat -L -c '%F %t:%T' "$1"; }

rm -rf "$dir" && mkdir -p "$dir/out" "$dir/isdir"
mkfifo "$dir/out/pipe.gguf" "$dir/out/pipe.png"

# Refused before any work.
expect_error "empty --out" '\[train\] --out = "": must name a file (it is empty)' refused_before_training --out ""
expect_error "FIFO --out" '\[train\] --out = ".*pipe.gguf": is a FIFO (named pipe), not a regular file' \
  refused_before_training --out "$dir/out/pipe.gguf"
[ -p "$dir/out/pipe.gguf" ] || fail "the FIFO was replaced"
expect_error "directory --out" 'isdir": is a directory' refused_before_training --out "$dir/isdir"
expect_error "missing directory" 'missing/x.gguf": cannot be written: No such file or directory' \
  refused_before_training --out "$dir/missing/x.gguf"
expect_error "analyze FIFO --out" '\[analyze decay\] --out = ".*pipe.png": is a FIFO' \
  "$posenc" analyze decay --max-distance 4 --out "$dir/out/pipe.png"
[ -p "$dir/out/pipe.png" ] || fail "the FIFO picture was replaced"

# A grid's --out DIR that is a regular file, or below one, or empty.
echo not-a-directory >"$dir/out/file"
zoo() { timeout 10 "$posenc" zoo --tokens 1000000000 --corpus "$text" --text "$text" "$@"; }
expect_error "zoo --out FILE" '\[zoo\] --out = ".*out/file": is a file, not a directory' zoo --out "$dir/out/file"
expect_error "zoo --out FILE/sub" '\[zoo\] --out = ".*out/file/sub": cannot be created: ".*out/file" is a file' \
  zoo --out "$dir/out/file/sub"
expect_error "zoo --out ''" '\[zoo\] --out = "": must name a directory' zoo --out ""
[ "$(cat "$dir/out/file")" = not-a-directory ] || fail "the file given as a directory was changed"

# A symlink: its target is written, the link stays (also a dangling one).
echo old >"$dir/out/real.gguf"
ln -s real.gguf "$dir/out/link.gguf"
ln -s "$dir/out/created.gguf" "$dir/out/dangling.gguf"
train --out "$dir/out/link.gguf" >"$dir/log" 2>&1 || fail "symlink: $(cat "$dir/log")"
train --out "$dir/out/dangling.gguf" >"$dir/log" 2>&1 || fail "dangling symlink: $(cat "$dir/log")"
for link in link dangling; do [ -L "$dir/out/$link.gguf" ] || fail "$link.gguf is no longer a symlink"; done
for file in real created; do [ "$(head -c 4 "$dir/out/$file.gguf")" = GGUF ] || fail "$file.gguf was not written"; done

# Devices: first through a link of our own, then /dev/full and /dev/null.
ln -s /dev/full "$dir/out/full.gguf"
expect_error "symlink to /dev/full" 'full.gguf": cannot be written: No space left on device' \
  train --out "$dir/out/full.gguf"
[ -L "$dir/out/full.gguf" ] || fail "the symlink to /dev/full was replaced: devices are not written through"
full_before=$(device /dev/full) null_before=$(device /dev/null)
expect_error "/dev/full" '"/dev/full": cannot be written: No space left on device' train --out /dev/full
train --out /dev/null >"$dir/log" 2>&1 || fail "/dev/null: $(cat "$dir/log")"
[ "$(device /dev/full)" = "$full_before" ] || fail "/dev/full is now $(device /dev/full)"
[ "$(device /dev/null)" = "$null_before" ] || fail "/dev/null is now $(device /dev/null)"
case $null_before in "character special file"*) ;; *) fail "/dev/null was $null_before" ;; esac

# A writer killed halfway left .NAME.HOST-PID-N.tmp: the next write of NAME
# removes it (its pid is gone), and keeps one of another host.
dead=$(sh -c 'echo $$')
stale="$dir/out/.real.gguf.$(uname -n)-$dead-0.tmp"
other="$dir/out/.real.gguf.other-host-$dead-0.tmp"
echo half >"$stale" && echo half >"$other"
train --out "$dir/out/real.gguf" >"$dir/log" 2>&1 || fail "rewrite: $(cat "$dir/log")"
[ ! -e "$stale" ] || fail "a dead writer's temporary was left: $(ls -A "$dir/out")"
[ -e "$other" ] || fail "another host's temporary was removed"
[ -z "$(ls -A "$dir/out" | grep -v -e '^pipe\.gguf$' -e '^pipe\.png$' -e '^file$' -e '^real\.gguf$' -e '^link\.gguf$' \
  -e '^created\.gguf$' -e '^dangling\.gguf$' -e '^full\.gguf$' -e '^\.real\.gguf\.other-host-')" ] ||
  fail "left behind: $(ls -A "$dir/out")"
echo "output paths: ok"
