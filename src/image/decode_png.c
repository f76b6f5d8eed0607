/* PNG decoding with libpng, converted to RGB the way Pillow 9.4 opens and convert('RGB')s it:
 * 1/2/4-bit gray scaled to 0..255 (1-bit as 0/255), 16-bit samples keep their high byte, palette
 * indices looked up in a table that starts as Pillow's gray ramp (indices past the PLTE map to
 * (i, i, i)), alpha and tRNS dropped (not composited). Interlaced images are deinterlaced.
 *
 * Errors follow Pillow too: a bad CRC before the first IDAT is an error (Pillow checks those),
 * a bad CRC in or after the image data is not (Pillow never checks), and a file cut after the
 * image data (missing IEND, or a partial CRC) decodes, while one cut inside it is truncated. */
#include "image/image_internal.h"
#include "util/error.h"

#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t iend_chunk[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static ftl_status png_probe(const uint8_t *data, size_t size, int *w, int *h) {
    if (size < 33 || memcmp(data, png_signature, 8) || memcmp(data + 12, "IHDR", 4))
        return ftl_fail(FTL_E_FORMAT, "corrupt PNG: no IHDR chunk at the start (%zu bytes)", size);
    uint32_t ww = be32(data + 16), hh = be32(data + 20);
    if (ww < 1 || hh < 1 || ww > 0x7fffffff || hh > 0x7fffffff)
        return ftl_fail(FTL_E_FORMAT, "corrupt PNG: image size %ux%u", ww, hh);
    *w = (int)ww;
    *h = (int)hh;
    return FTL_OK;
}

/* The bytes libpng reads: the file, possibly cut where a truncation after the image data
 * begins, followed by a synthesized tail (zero CRC bytes and/or an IEND chunk) so that a file
 * missing only its ending decodes, as it does in Pillow. */
typedef struct png_stream {
    const uint8_t *data;
    size_t size, pos;
    uint8_t tail[16];
    size_t tail_size, tail_pos;
} png_stream;

static void plan_stream(png_stream *s, const uint8_t *data, size_t size) {
    memset(s, 0, sizeof *s);
    s->data = data;
    s->size = size;
    size_t pos = 8;
    bool seen_idat = false;
    while (pos + 8 <= size) {
        uint32_t len = be32(data + pos);
        bool idat = !memcmp(data + pos + 4, "IDAT", 4), iend = !memcmp(data + pos + 4, "IEND", 4);
        if (len > 0x7fffffffu) return; /* corrupt: libpng reports it */
        seen_idat |= idat;
        size_t have = size - pos - 8;
        if (have < (size_t)len + 4) {
            if (!seen_idat) return;          /* cut before the image data: truncated */
            if (have < len) {
                if (idat) return;            /* cut inside image data: truncated */
                s->size = pos;               /* drop a partial chunk after the data */
                memcpy(s->tail, iend_chunk, 12);
                s->tail_size = 12;
                return;
            }
            size_t missing = (size_t)len + 4 - have; /* the CRC is partial: pad it */
            memset(s->tail, 0, missing);
            memcpy(s->tail + missing, iend_chunk, 12);
            s->tail_size = missing + 12;
            return;
        }
        pos += 12 + (size_t)len;
        if (iend) return;
    }
    if (seen_idat) { /* ends at a chunk boundary (or in a chunk header) without IEND */
        s->size = pos < size ? pos : size;
        memcpy(s->tail, iend_chunk, 12);
        s->tail_size = 12;
    }
}

typedef struct png_ctx {
    png_structp png;
    png_infop info;
    png_stream stream;
    char error[200];
    char *warning;
    size_t warning_size;
    png_bytep *rows;
    bool truncated;
} png_ctx;

static void on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->error, sizeof c->error, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    if (c->warning && !c->warning[0]) snprintf(c->warning, c->warning_size, "%s", msg ? msg : "");
}

static void on_read(png_structp png, png_bytep out, size_t n) {
    png_ctx *c = png_get_error_ptr(png);
    png_stream *s = &c->stream;
    size_t avail = s->size - s->pos, take = n < avail ? n : avail;
    memcpy(out, s->data + s->pos, take);
    s->pos += take;
    n -= take;
    if (n == 0) return;
    if (n > s->tail_size - s->tail_pos) {
        c->truncated = true;
        png_error(png, "premature end of data");
    }
    memcpy(out + take, s->tail + s->tail_pos, n);
    s->tail_pos += n;
}

/* All libpng work, with the longjmp target; every resource lives in *c or *d so that the
 * caller can release it whatever happens. */
static ftl_status decode_inner(png_ctx *c, ftl_image_decoder *d, size_t size,
                               ftl_image *out) {
    ftl_status st = FTL_OK;
    if (setjmp(png_jmpbuf(c->png))) {
        if (c->truncated || strstr(c->error, "Not enough image data"))
            return ftl_fail(FTL_E_FORMAT, "truncated PNG: %s (%zu bytes)", c->error, size);
        return ftl_fail(FTL_E_FORMAT, "corrupt PNG: %s", c->error);
    }
    png_set_read_fn(c->png, NULL, on_read);
    /* Pillow verifies every chunk CRC before the first IDAT, critical or not. */
    png_set_crc_action(c->png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
    png_read_info(c->png, c->info);
    png_uint_32 w, h;
    int depth, color, interlace;
    png_get_IHDR(c->png, c->info, &w, &h, &depth, &color, &interlace, NULL, NULL);
    long long pixels = (long long)w * h;
    if (pixels > FTL_IMAGE_MAX_PIXELS)
        return ftl_fail(FTL_E_UNSUPPORTED, "image too large: %ux%u = %lld pixels, above the limit "
                        "of %lld (Pillow's decompression-bomb limit)", w, h, pixels,
                        FTL_IMAGE_MAX_PIXELS);
    /* Deflate expands at most ~1032x: refuse a header no file of this size can fill. */
    int bits = depth * png_get_channels(c->png, c->info);
    if ((double)pixels * bits / 8 > 1100.0 * (double)size + 4096)
        return ftl_fail(FTL_E_FORMAT, "truncated PNG: the header says %ux%u, more than %zu bytes "
                        "can encode", w, h, size);
    /* Pillow never checks the image data's CRCs. */
    png_set_crc_action(c->png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
    if (depth == 16) png_set_strip_16(c->png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(c->png);
    if (color == PNG_COLOR_TYPE_PALETTE && depth < 8) png_set_packing(c->png);
    (void)png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);
    int channels = png_get_channels(c->png, c->info);
    size_t rowbytes = png_get_rowbytes(c->png, c->info);
    if (channels < 1 || channels > 4 || rowbytes != (size_t)w * channels)
        return ftl_fail(FTL_E_INTERNAL, "PNG: unexpected row layout (%d channels, %zu bytes for %u "
                        "pixels)", channels, rowbytes, w);
    if ((st = ftl_image_alloc(out, (int)w, (int)h)) != FTL_OK) return st;
    uint8_t *target = out->pixels;
    if (channels != 3) {
        if ((st = ftl_image_grow(&d->scratch, &d->scratch_cap, rowbytes * h)) != FTL_OK) return st;
        target = d->scratch;
    }
    c->rows = malloc(h * sizeof *c->rows);
    if (!c->rows) return ftl_fail(FTL_E_NOMEM, "out of memory for %u PNG rows", h);
    for (png_uint_32 y = 0; y < h; y++) c->rows[y] = target + (size_t)y * rowbytes;
    png_read_image(c->png, c->rows);

    size_t n = (size_t)w * h;
    const uint8_t *in = d->scratch;
    uint8_t *o = out->pixels;
    if (color == PNG_COLOR_TYPE_PALETTE) {
        uint8_t table[256][3];
        for (int i = 0; i < 256; i++) table[i][0] = table[i][1] = table[i][2] = (uint8_t)i;
        png_colorp pal = NULL;
        int npal = 0;
        if (png_get_PLTE(c->png, c->info, &pal, &npal) && pal)
            for (int i = 0; i < npal && i < 256; i++) {
                table[i][0] = pal[i].red;
                table[i][1] = pal[i].green;
                table[i][2] = pal[i].blue;
            }
        for (size_t i = 0; i < n; i++, o += 3) memcpy(o, table[in[i]], 3);
    } else if (channels == 1 || channels == 2) {
        for (size_t i = 0; i < n; i++, o += 3, in += channels) o[0] = o[1] = o[2] = in[0];
    } else if (channels == 4) {
        for (size_t i = 0; i < n; i++, o += 3, in += 4) memcpy(o, in, 3);
    }
    return FTL_OK;
}

static ftl_status png_decode(ftl_image_decoder *d, const uint8_t *data, size_t size, ftl_image *out) {
    int w, h;
    FTL_TRY(png_probe(data, size, &w, &h));
    png_ctx c;
    memset(&c, 0, sizeof c);
    c.warning = d->warning;
    c.warning_size = sizeof d->warning;
    plan_stream(&c.stream, data, size);
    c.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, on_error, on_warning);
    if (!c.png) return ftl_fail(FTL_E_NOMEM, "cannot start the PNG decoder");
    c.info = png_create_info_struct(c.png);
    ftl_status st = c.info ? decode_inner(&c, d, size, out)
                           : ftl_fail(FTL_E_NOMEM, "cannot start the PNG decoder");
    png_destroy_read_struct(&c.png, c.info ? &c.info : NULL, NULL);
    free(c.rows);
    return st;
}

/* The codec table's signatures: PNG's header needs no decoder state and has no DCT scaling. */
static ftl_status png_probe_codec(ftl_image_decoder *d, const uint8_t *data, size_t size, int *w,
                                  int *h) {
    (void)d;
    return png_probe(data, size, w, h);
}

static ftl_status png_decode_codec(ftl_image_decoder *d, const uint8_t *data, size_t size,
                                   int dct_scale, ftl_image *out) {
    (void)dct_scale;
    return png_decode(d, data, size, out);
}

const ftl_image_codec ftl_image_codec_png = {FTL_IMAGE_FORMAT_PNG, png_probe_codec, png_decode_codec};
