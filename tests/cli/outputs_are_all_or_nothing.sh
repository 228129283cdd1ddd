#!/bin/sh
# Outputs replace the old ones whole or not at all (tools/options/output_files.h):
# a target that is a directory, and a disk that fills up (a file-size limit
# stands in for it), are errors naming the file (exit 2), and the previous
# study.md / PNG stay as they were, with no temporaries left beside them
# (nor beside the grid's cells).
#   outputs_are_all_or_nothing.sh POSENC MODEL.gguf TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 dir=$4
fail() { echo "FAIL: $*"; exit 1; }
study() { "$posenc" study --model "$model" --text "$text" --lengths 48 --methods "none;yarn" --bucket 8 --out "$1"; }

rm -rf "$dir" && mkdir -p "$dir/isdir/study.json" "$dir/full"

# study.json is a directory: nothing written, the error names it.
study "$dir/isdir" >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "directory target: exit $rc, expected 2: $(cat "$dir/log")"
grep -q 'out = ".*isdir/study.json": is a directory' "$dir/log" || fail "directory target: $(cat "$dir/log")"
[ ! -e "$dir/isdir/study.md" ] || fail "directory target: study.md was written"
# Only the grid's own files (its plan, its lock, the finished cells, their logs) stay.
[ -z "$(ls -A "$dir/isdir" | grep -v -e '^study.json$' -e '^grid.json$' -e '^grid.lock$' -e '^cells$' -e '^logs$')" ] ||
  fail "directory target left: $(ls -A "$dir/isdir")"

# A full disk: files may hold at most 4 KB (writes past it fail with EFBIG
# once SIGXFSZ is ignored). The old outputs survive.
echo old-table >"$dir/full/study.md"
echo old-picture >"$dir/full/decay.png"
(trap '' XFSZ; ulimit -f 8; study "$dir/full") >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "full disk: exit $rc, expected 2: $(cat "$dir/log")"
grep -Eq 'cannot be written: File too large|was not drawn whole by gnuplot' "$dir/log" || fail "full disk: $(cat "$dir/log")"
[ "$(cat "$dir/full/study.md")" = old-table ] || fail "full disk: study.md replaced"
[ ! -e "$dir/full/study.json" ] || fail "full disk: study.json written"
(trap '' XFSZ; ulimit -f 8; "$posenc" analyze decay --max-distance 2048 --out "$dir/full/decay.png") >"$dir/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "full disk analyze: exit $rc, expected 2: $(cat "$dir/log")"
[ "$(cat "$dir/full/decay.png")" = old-picture ] || fail "full disk: decay.png replaced"
[ -z "$(ls -A "$dir/full" | grep -v -e '^study.md$' -e '^decay.png$' -e '^grid.json$' -e '^grid.lock$' -e '^cells$' -e '^logs$')" ] ||
  fail "full disk left: $(ls -A "$dir/full")"
[ -z "$(ls -A "$dir/full/cells" | grep -v '\.json$')" ] || fail "full disk left: $(ls -A "$dir/full/cells")"

# And with room, all three files appear.
study "$dir/full" >"$dir/log" 2>&1 || fail "study: $(cat "$dir/log")"
for f in study.md study.json study.png; do [ -s "$dir/full/$f" ] || fail "$f missing"; done
echo "outputs: all or nothing"
