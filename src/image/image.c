/* Format sniffing and the decoder front end (JPEG and PNG; others refused). */
#include "image/image_internal.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

ftl_image_format ftl_image_sniff(const uint8_t *d, size_t n) {
    if (!d) return FTL_IMAGE_FORMAT_UNKNOWN;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return FTL_IMAGE_FORMAT_JPEG;
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return FTL_IMAGE_FORMAT_PNG;
    if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6))) return FTL_IMAGE_FORMAT_GIF;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M') return FTL_IMAGE_FORMAT_BMP;
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return FTL_IMAGE_FORMAT_WEBP;
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) return FTL_IMAGE_FORMAT_TIFF;
    return FTL_IMAGE_FORMAT_UNKNOWN;
}

const char *ftl_image_format_name(ftl_image_format f) {
    switch (f) {
    case FTL_IMAGE_FORMAT_JPEG: return "JPEG";
    case FTL_IMAGE_FORMAT_PNG: return "PNG";
    case FTL_IMAGE_FORMAT_GIF: return "GIF";
    case FTL_IMAGE_FORMAT_BMP: return "BMP";
    case FTL_IMAGE_FORMAT_WEBP: return "WEBP";
    case FTL_IMAGE_FORMAT_TIFF: return "TIFF";
    case FTL_IMAGE_FORMAT_UNKNOWN: break;
    }
    return "unknown";
}

static ftl_status refuse_format(ftl_image_format f, size_t size) {
    if (size == 0) return ftl_fail(FTL_E_FORMAT, "empty file (0 bytes)");
    if (f == FTL_IMAGE_FORMAT_UNKNOWN)
        return ftl_fail(FTL_E_FORMAT, "not an image: unrecognised format (ftl reads JPEG and PNG)");
    return ftl_fail(FTL_E_UNSUPPORTED, "unsupported image format %s (ftl reads JPEG and PNG)",
                    ftl_image_format_name(f));
}

/* The registered decoders, one per format ftl reads. */
static const ftl_image_codec *const ftl_image_codecs[] = {&ftl_image_codec_jpeg, &ftl_image_codec_png};

static const ftl_image_codec *codec_for(ftl_image_format f) {
    for (size_t i = 0; i < sizeof ftl_image_codecs / sizeof ftl_image_codecs[0]; i++)
        if (ftl_image_codecs[i]->format == f) return ftl_image_codecs[i];
    return NULL;
}

ftl_status ftl_image_decoder_probe(ftl_image_decoder *d, const uint8_t *data, size_t size,
                                   ftl_image_format *format, int *width, int *height) {
    ftl_image_format f = ftl_image_sniff(data, size);
    if (format) *format = f;
    const ftl_image_codec *codec = codec_for(f);
    if (codec) return codec->probe(d, data, size, width, height);
    return refuse_format(f, size);
}

ftl_status ftl_image_decoder_run(ftl_image_decoder *d, const uint8_t *data, size_t size,
                                 int dct_scale, ftl_image *out, ftl_image_format *format) {
    ftl_image_format f = ftl_image_sniff(data, size);
    if (format) *format = f;
    d->warning[0] = 0;
    const ftl_image_codec *codec = codec_for(f);
    if (codec) return codec->decode(d, data, size, dct_scale, out);
    return refuse_format(f, size);
}


ftl_status ftl_image_decode_rgb(const uint8_t *data, size_t size, ftl_image *out) {
    ftl_image_decoder d = {0};
    ftl_status st = ftl_image_decoder_run(&d, data, size, 1, out, NULL);
    ftl_image_decoder_free(&d);
    return st;
}

void ftl_image_flip_horizontal(const uint8_t *src, uint8_t *dst, int count, int size) {
    size_t row = (size_t)size * 3;
    for (size_t y = 0; y < (size_t)count * (size_t)size; y++) {
        const uint8_t *in = src + y * row;
        uint8_t *out = dst + y * row;
        for (int a = 0, b = size - 1; a <= b; a++, b--) { /* swap pixels a and b (works in place) */
            uint8_t t[3] = {in[3 * a], in[3 * a + 1], in[3 * a + 2]};
            out[3 * a] = in[3 * b], out[3 * a + 1] = in[3 * b + 1], out[3 * a + 2] = in[3 * b + 2];
            out[3 * b] = t[0], out[3 * b + 1] = t[1], out[3 * b + 2] = t[2];
        }
    }
}
