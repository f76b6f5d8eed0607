#!/usr/bin/env bash
# make install into a temporary DESTDIR: the files land where they should, a small C program built
# with `pkg-config --cflags --libs ftl` (static and shared) opens a dataset and prints its rows, the
# man page renders, the Python package imports (and pip installs it into a venv), and make
# uninstall removes everything.
source "$(dirname "$0")/lib.sh"
d=$(scratch install)
root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$d/root"
make -C "$root" --no-print-directory BUILD="$BUILD" install DESTDIR="$dest" PREFIX=/usr/local >"$d/install.log" 2>&1 ||
    fail install_runs "$(tail -5 "$d/install.log")"
p=$dest/usr/local
missing=""
for f in bin/ftl lib/libftl.a lib/libftl.so lib/libftl.so.0 include/ftl.h include/ftl/dist.h lib/pkgconfig/ftl.pc share/man/man1/ftl.1; do
    [ -e "$p/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && pass install_places_every_file || fail install_places_every_file "missing:$missing"
readelf -d "$p/lib/libftl.so.0" 2>/dev/null | grep -q 'SONAME.*\[libftl.so.0\]' && pass install_shared_library_has_a_soname ||
    fail install_shared_library_has_a_soname "$(readelf -d "$p/lib/libftl.so.0" | grep -i soname)"
grep -q '^Libs.private: .*-ldnnl' "$p/lib/pkgconfig/ftl.pc" && { ! "$FTL" --version | grep -q 'Open MPI' || grep -q '^Libs.private: .*-lmpi' "$p/lib/pkgconfig/ftl.pc"; } &&
    pass install_pkgconfig_private_libs_match_the_build || fail install_pkgconfig_private_libs_match_the_build "$(cat "$p/lib/pkgconfig/ftl.pc")"

"$FTL" prep "$SHARED/data/hymenoptera" "$d/ds" --size 32 --quiet 2>/dev/null
export PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_PATH="$p/lib/pkgconfig" PKG_CONFIG_LIBDIR="$p/lib/pkgconfig"
want=$("$PY" -c 'import json,sys; print(json.load(sys.stdin)["num_rows"])' < <("$FTL" inspect "$d/ds/val.parquet" --json))
if cc -o "$d/read_rows" "$root/tests/install/read_rows.c" $(pkg-config --cflags --libs ftl) 2>"$d/cc.err" &&
   out=$(LD_LIBRARY_PATH="$p/lib" "$d/read_rows" "$d/ds/val.parquet") && grep -q "^rows $want row_groups" <<<"$out"; then
    pass install_pkgconfig_program_shared_reads_a_dataset
else
    fail install_pkgconfig_program_shared_reads_a_dataset "$(head -5 "$d/cc.err") $out (want $want rows)"
fi
# static: libftl.a and Libs.private (a sysroot would also prefix the system -L paths there, so
# the prefix is given as a variable instead)
static_libs=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --define-variable=prefix="$p" --static --libs ftl | sed 's/ -lftl / /; s/^-L[^ ]* -lftl //')
if cc -o "$d/read_rows_static" "$root/tests/install/read_rows.c" -I"$p/include" "$p/lib/libftl.a" $static_libs 2>"$d/ccs.err" &&
   "$d/read_rows_static" "$d/ds/val.parquet" | grep -q "^rows $want row_groups"; then
    pass install_static_library_links_with_its_private_libs
else
    fail install_static_library_links_with_its_private_libs "$(head -5 "$d/ccs.err")"
fi
man -l "$p/share/man/man1/ftl.1" 2>/dev/null | grep -q 'fast transfer learning' && pass install_man_page_renders ||
    fail install_man_page_renders "man -l failed"
# the Python package, under the Python site folder of PREFIX: importable, the CLI's version
want_version=$("$FTL" --version | head -1)
site=$(ls -d "$p"/lib/python3*/*-packages 2>/dev/null | head -1)
if [ -n "$site" ] && v=$(cd "$d" && PYTHONPATH="$site" "$PY" -c 'import ftl; print(ftl.__version__, ftl.__file__)' 2>&1) &&
   grep -q -F "$(cut -d' ' -f1 <<<"$v")" <<<"$want_version" && grep -q -F "$site/ftl/" <<<"$v"; then
    pass install_python_package_imports_with_the_cli_version
else
    fail install_python_package_imports_with_the_cli_version "site '${site}': ${v:-} (ftl --version: $want_version)"
fi
# pip into a virtual environment, offline, with Debian's setuptools
if "$PY" -m venv --system-site-packages "$d/venv" >"$d/venv.log" 2>&1; then
    if (cd "$root" && FTL_BUILD="$BUILD" "$d/venv/bin/pip" install --no-build-isolation --no-index ./python) >>"$d/venv.log" 2>&1 &&
       v=$(cd "$d" && "$d/venv/bin/python" -c 'import ftl; print(ftl.__version__, ftl.__file__)' 2>&1) &&
       grep -q -F "$(cut -d' ' -f1 <<<"$v")" <<<"$want_version" && grep -q -F "$d/venv/" <<<"$v"; then
        pass install_pip_into_a_venv_gives_the_cli_version
    else
        fail install_pip_into_a_venv_gives_the_cli_version "$(tail -5 "$d/venv.log") ${v:-}"
    fi
else
    skip install_pip_into_a_venv_gives_the_cli_version "python3 -m venv is not available: $(tail -1 "$d/venv.log")"
fi
make -C "$root" --no-print-directory BUILD="$BUILD" uninstall DESTDIR="$dest" PREFIX=/usr/local >>"$d/install.log" 2>&1
left=$(find "$dest" -type f -o -type l)
[ -z "$left" ] && pass uninstall_removes_everything || fail uninstall_removes_everything "left: $left"
finish
