#!/usr/bin/env bash
# Tensor checksums in model files and checkpoints (issue 46, item 6): every tensor's CRC32C is
# recorded (checked by an independent Python CRC32C), and one bit flipped inside any tensor's bytes
# is refused, naming the file and the tensor, by eval, predict, export, inspect (--verify too), the
# Python package, --resume (both phases' checkpoints) and sweep --resume, leaving no output behind.
# Files without checksums (as written before) still load, with one note. The feature cache (Parquet
# with page CRCs): a damaged part is named, removed and embedded again by train (plain and
# fine-tuning's boundary rows), and not used by eval. Small and fast: the 0.25-width MobileNet at 128 px.
source "$(dirname "$0")/lib.sh"
d=$(scratch tensor-checksums)
MODEL="$SHARED/models/mobilenet_v1_0.25_128.onnx"
EDIT="$PY $(dirname "$0")/safetensors_edit.py"
READ_ST="$PY $(dirname "$0")/../ref/read_safetensors.py"
"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 128 --quiet 2>/dev/null || fail checksums_prep "prep failed"
T="$d/ds/train.parquet"
V="$d/ds/val.parquet"
C=(--cache-dir "$d/cache")
IMG=$(find "$SHARED/data/hymenoptera/val/bees" -name '*.jpg' | sort | head -1)
TRAIN=(--backbone "$MODEL" --batch 16 --epochs 3 "${C[@]}")
"$FTL" train "$T" --val "$V" "${TRAIN[@]}" --out "$d/m.ftl" --checkpoint "$d/ck/c-{epoch}.ckpt" --quiet >/dev/null 2>"$d/train.err" ||
    fail checksums_train "$(tail -3 "$d/train.err")"
"$FTL" eval "$d/m.ftl" "$V" "${C[@]}" --json "$d/intact.json" --quiet >/dev/null 2>&1 || fail checksums_eval_intact "eval failed"

# ---- what the writer records: an independent CRC32C of each tensor's bytes, as safetensors metadata strings
check checksums_model_crc32c_of_every_tensor $EDIT check "$d/m.ftl"
check checksums_checkpoint_crc32c_of_every_tensor $EDIT check "$d/ck/c-3.ckpt"
$READ_ST "$d/ck/c-3.ckpt" >/dev/null && pass checksums_files_keep_the_safetensors_layout ||
    fail checksums_files_keep_the_safetensors_layout "the independent reader refused it"

# ---- inspect --verify of intact files: one line each, exit 0
out=$("$FTL_SAN" inspect --verify "$d/m.ftl" 2>&1) && grep -qE '^.*/m\.ftl: 2 tensors, 8016 bytes: ok, every tensor.s CRC32C matches$' <<<"$out" &&
    pass checksums_verify_intact_model || fail checksums_verify_intact_model "$out"
"$FTL_SAN" inspect --verify --json "$d/ck/c-3.ckpt" >"$d/verify.json" 2>"$d/verify.err" &&
    $PY - "$d/verify.json" "$d/ck/c-3.ckpt" <<'PYEOF' && pass checksums_verify_intact_checkpoint_json || fail checksums_verify_intact_checkpoint_json "$(cat "$d/verify.err")"
import json, os, struct, sys
v = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
tensors = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
print(v)
assert v == {"path": sys.argv[2], "tensors": len(tensors), "bytes": len(raw) - 8 - n, "checksums": True, "ok": True,
             "damaged": None}, v
PYEOF

# ---- one bit flipped in each tensor of the model: every reader refuses, naming file and tensor; no output left
PY_OK=""
if ! ls "$BUILD"/python/ftl/_ftl*.so >/dev/null 2>&1; then
    PY_OK="the Python package is not built (make python)"
elif ! "$PY" -c 'import numpy' 2>/dev/null; then
    PY_OK="numpy is not installed"
fi
python_load_refused() { # FILE TENSOR: ftl.Model.load raises ftl.Error naming both
    PYTHONPATH="$BUILD/python" "$PY" - "$1" "$2" <<'PYEOF'
import sys, ftl
path, tensor = sys.argv[1], sys.argv[2]
try:
    ftl.Model.load(path)
except ftl.Error as e:
    print(e)
    assert path in str(e) and ('tensor "%s" is damaged' % tensor) in str(e), str(e)
else:
    raise AssertionError("loaded a damaged model")
PYEOF
}
tensors=$($EDIT tensors "$d/m.ftl")
check checksums_model_has_head_tensors test "$(echo $tensors)" = "head.kernel head.bias"
for t in $tensors; do
    f="$d/flip-$t.ftl" n=${t//./_}
    $EDIT flip "$d/m.ftl" "$f" "$t"
    pat="flip-$t\.ftl: tensor \"$t\" is damaged: its [0-9]+ bytes have CRC32C [0-9a-f]{8}, the file recorded [0-9a-f]{8}"
    rm -f "$d/out."*
    expect_error "eval_refuses_damaged_$n" 1 "$pat" "$FTL_SAN" eval "$f" "$V" "${C[@]}" --json "$d/out.json" \
        --predictions "$d/out.csv" --confusion "$d/out.conf.csv" --quiet
    expect_error "predict_refuses_damaged_$n" 1 "$pat" "$FTL_SAN" predict "$f" "$IMG"
    expect_error "export_refuses_damaged_$n" 1 "$pat" "$FTL_SAN" export "$f" "$d/out.onnx"
    expect_error "inspect_refuses_damaged_$n" 1 "$pat" "$FTL_SAN" inspect "$f"
    expect_error "inspect_verify_finds_damaged_$n" 1 "$pat" "$FTL_SAN" inspect --verify "$f"
    out=$("$FTL_SAN" inspect --verify "$f" 2>/dev/null)
    grep -qE "flip-$t\.ftl: 2 tensors, 8016 bytes: DAMAGED: tensor \"$t\" has CRC32C [0-9a-f]{8}, the file recorded [0-9a-f]{8}$" <<<"$out" &&
        pass "inspect_verify_names_damaged_$n" || fail "inspect_verify_names_damaged_$n" "$out"
    left=$(ls "$d" | grep '^out\.' | tr '\n' ' ')
    check "damaged_${n}_leaves_no_output" test -z "$left"
    if [ -n "$PY_OK" ]; then
        skip "python_load_refuses_damaged_$n" "$PY_OK"
    else
        out=$(python_load_refused "$f" "$t" 2>&1) && pass "python_load_refuses_damaged_$n" || fail "python_load_refuses_damaged_$n" "$out"
    fi
done

# ---- one bit flipped in each tensor of a checkpoint: --resume refuses, naming it; nothing written
tensors=$($EDIT tensors "$d/ck/c-2.ckpt")
check checksums_checkpoint_tensors test "$(echo $tensors)" = "head.kernel head.bias optimizer.exp_avg optimizer.exp_avg_sq \
optimizer.step optimizer.mu_product early_stopping.best_params loader.position"
for t in $tensors; do
    f="$d/flip-$t.ckpt"
    $EDIT flip "$d/ck/c-2.ckpt" "$f" "$t"
    expect_error "resume_refuses_damaged_${t//./_}" 1 "flip-$t\.ckpt: tensor \"$t\" is damaged" \
        "$FTL" train "$T" --val "$V" "${TRAIN[@]}" --resume "$f" --out "$d/resumed.ftl" --checkpoint "$d/rck/c-{epoch}.ckpt"
done
check checksums_refused_resumes_write_nothing test ! -e "$d/resumed.ftl" -a -z "$(ls "$d/rck" 2>/dev/null)"
expect_error inspect_verify_finds_damaged_checkpoint 1 'flip-optimizer\.exp_avg\.ckpt: tensor "optimizer\.exp_avg" is damaged' \
    "$FTL_SAN" inspect --verify "$d/flip-optimizer.exp_avg.ckpt"

# ---- files without checksums (as ftl wrote them before): they load, with one note, and give the same results
$EDIT strip "$d/m.ftl" "$d/old.ftl"
$EDIT strip "$d/ck/c-2.ckpt" "$d/old.ckpt"
note='old\.(ftl|ckpt) carries no tensor checksums .*so its tensors cannot be verified'
"$FTL_SAN" eval "$d/old.ftl" "$V" "${C[@]}" --json "$d/old.json" >/dev/null 2>"$d/old-eval.err" &&
    [ "$(grep -cE "$note" "$d/old-eval.err")" -eq 1 ] && cmp -s "$d/intact.json" "$d/old.json" &&
    pass old_model_evaluates_with_one_note || fail old_model_evaluates_with_one_note "$(cat "$d/old-eval.err")"
"$FTL_SAN" export "$d/old.ftl" "$d/old.onnx" >/dev/null 2>"$d/old-export.err" && [ "$(grep -cE "$note" "$d/old-export.err")" -eq 1 ] &&
    pass old_model_exports_with_one_note || fail old_model_exports_with_one_note "$(cat "$d/old-export.err")"
out=$("$FTL_SAN" inspect --verify "$d/old.ftl" 2>&1)
[ $? -eq 1 ] && grep -qE 'old\.ftl: 2 tensors, 8016 bytes: NOT VERIFIED: the file carries no tensor checksums' <<<"$out" &&
    grep -q 'cannot be verified: it carries no tensor checksums' <<<"$out" &&
    pass inspect_verify_says_old_model_is_unverified || fail inspect_verify_says_old_model_is_unverified "$out"
"$FTL" train "$T" --val "$V" "${TRAIN[@]}" --resume "$d/old.ckpt" --out "$d/from-old.ftl" >/dev/null 2>"$d/old-resume.err" &&
    [ "$(grep -cE "$note" "$d/old-resume.err")" -eq 1 ] &&
    $PY - "$d/m.ftl" "$d/from-old.ftl" <<'PYEOF' && pass old_checkpoint_resumes_with_one_note || fail old_checkpoint_resumes_with_one_note "$(cat "$d/old-resume.err")"
import json, struct, sys
def tensors(path):  # the data section: resuming reproduces the uninterrupted run's weights exactly
    raw = open(path, "rb").read()
    return raw[8 + struct.unpack("<Q", raw[:8])[0]:]
assert tensors(sys.argv[1]) == tensors(sys.argv[2])
PYEOF
if [ -z "$PY_OK" ]; then
    out=$(PYTHONPATH="$BUILD/python" "$PY" -c 'import sys, ftl; print(ftl.Model.load(sys.argv[1]).classes)' "$d/old.ftl" 2>&1) &&
        [ "$(grep -cE "$note" <<<"$out")" -eq 1 ] && pass python_loads_old_model_with_one_note ||
        fail python_loads_old_model_with_one_note "$out"
else
    skip python_loads_old_model_with_one_note "$PY_OK"
fi
# checksum metadata that does not cover every tensor, or is not hex, is refused (a header edited by hand)
$EDIT set-meta "$d/m.ftl" "$d/partial.ftl" ftl.crc32c '{"head.kernel":"00000000"}'
expect_error partial_checksum_metadata_refused 1 'partial\.ftl: tensor "head\.bias" has no CRC in metadata "ftl\.crc32c"' \
    "$FTL_SAN" eval "$d/partial.ftl" "$V" "${C[@]}" --quiet
$EDIT set-meta "$d/m.ftl" "$d/nothex.ftl" ftl.crc32c '{"head.kernel":"0000000g","head.bias":"00000000"}'
expect_error non_hex_checksum_refused 1 'nothex\.ftl: metadata "ftl\.crc32c": the CRC of tensor "head\.kernel" is not 8 hex digits' \
    "$FTL_SAN" inspect --verify "$d/nothex.ftl"

# ---- a feature cache part with a flipped byte: train names it, removes it and embeds its rows again
# (the same model); eval does not use it (the same metrics)
flip_middle() { # FILE: one bit in the middle of the file (the features' page data)
    $PY -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0x10; open(sys.argv[1], "wb").write(b)' "$1"
}
same_weights() { # A.ftl B.ftl: the same data section (tensor bytes)
    $PY -c 'import struct, sys
def body(p):
    raw = open(p, "rb").read()
    return raw[8 + struct.unpack("<Q", raw[:8])[0]:]
sys.exit(body(sys.argv[1]) != body(sys.argv[2]))' "$1" "$2"
}
part=$(ls "$d"/cache/train-*.features.parquet)
flip_middle "$part"
"$FTL_SAN" inspect --checksums "$part" >/dev/null 2>"$d/inspect-part.err"
grep -q 'page CRC mismatch' "$d/inspect-part.err" && pass parquet_reader_verifies_page_crcs ||
    fail parquet_reader_verifies_page_crcs "$(cat "$d/inspect-part.err")"
"$FTL" train "$T" --val "$V" "${TRAIN[@]}" --out "$d/recached.ftl" >/dev/null 2>"$d/recache.err" &&
    grep -qF "feature cache: $part is damaged (row group 0, column 'features': page at offset" "$d/recache.err" &&
    grep -q "page CRC mismatch: the data is corrupt); removing it and computing its rows again" "$d/recache.err" &&
    grep -q 'feature cache: computing train features' "$d/recache.err" && same_weights "$d/m.ftl" "$d/recached.ftl" &&
    pass train_rebuilds_a_damaged_cache_part || fail train_rebuilds_a_damaged_cache_part "$(cat "$d/recache.err")"
"$FTL" train "$T" --val "$V" "${TRAIN[@]}" --out "$d/recached2.ftl" >/dev/null 2>"$d/recache2.err" &&
    grep -q 'feature cache: reusing 1 part .* for train' "$d/recache2.err" && ! grep -q damaged "$d/recache2.err" &&
    pass rebuilt_cache_part_is_reused || fail rebuilt_cache_part_is_reused "$(cat "$d/recache2.err")"
vpart=$(ls "$d"/cache/val-*.features.parquet)
cp "$vpart" "$d/val-part.bak"
flip_middle "$vpart"
"$FTL_SAN" eval "$d/m.ftl" "$V" "${C[@]}" --json "$d/damaged-cache.json" >/dev/null 2>"$d/damaged-cache.err" &&
    grep -qF "feature cache: $vpart is damaged (" "$d/damaged-cache.err" && grep -q '); not using it$' "$d/damaged-cache.err" &&
    cmp -s "$d/intact.json" "$d/damaged-cache.json" &&
    pass eval_does_not_use_a_damaged_cache_part || fail eval_does_not_use_a_damaged_cache_part "$(cat "$d/damaged-cache.err")"
mv "$d/val-part.bak" "$vpart"

# ---- a fine-tuned model's backbone tensors and phase 2's checkpoint
FT=(--backbone "$MODEL" --batch 16 --epochs 1 --fine-tune-last 1 --fine-tune-epochs 1 "${C[@]}")
ls "$d"/cache >"$d/cache-before.txt"
if "$FTL" train "$T" --val "$V" "${FT[@]}" --out "$d/ft.ftl" --checkpoint "$d/ftck/c-{epoch}.ckpt" --quiet >/dev/null 2>"$d/ft.err"; then
    t=$($EDIT tensors "$d/ft.ftl" | grep -m1 '^backbone/')
    $EDIT flip "$d/ft.ftl" "$d/ft-flip.ftl" "$t"
    tre=$(sed 's/[.]/\\./g' <<<"$t")
    expect_error eval_refuses_damaged_fine_tuned_tensor 1 "ft-flip\.ftl: tensor \"$tre\" is damaged" \
        "$FTL_SAN" eval "$d/ft-flip.ftl" "$V" "${C[@]}" --json "$d/out.json" --quiet
    expect_error export_refuses_damaged_fine_tuned_tensor 1 "ft-flip\.ftl: tensor \"$tre\" is damaged" \
        "$FTL_SAN" export "$d/ft-flip.ftl" "$d/out.onnx"
    check damaged_fine_tuned_model_leaves_no_output test ! -e "$d/out.json" -a ! -e "$d/out.onnx"
    $EDIT flip "$d/ftck/fine-tune-c-1.ckpt" "$d/ft-flip.ckpt" top.params
    expect_error resume_refuses_damaged_fine_tuning_checkpoint 1 'ft-flip\.ckpt: tensor "top\.params" is damaged' \
        "$FTL" train "$T" --val "$V" "${FT[@]}" --fine-tune-epochs 2 --resume "$d/ft-flip.ckpt" --out "$d/ft-resumed.ftl"
    check damaged_fine_tuning_checkpoint_writes_nothing test ! -e "$d/ft-resumed.ftl"
    expect_error fine_tune_only_refuses_a_damaged_init 1 'flip-head\.kernel\.ftl: tensor "head\.kernel" is damaged' \
        "$FTL" train "$T" --val "$V" --backbone "$MODEL" --batch 16 --fine-tune-only --init "$d/flip-head.kernel.ftl" \
        --fine-tune-last 1 --fine-tune-epochs 1 "${C[@]}" --out "$d/ft-init.ftl"
    check damaged_init_writes_nothing test ! -e "$d/ft-init.ftl"
    # the boundary rows' cache part of the cut: rebuilt the same way, the same model
    bpart="$d/cache/$(ls "$d"/cache | grep '^train-' | grep -vxF -f "$d/cache-before.txt")"
    flip_middle "$bpart"
    "$FTL" train "$T" --val "$V" "${FT[@]}" --out "$d/ft-recached.ftl" --quiet >/dev/null 2>"$d/ft-recache.err" &&
        grep -qF "feature cache: $bpart is damaged (" "$d/ft-recache.err" && same_weights "$d/ft.ftl" "$d/ft-recached.ftl" &&
        pass fine_tuning_rebuilds_a_damaged_boundary_part || fail fine_tuning_rebuilds_a_damaged_boundary_part "$(cat "$d/ft-recache.err")"
else
    fail checksums_fine_tune_train "$(tail -3 "$d/ft.err")"
fi

# ---- sweep --resume: a trial's damaged checkpoint, and a damaged trial model it would copy to --out
SW=(--val "$V" --backbone "$MODEL" --epochs 6 --seed 7 --grid lr=1e-3,1e-2 --grid batch=16,32 "${C[@]}")
FTL_TEST_STEP_SLEEP_MS=60 "$FTL" sweep "$T" "${SW[@]}" --out "$d/cut.ftl" >"$d/cut.out" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
    [ -n "$(find "$d/cut.trials" -name '*.ckpt' 2>/dev/null)" ] && break
    sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
ckpt=$(find "$d/cut.trials" -name '*.ckpt' | sort | head -1)
if [ -n "$ckpt" ]; then
    $EDIT flip "$ckpt" "$ckpt.flipped" head.kernel && mv "$ckpt.flipped" "$ckpt"
    expect_error sweep_resume_refuses_damaged_trial_checkpoint 1 "$(basename "$ckpt" | sed 's/[.]/\\./g'): tensor \"head\.kernel\" is damaged" \
        "$FTL" sweep "$T" "${SW[@]}" --out "$d/cut.ftl" --resume
    check sweep_refused_resume_writes_no_model test ! -e "$d/cut.ftl"
else
    fail sweep_killed_with_a_checkpoint "no trial checkpoint after 30 s: $(tail -3 "$d/cut.out")"
fi
"$FTL" sweep "$T" "${SW[@]}" --out "$d/best.ftl" >"$d/sweep.out" 2>&1 || fail checksums_sweep_runs "$(tail -3 "$d/sweep.out")"
cp "$d/best.ftl" "$d/best-before.ftl"
for m in "$d"/best.trials/trial-*.ftl; do $EDIT flip "$m" "$m.flipped" head.bias && mv "$m.flipped" "$m"; done
expect_error sweep_resume_refuses_damaged_trial_model 1 'trial-[0-9]+\.ftl: tensor "head\.bias" is damaged' \
    "$FTL" sweep "$T" "${SW[@]}" --out "$d/best.ftl" --resume
check sweep_refused_copy_keeps_the_model cmp "$d/best.ftl" "$d/best-before.ftl"
finish
