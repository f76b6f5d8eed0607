#!/usr/bin/env bash
# `ftl inspect` on bad Parquet input, under ASan+UBSan ($FTL_SAN): a missing file or a folder
# (exit 2, named), not Parquet, truncated at many offsets, seeded bit flips in the footer, page
# headers and page data, an unknown encoding, an unsupported codec (exit 1 with a message naming
# the file and the column), a list column (named as not read) -- never a crash or a sanitizer
# report.
source "$(dirname "$0")/lib.sh"
T=$(scratch parquet_bad_input)
GEN=$BUILD/tools/ftl_parquet_gen
if [ ! -x "$GEN" ] || [ ! -x "$FTL_SAN" ]; then
    fail "parquet bad input setup" "$GEN or $FTL_SAN missing (make test builds them)"
    finish
fi

expect_error "missing file" 2 "cannot open .*/missing\.parquet: No such file" "$FTL_SAN" inspect "$T/missing.parquet"
expect_error "a folder" 2 "is a folder" "$FTL_SAN" inspect "$T"
printf 'label,image\n1,abc\n' >"$T/data.csv"
expect_error "not Parquet (csv named .parquet)" 1 "data\.parquet: not a Parquet file" \
    bash -c "cp '$T/data.csv' '$T/data.parquet' && exec '$FTL_SAN' inspect '$T/data.parquet'"
expect_error "not Parquet (no extension)" 1 "not a Parquet file" "$FTL_SAN" inspect "$T/data.csv"

"$GEN" refdata "$T/good.parquet" >/dev/null --rows 300 --image-bytes 50 --row-group-rows 100 --codec snappy --optional --dataset --page-bytes 2000
"$GEN" refdata "$T/nocrc.parquet" >/dev/null --rows 300 --image-bytes 50 --row-group-rows 100 --codec none --no-crc
"$FTL" inspect --checksums "$T/good.parquet" >"$T/good.txt" || fail "good file" "ftl inspect failed on the unmodified file"
size=$(stat -c %s "$T/good.parquet")

# ---- truncations: the footer magic is gone, so always a clean "not a Parquet file" ----
for len in 0 3 4 8 11 12 13 100 1000 $((size / 2)) $((size - 200)) $((size - 9)) $((size - 8)) $((size - 5)) $((size - 1)); do
    rm -f "$T/cut.parquet"
    head -c "$len" "$T/good.parquet" >"$T/cut.parquet"
    expect_error "truncated to $len of $size bytes" 1 "cut\.parquet: (not a Parquet file|footer length)" "$FTL_SAN" inspect --checksums "$T/cut.parquet"
done

# ---- seeded bit flips: exit 1 naming the file, or exit 0 with the original data ----
# FILE REGION: REGION is footer, headers (first bytes of each column chunk) or data
flip_cases() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import random, sys
path, region, out = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
n = len(data)
flen = int.from_bytes(data[n - 8:n - 4], "little")
fstart = n - 8 - flen
rng = random.Random(f"{path}:{region}")
starts = [int(x) for x in open(path + ".chunks").read().split()]
for i in range(12):
    if region == "footer":
        pos = rng.randrange(fstart, n - 8)
    elif region == "headers":
        pos = rng.choice(starts) + rng.randrange(0, 12)
    else:
        pos = rng.randrange(4, fstart)
    b = bytearray(data)
    b[pos] ^= 1 << rng.randrange(8)
    open(f"{out}.{i}.parquet", "wb").write(b)
    print(f"{out}.{i}.parquet {pos}")
PYEOF
}
"$FTL" inspect --json "$T/good.parquet" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(c["offset"]) for g in d["row_groups"] for c in g["columns"]))' >"$T/good.parquet.chunks"

checksums_of() { grep -A20 '^checksums' "$1" 2>/dev/null; }
for region in footer headers data; do
    bad=0
    while read -r f pos; do
        err=$("$FTL_SAN" inspect --checksums "$f" 2>&1 >"$f.out")
        rc=$?
        if grep -q -E 'AddressSanitizer|runtime error:|LeakSanitizer' <<<"$err"; then
            fail "bit flip in the $region at byte $pos" "sanitizer report: $(head -c 600 <<<"$err")"
            bad=1
        elif [ "$rc" -eq 1 ] && grep -q -E "^ftl: error: .*$(basename "$f")" <<<"$err"; then
            :
        elif [ "$rc" -eq 0 ] && { [ "$region" = footer ] || [ "$(checksums_of "$f.out")" = "$(checksums_of "$T/good.txt")" ]; }; then
            : # a flip that changes nothing the reader uses (statistics, metadata text)
        else
            fail "bit flip in the $region at byte $pos" "exit $rc, stderr: $(head -c 400 <<<"$err")"
            bad=1
        fi
    done < <(flip_cases "$T/good.parquet" "$region" "$T/flip_$region")
    [ "$bad" -eq 0 ] && pass "12 seeded bit flips in the $region: clean errors or unchanged data"
done

# ---- unknown encoding and unsupported codec (patched into a file without CRCs) ----
"$PY" - "$T/nocrc.parquet" "$T/badenc.parquet" "$T/badcodec.parquet" <<'PYEOF'
import sys
src, enc_out, codec_out = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
# the first data page header: ... DataPageHeader {1: num_values, 2: encoding PLAIN (15 00),
# 3: RLE (15 06), 4: RLE (15 06)}; PLAIN -> 10, an encoding number ftl does not know
i = data.index(b"\x15\x00\x15\x06\x15\x06")
d = bytearray(data); d[i + 1] = 20  # zigzag(10)
open(enc_out, "wb").write(d)
# ColumnMetaData of "label": path_in_schema ["label"] (19 18 05 label) then codec (15 00 = NONE)
j = data.index(b"\x19\x18\x05label\x15\x00")
d = bytearray(data); d[j + 9] = 10  # zigzag(5) = LZ4
open(codec_out, "wb").write(d)
PYEOF
expect_error "unknown encoding names the column" 1 "badenc\.parquet: row group 0, column 'label': page at offset [0-9]+: unknown encoding 10" \
    "$FTL_SAN" inspect --checksums "$T/badenc.parquet"
expect_error "unsupported codec names the column" 1 "badcodec\.parquet: row group 0, column 'label': codec LZ4 is not supported" \
    "$FTL_SAN" inspect --checksums "$T/badcodec.parquet"

# ---- nested columns (DuckDB LIST and STRUCT, from tests/ref/gen_parquet.sh) ----
# The struct's leaves are read and hashed (point.a = i as INT64, point.b = 'x' || i, rows 0..99:
# the hashes regenerated here); the list's leaf is listed, and left out with the reason.
nested=$BUILD/ref/parquet/nested.parquet
if [ -f "$nested" ]; then
    want=$("$PY" -c '
import hashlib, struct
a = b"".join(struct.pack("<q", i) for i in range(100))
b = b"".join(struct.pack("<I", len(s)) + s for s in (("x%d" % i).encode() for i in range(100)))
print(hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest())')
    if "$FTL_SAN" inspect --checksums "$nested" >"$T/nested.txt" 2>&1 &&
        grep -qE "^  point\.a +${want% *}  100 values, 0 nulls" "$T/nested.txt" &&
        grep -qE "^  point\.b +${want#* }  100 values, 0 nulls" "$T/nested.txt" &&
        grep -q "^  tags.list.element .*(not read: in a list or map)" "$T/nested.txt" &&
        grep -q "tags.list.element .*(in a list or map: not readable by ftl)" "$T/nested.txt"; then
        pass "nested file: struct leaves hashed, the list's leaf named as not read"
    else
        fail "nested file: struct leaves hashed, the list's leaf named as not read" "$(head -c 1200 "$T/nested.txt")"
    fi
else
    fail "nested file" "$nested missing (tests/ref/gen_parquet.sh makes it)"
fi
finish
