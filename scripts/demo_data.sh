#!/usr/bin/env bash
# Prints the folder of the demo dataset (ants vs bees, the PyTorch transfer-learning tutorial's
# hymenoptera_data). Uses the bundled copy in ../shared when present; otherwise downloads the
# tutorial's zip once into the build folder and verifies every file against
# scripts/hymenoptera.sha256 (sha256 of each of the 398 files), so a changed or truncated
# download is refused rather than silently trained on.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${SHARED:=$here/../../shared}"
: "${BUILD:=$here/../build}"
if [ -d "$SHARED/data/hymenoptera/train" ]; then
    echo "$SHARED/data/hymenoptera"
    exit 0
fi
dest="$BUILD/demo-data"
if [ ! -f "$dest/hymenoptera_data/.verified" ]; then
    url=https://download.pytorch.org/tutorial/hymenoptera_data.zip
    echo "demo: $SHARED/data/hymenoptera not found; downloading $url" >&2
    mkdir -p "$dest"
    rm -rf "$dest/hymenoptera_data" "$dest/download.zip"
    curl -fL --retry 3 -o "$dest/download.zip" "$url"
    /usr/bin/python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$dest/download.zip" "$dest"
    (cd "$dest/hymenoptera_data" && sha256sum --quiet -c "$here/hymenoptera.sha256") || {
        echo "demo: the downloaded files do not match scripts/hymenoptera.sha256; refusing to use them" >&2
        exit 1
    }
    touch "$dest/hymenoptera_data/.verified"
    rm -f "$dest/download.zip"
    echo "demo: downloaded and verified $(wc -l <"$here/hymenoptera.sha256") files" >&2
fi
echo "$dest/hymenoptera_data"
