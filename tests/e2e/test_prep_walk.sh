#!/usr/bin/env bash
# prep's folder walk (issue 46): folder symlinks are followed as `find -L` does, but a loop is named
# in a warning and costs nothing else (--strict: an error); each real file is read once; one file
# or folder under two classes, or under train/ and val/, is refused naming both; OUT inside SRC is
# refused with SRC untouched. Rows are read back with DuckDB and compared with the real files that
# `find` (which does not follow links) lists.
source "$(dirname "$0")/lib.sh"
d=$(scratch prep_walk)
H="$SHARED/data/hymenoptera"
DUCK="node $(dirname "$0")/../tools/duckdb_query.mjs"

# photos DIR: DIR/ants/a.jpg, DIR/ants/sub/c.jpeg, DIR/bees/b.jpg (real photos, copied)
photos() {
    mkdir -p "$1/ants/sub" "$1/bees"
    cp "$H/train/ants/0013035.jpg" "$1/ants/a.jpg"
    cp "$H/train/ants/formica.jpeg" "$1/ants/sub/c.jpeg"
    cp "$H/train/bees/2405441001_b06c36fa72.jpg" "$1/bees/b.jpg"
}
# label<TAB>path of every row in the Parquet files PATTERNS (DuckDB list syntax), sorted
rows() {
    $DUCK "SELECT label, path FROM read_parquet([$1])" |
        $PY -c 'import json,sys; [print("%d\t%s" % (r["label"], r["path"])) for r in json.load(sys.stdin)]' | LC_ALL=C sort
}
# the same from the real files under SRC: find without -L skips links; label = sorted folder index
real_rows() {
    local i=0 c
    for c in $(ls "$1" | LC_ALL=C sort); do
        (cd "$1" && find "$c" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' \)) |
            while IFS= read -r p; do printf '%d\t%s\n' "$i" "$p"; done
        i=$((i + 1))
    done | LC_ALL=C sort
}
# a path as an extended regular expression matching it literally
re() { sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$1"; }
no_output() { [ ! -e "$1" ] && ! ls -a "$(dirname "$1")" | grep -q "^$(basename "$1")\.tmp"; }

# ---- the issue's loop: ants/loop -> .. (SRC), plus loops back to a class folder and deeper
photos "$d/loop"
ln -s .. "$d/loop/ants/loop"
ln -s .. "$d/loop/ants/sub/up"
ln -s . "$d/loop/bees/here"
"$FTL_SAN" prep "$d/loop" "$d/loop-out" --size 32 >"$d/loop.out" 2>"$d/loop.err"
rc=$?
real_rows "$d/loop" >"$d/loop.expected"
rows "'$d/loop-out/train.parquet', '$d/loop-out/val.parquet'" >"$d/loop.got" 2>&1
[ $rc -eq 0 ] && [ "$(wc -l <"$d/loop.expected")" -eq 3 ] && cmp -s "$d/loop.expected" "$d/loop.got" &&
    pass prep_walk_loop_rows_are_the_real_files_duckdb ||
    fail prep_walk_loop_rows_are_the_real_files_duckdb "rc $rc: $(diff "$d/loop.expected" "$d/loop.got" | head -5) $(head -c 300 "$d/loop.err")"
grep -q -E "$(re "$d/loop/ants/loop leads back to $d/loop, a folder it is inside: a folder loop")" "$d/loop.err" &&
    grep -q -E "$(re "$d/loop/ants/sub/up leads back to $d/loop/ants, a folder")" "$d/loop.err" &&
    grep -q -E "$(re "$d/loop/bees/here leads back to $d/loop/bees, a folder")" "$d/loop.err" &&
    [ "$(grep -c 'folder loop' "$d/loop.err")" -eq 3 ] && ! grep -q -E 'nested deeper|AddressSanitizer|runtime error' "$d/loop.err" &&
    pass prep_walk_loop_named_in_a_warning || fail prep_walk_loop_named_in_a_warning "$(head -c 600 "$d/loop.err")"
expect_error prep_walk_loop_strict_is_an_error 2 "$(re "$d/loop/ants/loop leads back to $d/loop").*\(--strict\)" \
    "$FTL_SAN" prep "$d/loop" "$d/loop-strict" --size 32 --strict
no_output "$d/loop-strict" && pass prep_walk_loop_strict_writes_nothing || fail prep_walk_loop_strict_writes_nothing "$(ls "$d")"

# ---- one file under two classes: a hard link, a symlink
photos "$d/hard"
ln "$d/hard/ants/a.jpg" "$d/hard/bees/a-too.jpg"
expect_error prep_walk_hard_link_in_two_classes_refused 2 \
    "$(re "$d/hard/ants/a.jpg (class 'ants') and $d/hard/bees/a-too.jpg (class 'bees') are the same file")" \
    "$FTL_SAN" prep "$d/hard" "$d/hard-out" --size 32
photos "$d/soft"
ln -s ../ants/a.jpg "$d/soft/bees/a-link.jpg"
expect_error prep_walk_symlink_in_two_classes_refused 2 \
    "$(re "$d/soft/ants/a.jpg (class 'ants') and $d/soft/bees/a-link.jpg (class 'bees') are the same file")" \
    "$FTL_SAN" prep "$d/soft" "$d/soft-out" --size 32
no_output "$d/hard-out" && no_output "$d/soft-out" && pass prep_walk_two_classes_write_nothing ||
    fail prep_walk_two_classes_write_nothing "$(ls "$d")"

# ---- one file under train/ and val/ (hard link, symlink); one folder in both splits
split_photos() {
    mkdir -p "$1"/{train,val}/{ants,bees}
    cp "$H/train/ants/0013035.jpg" "$1/train/ants/a.jpg"
    cp "$H/train/bees/2405441001_b06c36fa72.jpg" "$1/train/bees/b.jpg"
    cp "$H/val/ants/$(ls "$H/val/ants" | head -1)" "$1/val/ants/c.jpg"
    cp "$H/val/bees/$(ls "$H/val/bees" | head -1)" "$1/val/bees/e.jpg"
}
split_photos "$d/split-hard"
ln "$d/split-hard/train/ants/a.jpg" "$d/split-hard/val/ants/a-again.jpg"
expect_error prep_walk_hard_link_in_train_and_val_refused 2 \
    "$(re "$d/split-hard/train/ants/a.jpg (class 'ants' in train/) and $d/split-hard/val/ants/a-again.jpg (class 'ants' in val/) are the same file")" \
    "$FTL_SAN" prep "$d/split-hard" "$d/split-hard-out" --size 32
split_photos "$d/split-soft"
ln -s ../../train/bees/b.jpg "$d/split-soft/val/bees/b-link.jpg"
expect_error prep_walk_symlink_in_train_and_val_refused 2 \
    "$(re "$d/split-soft/train/bees/b.jpg (class 'bees' in train/) and $d/split-soft/val/bees/b-link.jpg (class 'bees' in val/) are the same file")" \
    "$FTL_SAN" prep "$d/split-soft" "$d/split-soft-out" --size 32
split_photos "$d/split-folder"
mkdir -p "$d/split-folder/train/ants/more"
cp "$H/train/ants/formica.jpeg" "$d/split-folder/train/ants/more/"
ln -s ../../train/ants/more "$d/split-folder/val/ants/more"
expect_error prep_walk_folder_in_train_and_val_refused 2 \
    "$(re "$d/split-folder/train/ants/more (class 'ants' in train/) and $d/split-folder/val/ants/more (class 'ants' in val/) are the same folder")" \
    "$FTL_SAN" prep "$d/split-folder" "$d/split-folder-out" --size 32
no_output "$d/split-hard-out" && no_output "$d/split-soft-out" && no_output "$d/split-folder-out" &&
    pass prep_walk_train_and_val_write_nothing || fail prep_walk_train_and_val_write_nothing "$(ls "$d")"

# ---- one folder under two classes: a folder outside SRC linked into both, two class folders that are one
photos "$d/fold"
mkdir -p "$d/fold-extra"
cp "$H/train/bees/$(ls "$H/train/bees" | head -1)" "$d/fold-extra/e.jpg"
ln -s ../../fold-extra "$d/fold/ants/extra"
ln -s ../../fold-extra "$d/fold/bees/extra"
expect_error prep_walk_folder_in_two_classes_refused 2 \
    "$(re "$d/fold/ants/extra (class 'ants') and $d/fold/bees/extra (class 'bees') are the same folder")" \
    "$FTL_SAN" prep "$d/fold" "$d/fold-out" --size 32
mkdir -p "$d/twin"
ln -s "$H/train/ants" "$d/twin/ants"
ln -s "$H/train/ants" "$d/twin/bees"
expect_error prep_walk_class_folders_that_are_one_refused 2 \
    "$(re "$d/twin/ants (class 'ants') and $d/twin/bees (class 'bees') are the same folder")" \
    "$FTL_SAN" prep "$d/twin" "$d/twin-out" --size 32
no_output "$d/fold-out" && no_output "$d/twin-out" && pass prep_walk_folder_in_two_classes_writes_nothing ||
    fail prep_walk_folder_in_two_classes_writes_nothing "$(ls "$d")"

# ---- second ways within one class (a symlink, a hard link, a folder link): read once, said once
photos "$d/same"
ln -s a.jpg "$d/same/ants/zz-link.jpg"
ln "$d/same/ants/a.jpg" "$d/same/ants/zz-hard.jpg"
ln -s sub "$d/same/ants/zz-sub"
"$FTL_SAN" prep "$d/same" "$d/same-out" --size 32 >"$d/same.out" 2>"$d/same.err"
rc=$?
printf '0\tants/a.jpg\n0\tants/sub/c.jpeg\n1\tbees/b.jpg\n' >"$d/same.expected"
rows "'$d/same-out/train.parquet', '$d/same-out/val.parquet'" >"$d/same.got" 2>&1
[ $rc -eq 0 ] && cmp -s "$d/same.expected" "$d/same.got" && pass prep_walk_same_class_links_read_once_duckdb ||
    fail prep_walk_same_class_links_read_once_duckdb "rc $rc: $(diff "$d/same.expected" "$d/same.got" | head -5) $(head -c 300 "$d/same.err")"
[ "$(grep -c 'reached a second way' "$d/same.err")" -eq 1 ] &&
    grep -q -E "$(re "3 files or folders under $d/same are reached a second way within their class (e.g. $d/same/ants/zz-hard.jpg is $d/same/ants/a.jpg)")" "$d/same.err" &&
    pass prep_walk_second_ways_said_once || fail prep_walk_second_ways_said_once "$(head -c 600 "$d/same.err")"

# ---- OUT inside SRC: refused before any work, both paths named, SRC's files unchanged
photos "$d/src"
ln -s src "$d/src-link"
mkdir -p "$d/elsewhere"
ln -s ../elsewhere "$d/src/ds-link"  # publishing would replace this link, inside SRC, with the dataset
state() { (cd "$d/src" && find . | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); }
before=$(state)
inside="is inside the source folder"
expect_error prep_walk_out_inside_src_refused 2 "output $(re "$d/src/out") $inside $(re "$d/src") " \
    "$FTL_SAN" prep "$d/src" "$d/src/out" --size 32
expect_error prep_walk_out_inside_src_via_dotdot_and_slash_refused 2 "$inside" \
    "$FTL_SAN" prep "$d/src" "$d/src/ants/../dataset/" --size 32
expect_error prep_walk_out_under_new_folders_inside_src_refused 2 "$inside" \
    "$FTL_SAN" prep "$d/src" "$d/src/new/deeper/out" --size 32
expect_error prep_walk_out_inside_src_via_symlink_refused 2 "output $(re "$d/src/out") $inside $(re "$d/src-link/")" \
    "$FTL_SAN" prep "$d/src-link/" "$d/src/out" --size 32
expect_error prep_walk_class_folder_as_out_refused_with_overwrite 2 "$inside" \
    "$FTL_SAN" prep "$d/src" "$d/src-link/bees" --size 32 --overwrite
expect_error prep_walk_out_a_link_inside_src_refused 2 "output $(re "$d/src/ds-link") $inside" \
    "$FTL_SAN" prep "$d/src" "$d/src/ds-link" --size 32 --overwrite
[ "$(state)" = "$before" ] && [ -n "$before" ] && pass prep_walk_refused_out_leaves_src_unchanged ||
    fail prep_walk_refused_out_leaves_src_unchanged "$(diff <(echo "$before") <(state) | head -5)"

# ---- under mpirun every rank scans: the warning and the error are printed once (rank 0)
if ! command -v mpirun >/dev/null 2>&1; then
    skip prep_walk_mpirun_loop_warned_once "mpirun (openmpi-bin) is not installed"
    skip prep_walk_mpirun_mislabel_refused_once "mpirun (openmpi-bin) is not installed"
elif ! "$FTL" --version | grep -q 'Open MPI'; then
    skip prep_walk_mpirun_loop_warned_once "this ftl was built without MPI"
    skip prep_walk_mpirun_mislabel_refused_once "this ftl was built without MPI"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe --bind-to none)
    "${MPI[@]}" -np 2 "$FTL" prep "$d/loop" "$d/loop-np2" --size 32 --threads 1 >"$d/np2.out" 2>"$d/np2.err"
    rc=$?
    rows "'$d/loop-np2/train.parquet/*.parquet', '$d/loop-np2/val.parquet/*.parquet'" >"$d/np2.got" 2>&1
    [ $rc -eq 0 ] && cmp -s "$d/loop.expected" "$d/np2.got" && [ "$(grep -c 'ants/loop leads back to' "$d/np2.err")" -eq 1 ] &&
        [ "$(grep -c 'folder loop' "$d/np2.err")" -eq 3 ] && pass prep_walk_mpirun_loop_warned_once ||
        fail prep_walk_mpirun_loop_warned_once "rc $rc: $(diff "$d/loop.expected" "$d/np2.got" | head -3) $(head -c 600 "$d/np2.err")"
    out=$("${MPI[@]}" -np 2 "$FTL" prep "$d/hard" "$d/hard-np2" --size 32 --threads 1 2>&1)
    rc=$?
    [ $rc -eq 2 ] && [ "$(grep -c 'are the same file' <<<"$out")" -eq 1 ] && grep -q -E "rank 0: $(re "$d/hard/ants/a.jpg (class 'ants')")" <<<"$out" &&
        no_output "$d/hard-np2" && pass prep_walk_mpirun_mislabel_refused_once ||
        fail prep_walk_mpirun_mislabel_refused_once "rc $rc: $(head -c 600 <<<"$out")"
fi
finish
