#!/usr/bin/env python3
"""Reference data for ftl's image module, made with Debian's Pillow 9.4 (python3-pil).

The recipe is the article's scale_image, exactly:

    img = Image.open(f).convert('RGB')
    img.thumbnail((S, S), Image.LANCZOS)
    bg = Image.new('RGB', (S, S), (255, 255, 255))
    bg.paste(img, ((S - img.width) // 2, (S - img.height) // 2))

Writes into OUT (normally $BUILD/ref/image):
  synth/, bad/           synthetic inputs (JPEG/PNG variants) and malformed files
  recipe.tsv, recipe.bin one row per (set, file, S): Pillow's status, thumbnail size, paste
                         offset and byte offset of its S*S*3 canvas in recipe.bin
  resize.tsv, resize.bin Image.resize((w, h), filter) cases: source and expected pixels

recipe.tsv columns: set, root (shared|ref), path, S, status (ok|error), w, h, x, y, offset, note.
resize.tsv columns: name, filter, src_w, src_h, dst_w, dst_h, src_offset, dst_offset.
"""
import io
import os
import struct
import sys
import warnings
import zlib

import numpy as np
from PIL import Image

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
FILTERS = {"box": Image.BOX, "bilinear": Image.BILINEAR, "hamming": Image.HAMMING,
           "bicubic": Image.BICUBIC, "lanczos": LANCZOS}


# ---------------------------------------------------------------- the recipe

def load_rgb(path):
    """Image.open(path).convert('RGB'), except 16-bit grayscale (Pillow mode I): ftl keeps the
    high byte there instead of Pillow's clip at 255 (documented deviation), so the reference
    does the same conversion before Pillow's resampling."""
    im = Image.open(path)
    if im.mode in ("I", "I;16", "I;16B"):
        a = np.asarray(im).astype(np.int64)
        return Image.fromarray((a >> 8).astype(np.uint8), "L").convert("RGB"), "gray16-high-byte"
    return im.convert("RGB"), ""


def scale_image(path, size):
    img, note = load_rgb(path)
    img.thumbnail((size, size), LANCZOS)
    bg = Image.new("RGB", (size, size), (255, 255, 255))
    x, y = (size - img.width) // 2, (size - img.height) // 2
    bg.paste(img, (x, y))
    return bg.tobytes(), img.width, img.height, x, y, note


# ---------------------------------------------------------------- synthetic inputs

def photo(w, h, seed):
    """A deterministic photo-like RGB image: gradients, discs with hard edges, noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    img[..., 0] = 255 * xx / max(w - 1, 1)
    img[..., 1] = 255 * yy / max(h - 1, 1)
    img[..., 2] = 128 + 100 * np.sin(xx / 7.0) * np.cos(yy / 11.0)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, max(4, min(w, h) / 3))
        col = rng.uniform(0, 255, 3)
        img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = col
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_rows(a, depth, channels):
    """Rows of samples -> PNG scanline bytes (filter 0), for depths 1..16."""
    h = a.shape[0]
    a = a.reshape(h, -1)
    out = []
    for r in a:
        if depth == 16:
            b = r.astype(">u2").tobytes()
        elif depth == 8:
            b = r.astype(np.uint8).tobytes()
        else:
            per = 8 // depth
            n = len(r)
            padded = np.zeros(((n + per - 1) // per) * per, np.uint16)
            padded[:n] = r
            padded = padded.reshape(-1, per)
            v = np.zeros(len(padded), np.uint16)
            for i in range(per):
                v |= padded[:, i] << (8 - depth * (i + 1))
            b = v.astype(np.uint8).tobytes()
        out.append(b"\0" + b)
    return b"".join(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(path, a, color_type, depth, interlace=False, palette=None, trns=None):
    """A minimal PNG encoder (Pillow cannot write 16-bit RGB or interlaced PNGs)."""
    h, w = a.shape[:2]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = a[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += pack_rows(sub, depth, channels)
    else:
        raw = pack_rows(a, depth, channels)
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if palette is not None:
        data += png_chunk(b"PLTE", bytes(palette))
    if trns is not None:
        data += png_chunk(b"tRNS", trns)
    data += png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def make_synthetic(d):
    os.makedirs(d, exist_ok=True)
    made = []

    def save(name, im, **kw):
        p = os.path.join(d, name)
        im.save(p, **kw)
        made.append(name)

    rgb = Image.fromarray(photo(640, 480, 1))
    save("baseline_420.jpg", rgb, quality=90)
    save("baseline_444.jpg", rgb, quality=95, subsampling=0)
    save("baseline_422_optimized.jpg", rgb, quality=80, subsampling=1, optimize=True)
    save("progressive.jpg", Image.fromarray(photo(800, 600, 2)), quality=90, progressive=True)
    save("gray.jpg", Image.fromarray(photo(500, 700, 3)).convert("L"), quality=90)
    save("cmyk.jpg", Image.fromarray(photo(520, 400, 4)).convert("CMYK"), quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW": Pillow's recipe ignores it, so must ftl
    save("exif_orientation6.jpg", Image.fromarray(photo(480, 320, 5)), quality=90, exif=exif.tobytes())
    save("big_3000x2000.jpg", Image.fromarray(photo(3000, 2000, 6)), quality=85)   # reduce 5
    save("big_2400x1800.jpg", Image.fromarray(photo(2400, 1800, 7)), quality=85)   # reduce 4
    save("big_1300x5000.jpg", Image.fromarray(photo(1300, 5000, 8)), quality=85)   # reduce 8
    save("wide_3000x10.jpg", Image.fromarray(photo(3000, 10, 9)), quality=90)
    save("tall_10x3000.jpg", Image.fromarray(photo(10, 3000, 10)), quality=90)
    save("tiny_1x1.jpg", Image.fromarray(photo(1, 1, 11)), quality=90)
    save("small_100x50.jpg", Image.fromarray(photo(100, 50, 12)), quality=90)
    save("fit_299x299.jpg", Image.fromarray(photo(299, 299, 13)), quality=90)
    save("just_over_300x300.jpg", Image.fromarray(photo(300, 300, 14)), quality=90)
    save("odd_997x601.jpg", Image.fromarray(photo(997, 601, 15)), quality=90)

    save("rgb.png", Image.fromarray(photo(400, 300, 20)))
    save("rgba.png", Image.fromarray(np.dstack([photo(400, 300, 21), photo(400, 300, 22)[..., 0]]), "RGBA"))
    save("gray.png", Image.fromarray(photo(333, 444, 23)[..., 1]))
    save("gray_alpha.png", Image.fromarray(np.dstack([photo(350, 260, 24)[..., 0], photo(350, 260, 25)[..., 2]]), "LA"))
    pal = Image.fromarray(photo(420, 310, 26)).quantize(200)
    pal.info["transparency"] = bytes(range(0, 200))
    save("palette_trns.png", pal, transparency=bytes(range(0, 200)))
    save("palette_4bit.png", Image.fromarray(photo(300, 310, 27)).quantize(16), bits=4)
    save("bilevel.png", Image.fromarray(photo(330, 220, 28)[..., 0]).convert("1"))
    save("gray16_pillow.png", Image.fromarray((photo(310, 300, 29)[..., 0].astype(np.int32) * 257), "I").convert("I;16"))
    save("wide_3000x10.png", Image.fromarray(photo(3000, 10, 30)))
    save("tall_10x3000.png", Image.fromarray(photo(10, 3000, 31)))
    save("tiny_1x1.png", Image.fromarray(photo(1, 1, 32)))
    save("small_20x30.png", Image.fromarray(photo(20, 30, 33)))

    rng = np.random.default_rng(40)

    def raw(name, a, ct, depth, **kw):
        write_png(os.path.join(d, name), a, ct, depth, **kw)
        made.append(name)

    base16 = photo(320, 240, 41).astype(np.uint16) * 257 + rng.integers(0, 257, (240, 320, 3)).astype(np.uint16)
    raw("rgb16.png", base16, 2, 16)
    raw("rgba16.png", np.dstack([base16, base16[..., :1]]), 6, 16)
    raw("gray16.png", base16[..., 1], 0, 16)
    raw("gray_alpha16.png", np.dstack([base16[..., 0], base16[..., 2]]), 4, 16)
    raw("interlaced_rgb.png", photo(333, 257, 42), 2, 8, interlace=True)
    raw("interlaced_rgba16.png", np.dstack([base16, base16[..., :1]])[:201, :203], 6, 16, interlace=True)
    raw("interlaced_gray2.png", (photo(301, 303, 43)[..., 0] >> 6), 0, 2, interlace=True)
    raw("gray4.png", (photo(305, 301, 44)[..., 2] >> 4), 0, 4)
    raw("gray_trns.png", photo(300, 320, 45)[..., 0], 0, 8, trns=struct.pack(">H", 77))
    raw("rgb_trns.png", photo(310, 300, 46), 2, 8, trns=struct.pack(">HHH", 10, 20, 30))
    idx = (photo(330, 300, 47)[..., 0] // 16).astype(np.uint8)
    idx[::7, ::5] = 200  # past the 16-entry palette: Pillow maps index i to (i, i, i)
    raw("palette_out_of_range.png", idx, 3, 8, palette=list(rng.integers(0, 256, 48)))
    raw("interlaced_palette1.png", (photo(317, 299, 48)[..., 1] > 128).astype(np.uint8), 3, 1,
        interlace=True, palette=[200, 30, 40, 10, 220, 90], trns=b"\x00")
    return made


# ---------------------------------------------------------------- malformed inputs

def make_bad(d, jpeg_src, prog_src):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(99)
    j = open(jpeg_src, "rb").read()
    pj = open(prog_src, "rb").read()
    bio = io.BytesIO()
    Image.fromarray(photo(300, 200, 50)).save(bio, "PNG")
    p = bio.getvalue()
    bio = io.BytesIO()
    Image.fromarray(photo(16, 16, 51)).save(bio, "JPEG", quality=50)
    tiny = bio.getvalue()

    def chunks(b):
        pos, out = 8, []
        while pos + 8 <= len(b):
            n = struct.unpack(">I", b[pos:pos + 4])[0]
            out.append((b[pos + 4:pos + 8], pos, n))
            pos += 12 + n
        return out

    def bad_crc(b, kind):
        for c, pos, n in chunks(b):
            if c == kind:
                x = bytearray(b)
                x[pos + 8 + n] ^= 1
                return bytes(x)

    def flip(b, positions):
        x = bytearray(b)
        for q in positions:
            x[q] ^= 0x10
        return bytes(x)

    def patch_sof(b, w, h):
        i = 2
        while i < len(b):
            m = b[i + 1]
            if 0xC0 <= m <= 0xC2:
                x = bytearray(b)
                x[i + 5:i + 9] = struct.pack(">HH", h, w)
                return bytes(x)
            i += 2 + struct.unpack(">H", b[i + 2:i + 4])[0]

    sos = j.index(b"\xff\xda")
    cases = {
        "empty.jpg": b"",
        "random.bin": rng.integers(0, 256, 4000, dtype=np.uint8).tobytes(),
        "jpeg_soi_only.jpg": b"\xff\xd8\xff",
        "jpeg_cut_header.jpg": j[:200],
        "jpeg_cut_10pct.jpg": j[:len(j) // 10],
        "jpeg_cut_50pct.jpg": j[:len(j) // 2],
        "jpeg_cut_90pct.jpg": j[:len(j) * 9 // 10],
        "jpeg_no_eoi.jpg": j[:-2],
        "jpeg_cut_last_byte.jpg": j[:-1],
        "jpeg_progressive_cut_50pct.jpg": pj[:len(pj) // 2],
        "jpeg_progressive_no_eoi.jpg": pj[:-2],
        "jpeg_header_then_garbage.jpg": j[:sos] + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "jpeg_magic_then_garbage.jpg": b"\xff\xd8\xff" + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
        "jpeg_bitflip_data.jpg": flip(j, [sos + 400, sos + 4000, len(j) // 2, len(j) - 300]),
        "jpeg_bitflip_many.jpg": flip(j, list(range(sos + 100, len(j) - 10, 997))),
        "jpeg_trailing_garbage.jpg": j + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
        "jpeg_dims_over_limit.jpg": patch_sof(tiny, 20000, 20000),
        "png_signature_only.png": p[:8],
        "png_cut_in_ihdr.png": p[:30],
        "png_cut_50pct.png": p[:len(p) // 2],
        "png_no_iend.png": p[:-12],
        "png_cut_iend_crc.png": p[:-4],
        "png_bad_crc_ihdr.png": bad_crc(p, b"IHDR"),
        "png_bad_crc_idat.png": bad_crc(p, b"IDAT"),
        "png_header_then_garbage.png": p[:33] + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
        "png_dims_over_limit.png": p[:16] + struct.pack(">II", 20000, 20000) + p[24:],
    }
    # Other formats Pillow reads but ftl refuses (by magic bytes).
    small = Image.fromarray(photo(40, 30, 52))
    for fmt, ext in [("GIF", "gif"), ("BMP", "bmp"), ("TIFF", "tif"), ("WEBP", "webp")]:
        b = io.BytesIO()
        (small.convert("P") if fmt == "GIF" else small).save(b, fmt)
        cases["other." + ext] = b.getvalue()
    # Deliberate deviation (not run through Pillow): a tiny sequential JPEG whose header claims
    # 10000x10000 cannot hold that many pixels; ftl refuses it before allocating 300 MB.
    policy = {"jpeg_claims_too_many_pixels.jpg": patch_sof(tiny, 10000, 10000)}
    for name, b in list(cases.items()) + list(policy.items()):
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)
    return sorted(cases), sorted(policy)


# ---------------------------------------------------------------- main

class Writer:
    def __init__(self, out, name):
        self.tsv = open(os.path.join(out, name + ".tsv"), "w")
        self.bin = open(os.path.join(out, name + ".bin"), "wb")
        self.offset = 0

    def blob(self, b):
        off = self.offset
        self.bin.write(b)
        self.offset += len(b)
        return off


def run_recipe(w, set_name, root, base, rel, size, force_error_note=None):
    path = os.path.join(base, rel)
    if force_error_note:
        w.tsv.write(f"{set_name}\t{root}\t{rel}\t{size}\terror\t0\t0\t0\t0\t0\t{force_error_note}\n")
        return False
    try:
        canvas, tw, th, x, y, note = scale_image(path, size)
    except Exception as e:  # noqa: BLE001 -- any Pillow failure is the reference's answer
        msg = f"{type(e).__name__}: {e}".replace(path, os.path.basename(path))
        msg = msg.replace("\t", " ").replace("\n", " ")
        w.tsv.write(f"{set_name}\t{root}\t{rel}\t{size}\terror\t0\t0\t0\t0\t0\t{msg}\n")
        return False
    off = w.blob(canvas)
    w.tsv.write(f"{set_name}\t{root}\t{rel}\t{size}\tok\t{tw}\t{th}\t{x}\t{y}\t{off}\t{note}\n")
    return True


def main():
    warnings.simplefilter("ignore")  # Pillow's notes on palette transparency and bomb sizes
    shared, out = sys.argv[1], sys.argv[2]
    hym_root = os.path.join(shared, "data", "hymenoptera")
    hym = []
    for d, _, fs in os.walk(hym_root):
        for f in fs:
            if not f.endswith(".md"):
                hym.append(os.path.relpath(os.path.join(d, f), shared))
    hym.sort()
    if len(hym) < 390:
        print(f"FAIL ref-image: expected ~398 files under {hym_root}, found {len(hym)}")
        return 1
    synth = make_synthetic(os.path.join(out, "synth"))
    jpeg_src = os.path.join(shared, "data/hymenoptera/train/ants/0013035.jpg")
    prog_src = os.path.join(shared, "data/hymenoptera/train/ants/ant photos.jpg")
    bad, policy = make_bad(os.path.join(out, "bad"), jpeg_src, prog_src)

    w = Writer(out, "recipe")
    counts = {}
    for rel in hym:
        counts["hym299"] = counts.get("hym299", 0) + run_recipe(w, "hym299", "shared", shared, rel, 299)
    for rel in hym[::6]:
        counts["hym128"] = counts.get("hym128", 0) + run_recipe(w, "hym128", "shared", shared, rel, 128)
    for size in (299, 64):
        for name in synth:
            key = f"synth{size}"
            counts[key] = counts.get(key, 0) + run_recipe(w, key, "ref", out, "synth/" + name, size)
    for name in bad:
        counts["bad"] = counts.get("bad", 0) + run_recipe(w, "bad", "ref", out, "bad/" + name, 299)
    for name in policy:
        run_recipe(w, "bad", "ref", out, "bad/" + name, 299, force_error_note="ftl policy: header claims more pixels than the file can encode")
    w.tsv.close()
    w.bin.close()
    for k, v in counts.items():
        print(f"ok ref-image-recipe-{k} ({v} canvases)")

    # Image.resize parity: BILINEAR 299 -> 224 on Pillow's own canvases (the backbone's input
    # step), every filter on noise up and down, Lanczos on a photo.
    r = Writer(out, "resize")
    cases = []
    for rel in hym[:40]:
        if rel.endswith(".gif"):
            continue
        canvas, *_ = scale_image(os.path.join(shared, rel), 299)
        cases.append((os.path.basename(rel), Image.frombytes("RGB", (299, 299), canvas), "bilinear", 224, 224))
    noise = Image.fromarray(np.random.default_rng(7).integers(0, 256, (61, 97, 3), dtype=np.uint8))
    for f in FILTERS:
        for dw, dh in [(40, 30), (250, 170), (97, 20), (13, 61), (1, 1), (200, 7)]:
            cases.append((f"noise_{f}_{dw}x{dh}", noise, f, dw, dh))
    ph = Image.fromarray(photo(640, 480, 60))
    for f in FILTERS:
        cases.append((f"photo_{f}_299x224", ph, f, 299, 224))
    for name, src, f, dw, dh in cases:
        dst = src.resize((dw, dh), FILTERS[f])
        so = r.blob(src.tobytes())
        do = r.blob(dst.tobytes())
        r.tsv.write(f"{name}\t{f}\t{src.width}\t{src.height}\t{dw}\t{dh}\t{so}\t{do}\n")
    r.tsv.close()
    r.bin.close()
    print(f"ok ref-image-resize ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
