#!/usr/bin/env bash
# Reference data for the image module (Pillow 9.4's recipe and resize), under $BUILD/ref/image.
# Regenerated only when this script, gen_image.py, Pillow/numpy or the hymenoptera files change.
set -u
cd "$(dirname "$0")"
: "${BUILD:?BUILD must be set}" "${SHARED:?SHARED must be set}" "${PY:=/usr/bin/python3}"
out="$BUILD/ref/image"
mkdir -p "$out"
hym="$SHARED/data/hymenoptera"
if [ ! -d "$hym" ]; then
    echo "FAIL ref-image: $hym is missing"
    exit 1
fi
versions=$("$PY" -c 'import PIL, numpy; print(PIL.__version__, numpy.__version__)' 2>&1) || {
    echo "FAIL ref-image: $PY cannot import Pillow/numpy: $versions"
    exit 1
}
key=$( { cat gen_image.sh gen_image.py; echo "$versions"; \
         (cd "$hym" && find . -type f -printf '%p %s %T@\n' | LC_ALL=C sort); } | sha256sum | cut -d' ' -f1)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ] && [ -s "$out/recipe.bin" ] && [ -s "$out/resize.bin" ]; then
    echo "ok ref-image (cached)"
    exit 0
fi
rm -f "$out/stamp"
if "$PY" gen_image.py "$SHARED" "$out"; then
    echo "$key" >"$out/stamp"
else
    echo "FAIL ref-image: gen_image.py failed"
    exit 1
fi
