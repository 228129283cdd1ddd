#!/bin/sh
# A grid directory as hostile input (tools/grid/grid.h): each case below once
# wrote outside the directory, crashed (SIGFPE, SIGSEGV), spun forever, grew
# memory until the OOM killer came, or hung on a FIFO. Each must now end
# within the timeout in an error naming the file, the field, the value and
# the rule (exit status 2), or, for what `grid status` only reports, exit 0.
#   grid_tampering.sh POSENC MODEL.gguf TEXT ZOO_TEXT WORKDIR
set -u
posenc=$1 model=$2 text=$3 zoo_text=$4 dir=$5
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
parent=$(dirname "$dir")

# expect STATUS REGEX COMMAND...: exit status and a line of stdout+stderr,
# within 30 s (a hang ends in 124 or 137 and fails).
expect() {
  want=$1 regex=$2
  shift 2
  timeout -k 5 30 "$@" >"$dir/log" 2>&1
  rc=$?
  [ $rc -eq "$want" ] || fail "$*: exit $rc, expected $want (124, 137: it hung): $(tail -n 5 "$dir/log")"
  grep -Eq -- "$regex" "$dir/log" || fail "$*: no /$regex/ in: $(tail -n 5 "$dir/log")"
}

# The pristine grids, one of each kind, every cell computed.
"$posenc" study --model "$model" --text "$text" --lengths 16 --methods none --bucket 8 --out "$dir/study" \
  >"$dir/log" 2>&1 || fail "study: $(cat "$dir/log")"
"$posenc" passkey --model "$model" --lengths 300 --depths 0.5 --methods none --out "$dir/passkey" \
  >"$dir/log" 2>&1 || fail "passkey: $(cat "$dir/log")"
"$posenc" zoo --schemes rope --seeds 0 --train-len 16 --tokens 256 --d-model 16 --layers 1 --heads 2 --ffn 32 \
  --batch 4 --corpus "$zoo_text" --text "$zoo_text" --lengths 16,32 --eval-bytes 64 --methods yarn \
  --out "$dir/zoo" >"$dir/log" 2>&1 || fail "zoo: $(cat "$dir/log")"

# copy KIND NAME: NAME, a fresh copy of KIND's pristine grid.
copy() {
  rm -rf "${dir:?}/$2" && cp -r "$dir/$1" "$dir/$2" || fail "copy $1 to $2"
}
# tamper KIND NAME CODE: NAME, a copy of KIND's grid whose grid.json has had
# the Python CODE applied (g: the grid, key: its first cell's key, p: that
# cell's parameters).
tamper() {
  copy "$1" "$2"
  python3 - "$dir/$2/grid.json" "$3" <<'PY' || fail "tamper $2"
import json, sys
path, code = sys.argv[1], sys.argv[2]
g = json.load(open(path))
key = next(iter(g["cells"]))
p = g["cells"][key]["params"]
exec(code)
json.dump(g, open(path, "w"))
PY
}
first_key() { python3 -c 'import json, sys; print(next(iter(json.load(open(sys.argv[1]))["cells"])))' "$1/grid.json"; }
# expect_cell STATUS REGEX NAME: expect of `posenc grid cell` on NAME's first cell.
expect_cell() {
  expect "$1" "$2" "$posenc" grid cell "$dir/$3" "$(first_key "$dir/$3")"
}
cell_field='cells\.[0-9a-f]{24}\.params'

# A cell key that is a path: never a file outside DIR/cells.
for kind in zoo passkey; do
  tamper "$kind" "${kind}_traversal" \
    'g["cells"]["../../../X"] = g["cells"].pop(key); g["entries"][0]["cell"] = "../../../X"'
  expect 2 '\[grid\] key = "\.\./\.\./\.\./X": must be a cell key \(24 lower-case hex digits' \
    "$posenc" grid cell "$dir/${kind}_traversal" ../../../X
  expect 2 '\[grid\] file = ".*grid\.json": cells\.\.\./\.\./\.\./X = "\.\./\.\./\.\./X": must be a cell key' \
    "$posenc" grid status "$dir/${kind}_traversal"
  if [ -e "$parent/X.json" ] || [ -e "$(dirname "$parent")/X.json" ]; then fail "$kind: a cell was written outside DIR"; fi
done

# Parameters each checked by its flag's rule (the same function).
tamper zoo zoo_length_zero 'p["lengths"] = [0]'
expect_cell 2 "$cell_field\.lengths: \[zoo\] --lengths = 0: must be >= 2" zoo_length_zero
tamper zoo zoo_length_last_zero 'p["lengths"] = [16, 0]'
expect_cell 2 "$cell_field\.lengths: \[zoo\] --lengths = 0: must be >= 2" zoo_length_last_zero
tamper zoo zoo_no_lengths 'p["lengths"] = []'
expect_cell 2 "$cell_field\.lengths: \[zoo\] --lengths = \(none\): must list at least one length" zoo_no_lengths
tamper zoo zoo_stride_divisor 'p["stride_divisor"] = 1'
expect_cell 2 "$cell_field\.stride_divisor: \[zoo\] --stride-divisor = 1: must be in \[2, 64\]" zoo_stride_divisor
tamper zoo zoo_bucket_zero 'p["bucket"] = 0'
expect_cell 2 "$cell_field\.bucket: \[zoo\] --bucket = 0: must be in \[1, 2\^32\]" zoo_bucket_zero
tamper zoo zoo_heads 'p["model"]["heads"] = 3'
expect 2 "$cell_field\.model: \[tiny_lm\] heads = 3: must divide d_model = 16" \
  "$posenc" grid merge "$dir/zoo_heads"
tamper study study_offset_negative 'p["offset"] = -1'
expect_cell 2 "$cell_field\.offset: \[study\] offset = -1: must be >= 0" study_offset_negative
tamper study study_document 'p["document"] = 1'
expect_cell 2 "$cell_field\.document: \[study\] document = 1: must name one of the grid's 1 text\(s\)" study_document
tamper study study_bucket_zero 'g["settings"]["bucket"] = 0'
expect 2 'file = ".*grid\.json": settings\.bucket: \[study\] --bucket = 0: must be in \[1, 2\^20\]' \
  "$posenc" grid merge "$dir/study_bucket_zero"
tamper study study_method 'p["method"] = "yarn2"'
expect 2 "$cell_field\.method: \[context extension\] method = \"yarn2\": must be one of" \
  "$posenc" grid status "$dir/study_method"
tamper passkey passkey_depth 'p["depth"] = 1.5'
expect_cell 2 "$cell_field\.depth: \[passkey\] --depths = 1\.5: must be in \[0, 1\]" passkey_depth
tamper passkey passkey_seed 'p["seed"] = -1'
expect_cell 2 "$cell_field\.seed: \[passkey\] --seed = -1: must be >= 0" passkey_seed

# Fields of the wrong type, missing or empty: "[grid] file = ...: field = value: rule", exit 2.
tamper study study_no_entries 'g["entries"] = []'
expect 2 'file = ".*grid\.json": entries = \[\]: must list at least one entry' "$posenc" grid merge "$dir/study_no_entries"
tamper passkey passkey_cells_number 'g["cells"] = 5'
expect 2 'file = ".*grid\.json": cells = 5: must be a JSON object' "$posenc" grid status "$dir/passkey_cells_number"
tamper zoo zoo_no_kind 'del g["kind"]'
expect 2 'file = ".*grid\.json": kind = missing: is required' "$posenc" grid status "$dir/zoo_no_kind"
tamper zoo zoo_settings_type 'g["settings"]["eval_bytes"] = "many"'
expect 2 'file = ".*grid\.json": settings\.eval_bytes = "many": must be an integer' "$posenc" grid merge "$dir/zoo_settings_type"
tamper zoo zoo_digest 'g["inputs"]["text"]["sha256"] = "x"'
expect 2 'file = ".*grid\.json": inputs\.text\.sha256 = "x": must be a SHA-256' "$posenc" grid status "$dir/zoo_digest"

# FIFOs and devices: refused at once, never waited on or read without end.
copy passkey fifo_grid && rm "$dir/fifo_grid/grid.json" && mkfifo "$dir/fifo_grid/grid.json"
expect 2 'grid\.json = ".*grid\.json": is not a regular file' "$posenc" grid status "$dir/fifo_grid"
expect 2 'grid\.json = ".*grid\.json": is not a regular file' "$posenc" grid merge "$dir/fifo_grid"
expect 2 'grid\.json = ".*grid\.json": is not a regular file' \
  "$posenc" passkey --model "$model" --lengths 300 --depths 0.5 --methods none --out "$dir/fifo_grid"
copy passkey fifo_cell
mkfifo "$dir/fifo_cell/cells/000000000000000000000000.json"
expect 0 'not a whole cell \(computed again\): .*0{24}\.json: \[grid\] cell = .*: is not a regular file' \
  "$posenc" grid status "$dir/fifo_cell"
expect 0 'wrote .*passkey\.md' "$posenc" grid merge "$dir/fifo_cell"
expect 0 '1 cells, 1 finished earlier, 0 to compute' \
  "$posenc" passkey --model "$model" --lengths 300 --depths 0.5 --methods none --out "$dir/fifo_cell"
mkfifo "$dir/fifo_input"
tamper passkey fifo_input_grid "g[\"inputs\"][\"model\"][\"path\"] = \"$dir/fifo_input\""
expect_cell 2 'path = ".*fifo_input": is not a regular file' fifo_input_grid
copy passkey zero_cell
cell=$(ls "$dir"/zero_cell/cells/*.json) && rm "$cell" && ln -s /dev/zero "$cell"
expect 0 'not a whole cell \(computed again\): .*: is not a regular file' "$posenc" grid status "$dir/zero_cell"
expect 2 '1 of 1 cells are missing \(1 cut short or invalid\)' "$posenc" grid merge "$dir/zero_cell"
# tamper_cell KIND NAME CODE: NAME, a copy of KIND's grid whose first cell
# file has had the Python CODE applied (c: the cell, r: its result).
tamper_cell() {
  copy "$1" "$2"
  python3 - "$(ls "$dir/$2"/cells/*.json | head -n 1)" "$3" <<'PY' || fail "tamper_cell $2"
import json, sys
path, code = sys.argv[1], sys.argv[2]
c = json.load(open(path))
r = c["result"]
exec(code)
json.dump(c, open(path, "w"))
PY
}
# A cell that answers another question than its key, or whose losses no
# forward pass gives, or that the kind cannot read: not finished (status),
# computed again (a run), never merged. They once merged, and a string loss
# was "finished" to grid status while merge failed.
tamper_cell study cell_params 'c["params"]["offset"] = 2'
expect 0 'finished 0.*|not a whole cell \(computed again\): .*: its params hash to [0-9a-f]{24}, not to its key \(edited\?\)' \
  "$posenc" grid status "$dir/cell_params"
grep -q 'finished 0' "$dir/log" || fail "a cell whose params do not match its key counts as finished: $(cat "$dir/log")"
expect 2 '1 of 1 cells are missing \(1 cut short or invalid\)' "$posenc" grid merge "$dir/cell_params"
tamper_cell study cell_negative 'r["bucket_nll"][0] = -5'
expect 0 'result\.bucket_nll\.0 = -5: a loss must be a finite number in \[0, 2\^18\] nats' \
  "$posenc" grid status "$dir/cell_negative"
expect 2 'cells are missing \(1 cut short or invalid\)' "$posenc" grid merge "$dir/cell_negative"
tamper_cell passkey cell_huge 'r["answer_nll"] = 1e308'
expect 0 'result\.answer_nll = 1e\+?308: a loss must be a finite number' "$posenc" grid status "$dir/cell_huge"
expect 2 'cells are missing' "$posenc" grid merge "$dir/cell_huge"
tamper_cell zoo cell_string_loss 'r["final_loss"] = "low"'
expect 0 'result\.final_loss = "low": a loss must be a number' "$posenc" grid status "$dir/cell_string_loss"
expect 2 'cells are missing' "$posenc" grid merge "$dir/cell_string_loss"
tamper_cell passkey cell_found 'r["found"] = "yes"'
expect 0 'its result is not a passkey cell.s: .*type must be boolean' "$posenc" grid status "$dir/cell_found"
expect 2 'cells are missing' "$posenc" grid merge "$dir/cell_found"
# A grid.json over the bound (sparse: it takes no disk) is refused by size, unread.
copy passkey huge_grid && truncate -s 600M "$dir/huge_grid/grid.json"
expect 2 'grid\.json = ".*": is 629145600 bytes, more than the 536870912' "$posenc" grid status "$dir/huge_grid"
echo "grid tampering: all refused"
