#!/usr/bin/env python3
"""Caltech-256-shaped image folders for bench/article/article_scale.sh: N photos in K class folders named
as Caltech-256's (001.c001 ... 256.c256, and the last one 257.clutter when K is 257), each file named
as Caltech's (001_0001.jpg), made of the shared hymenoptera photos cycled in a fixed order (train and
val, JPEG/PNG only: the GIF placeholder is left out). Time only: the labels mean nothing.

Every file is a copy with its own inode, never a link: ftl prep reads each real file (device + inode)
once and refuses one reached under two classes ("an image cannot have two labels"), so hard links
or symlinks would not give N images. The copy goes through copy_file_range, which shares the blocks
(a reflink) on filesystems that can (btrfs, XFS) and copies them in the kernel elsewhere.

The folder is reused when its marker (.complete: N, K and the source list's size) matches; else it
is made again under a temporary name and renamed into place, so an interrupted run never leaves a
half set that looks complete.
usage: make_images.py SRC_PHOTOS OUT_DIR N K"""
import os
import shutil
import sys

src, out, n, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if n < k or k < 2:
    sys.exit(f"make_images.py: need at least 2 classes and one image per class (N {n}, K {k})")
photos = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
                if f.lower().endswith((".jpg", ".jpeg", ".png")))
if not photos:
    sys.exit(f"make_images.py: no JPEG or PNG photos under {src}")
marker = f"images {n} classes {k} sources {len(photos)} bytes {sum(os.path.getsize(p) for p in photos)}\n"
try:
    if open(os.path.join(out, ".complete")).read() == marker:
        print(f"images: reusing {out} ({n} images in {k} classes)")
        sys.exit(0)
except OSError:
    pass


def folder(c):  # Caltech-256's names: 001.ak47 ... 256.toad, 257.clutter
    return f"{c + 1:03d}.clutter" if k == 257 and c == 256 else f"{c + 1:03d}.c{c + 1:03d}"


def copy(a, b):
    with open(a, "rb") as fa, open(b, "wb") as fb:
        left = os.fstat(fa.fileno()).st_size
        try:
            while left > 0:
                done = os.copy_file_range(fa.fileno(), fb.fileno(), left)
                if done == 0:
                    break
                left -= done
        except OSError:  # no copy_file_range here (or across these filesystems): a plain copy
            fa.seek(0)
            fb.seek(0)
            fb.truncate()
            shutil.copyfileobj(fa, fb)
            left = 0
        if left:
            raise OSError(f"{a}: short copy")


tmp = f"{out}.tmp-{os.getpid()}"
shutil.rmtree(tmp, ignore_errors=True)
per, extra = divmod(n, k)  # the first `extra` classes get one more
i = 0
for c in range(k):
    d = os.path.join(tmp, folder(c))
    os.makedirs(d)
    for j in range(per + (c < extra)):
        p = photos[i % len(photos)]
        copy(p, os.path.join(d, f"{c + 1:03d}_{j + 1:04d}{os.path.splitext(p)[1].lower()}"))
        i += 1
        if i % 5000 == 0:
            print(f"images: {i}/{n}", flush=True)
with open(os.path.join(tmp, ".complete"), "w") as f:
    f.write(marker)
shutil.rmtree(out, ignore_errors=True)
os.rename(tmp, out)
print(f"images: made {out}: {n} images in {k} classes, copies of {len(photos)} photos")
