/* JPEG decoding with libjpeg-turbo's TurboJPEG API, matching what Pillow 9.4 gets from the same
 * library: accurate integer IDCT, fancy upsampling, libjpeg's YCbCr->RGB; grayscale replicated;
 * CMYK/YCCK taken as Adobe-inverted ("CMYK;I") and converted with Pillow's cmyk2rgb.
 *
 * What is an error follows Pillow: it feeds libjpeg through a suspending source and raises
 * "image file is truncated" whenever libjpeg asks for bytes past the end, which happens exactly
 * when the end-of-image marker is missing (even a file cut just before its final FF D9 fails).
 * ftl checks that structurally (walk the markers, look for EOI) instead of relying on the order
 * of libjpeg warnings. Corruption libjpeg recovers from is only a warning there, as in Pillow. */
#include "image/image_internal.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

void ftl_image_decoder_free(ftl_image_decoder *d) {
    if (!d) return;
    if (d->tj) tjDestroy(d->tj);
    free(d->scratch);
    memset(d, 0, sizeof *d);
}

static ftl_status ensure_tj(ftl_image_decoder *d) {
    if (d->tj) return FTL_OK;
    d->tj = tjInitDecompress();
    if (!d->tj) return ftl_fail(FTL_E_NOMEM, "cannot start the JPEG decoder: %s", tjGetErrorStr2(NULL));
    return FTL_OK;
}

/* Maps a TurboJPEG failure to a status. The handle is dropped: after an error inside
 * jpeg_read_header, TurboJPEG 2.1 leaves the decompressor mid-header, and reusing it makes the
 * next file fail with a stale message. A fresh handle is created on the next call. */
static ftl_status tj_failure(ftl_image_decoder *d, const char *what) {
    char msg[200];
    const char *m = tjGetErrorStr2(d->tj);
    snprintf(msg, sizeof msg, "%s", m && *m ? m : "unknown libjpeg error");
    tjDestroy(d->tj);
    d->tj = NULL;
    if (strstr(msg, "Unsupported JPEG process") || strstr(msg, "data precision") ||
        strstr(msg, "Unsupported color conversion"))
        return ftl_fail(FTL_E_UNSUPPORTED, "unsupported JPEG: %s", msg);
    return ftl_fail(FTL_E_FORMAT, "corrupt JPEG%s: %s", what, msg);
}

typedef struct jpeg_layout {
    int sof;            /* SOFn marker byte (0xC0..0xCF), 0 if not seen */
    int end;            /* 1: EOI found; 0: data ends first; -1: cannot tell (malformed) */
} jpeg_layout;

/* Walks the marker segments and the entropy-coded data (FF 00 stuffing and RSTn stay inside a
 * scan) until the end-of-image marker. Segment lengths are bounds-checked; an EXIF thumbnail's
 * own EOI sits inside its APP1 segment and is skipped with it. */
static void scan_layout(const uint8_t *d, size_t n, jpeg_layout *lay) {
    lay->sof = 0;
    lay->end = 0;
    size_t pos = 2; /* after SOI */
    bool in_scan = false;
    for (;;) {
        if (pos >= n) return;
        if (d[pos] != 0xFF) { /* scan data, or junk libjpeg skips with a warning */
            const uint8_t *ff = memchr(d + pos, 0xFF, n - pos);
            if (!ff) return;
            pos = (size_t)(ff - d);
        }
        while (pos < n && d[pos] == 0xFF) pos++;
        if (pos >= n) return;
        uint8_t m = d[pos++];
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
        if (m == 0xD9) {
            lay->end = 1;
            return;
        }
        if (m == 0xD8) continue;
        if (in_scan && m != 0xDA && m != 0xC4 && m != 0xDB && m != 0xDD && m != 0xCC &&
            m != 0xFE && !(m >= 0xE0 && m <= 0xEF)) {
            lay->end = -1; /* an unexpected marker inside the image: leave it to libjpeg */
            return;
        }
        if (pos + 2 > n) return;
        size_t len = (size_t)d[pos] << 8 | d[pos + 1];
        if (len < 2) {
            lay->end = -1;
            return;
        }
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && !lay->sof) lay->sof = m;
        if (len > n - pos) return; /* the segment runs past the end */
        pos += len;
        if (m == 0xDA) in_scan = true;
    }
}

static ftl_status jpeg_probe(ftl_image_decoder *d, const uint8_t *data, size_t size, int *w, int *h) {
    FTL_TRY(ensure_tj(d));
    int sub, cs;
    if (size > (size_t)0x7fffffff) return ftl_fail(FTL_E_UNSUPPORTED, "JPEG file larger than 2 GiB");
    if (tjDecompressHeader3(d->tj, data, (unsigned long)size, w, h, &sub, &cs) != 0)
        return tj_failure(d, " header");
    (void)sub;
    (void)cs;
    if (*w < 1 || *h < 1) {
        tjDestroy(d->tj);
        d->tj = NULL;
        return ftl_fail(FTL_E_FORMAT, "corrupt JPEG: no frame header (SOF) before the end of the image");
    }
    return FTL_OK;
}

/* Pillow's cmyk2rgb on Adobe-inverted samples: with c = 255 - stored and nk = 255 - k = stored k,
 * each channel is nk - round(c * nk / 255) computed as MULDIV255. */
static void cmyk_inverted_to_rgb(const uint8_t *in, uint8_t *out, size_t pixels) {
    for (size_t i = 0; i < pixels; i++, in += 4, out += 3) {
        int nk = in[3];
        for (int c = 0; c < 3; c++) {
            int t = (255 - in[c]) * nk + 128;
            int v = nk - (((t >> 8) + t) >> 8);
            out[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

static ftl_status jpeg_decode(ftl_image_decoder *d, const uint8_t *data, size_t size,
                              int dct_scale, ftl_image *out) {
    int w, h;
    FTL_TRY(ensure_tj(d));
    if (size > (size_t)0x7fffffff) return ftl_fail(FTL_E_UNSUPPORTED, "JPEG file larger than 2 GiB");
    /* Pillow: no end-of-image marker means libjpeg wants more bytes, which is "truncated". */
    jpeg_layout lay;
    scan_layout(data, size, &lay);
    if (lay.end == 0)
        return ftl_fail(FTL_E_FORMAT, "truncated JPEG: premature end of data (no end-of-image "
                        "marker in %zu bytes)", size);
    int sub, cs;
    if (tjDecompressHeader3(d->tj, data, (unsigned long)size, &w, &h, &sub, &cs) != 0)
        return tj_failure(d, " header");
    (void)sub;
    if (w < 1 || h < 1) { /* a tables-only stream: no frame header */
        tjDestroy(d->tj);
        d->tj = NULL;
        return ftl_fail(FTL_E_FORMAT, "corrupt JPEG: no frame header (SOF) before the end of the image");
    }
    long long pixels = (long long)w * h;
    if (pixels > FTL_IMAGE_MAX_PIXELS)
        return ftl_fail(FTL_E_UNSUPPORTED,
                        "image too large: %dx%d = %lld pixels, above the limit of %lld (Pillow's "
                        "decompression-bomb limit)", w, h, pixels, FTL_IMAGE_MAX_PIXELS);
    /* Sequential Huffman JPEGs spend at least 2 bits per MCU of at most 32x32 pixels: refuse a
     * header that claims more pixels than the file can hold before allocating for it. */
    if ((lay.sof == 0xC0 || lay.sof == 0xC1) && pixels / 4096 > (long long)size)
        return ftl_fail(FTL_E_FORMAT, "truncated JPEG: the header says %dx%d, more than %zu bytes "
                        "can encode", w, h, size);

    if (dct_scale != 1 && dct_scale != 2 && dct_scale != 4 && dct_scale != 8)
        return ftl_fail(FTL_E_INVALID_ARG, "JPEG DCT scale must be 1, 2, 4 or 8, not %d", dct_scale);
    tjscalingfactor sf = {1, dct_scale};
    int dw = TJSCALED(w, sf), dh = TJSCALED(h, sf);
    FTL_TRY(ftl_image_alloc(out, dw, dh));
    const int flags = TJFLAG_ACCURATEDCT | TJFLAG_LIMITSCANS;
    bool cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    int rc;
    if (cmyk) {
        FTL_TRY(ftl_image_grow(&d->scratch, &d->scratch_cap, (size_t)dw * dh * 4));
        rc = tjDecompress2(d->tj, data, (unsigned long)size, d->scratch, dw, dw * 4, dh, TJPF_CMYK,
                           flags);
    } else {
        rc = tjDecompress2(d->tj, data, (unsigned long)size, out->pixels, dw, dw * 3, dh, TJPF_RGB,
                           flags);
    }
    if (rc != 0) {
        if (tjGetErrorCode(d->tj) != TJERR_WARNING) return tj_failure(d, "");
        const char *msg = tjGetErrorStr2(d->tj);
        if (msg && strstr(msg, "Premature end of JPEG file"))
            return ftl_fail(FTL_E_FORMAT, "truncated JPEG: premature end of data (%zu bytes)", size);
        snprintf(d->warning, sizeof d->warning, "%s", msg ? msg : "libjpeg warning");
    }
    if (cmyk) cmyk_inverted_to_rgb(d->scratch, out->pixels, (size_t)dw * dh);
    return FTL_OK;
}

const ftl_image_codec ftl_image_codec_jpeg = {FTL_IMAGE_FORMAT_JPEG, jpeg_probe, jpeg_decode};
