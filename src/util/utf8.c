/* UTF-8 well-formedness (RFC 3629): what the JSON and HTML writers may pass through unchanged. */
#include "ftl/base.h"

int ftl_utf8_char_length(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80) return p[0] ? 1 : 0;
    int n;
    unsigned min, c;
    if ((p[0] & 0xe0) == 0xc0) n = 2, min = 0x80, c = p[0] & 0x1f;
    else if ((p[0] & 0xf0) == 0xe0) n = 3, min = 0x800, c = p[0] & 0x0f;
    else if ((p[0] & 0xf8) == 0xf0) n = 4, min = 0x10000, c = p[0] & 0x07;
    else return 0;
    for (int i = 1; i < n; i++) { /* stops at the terminating NUL, which is no continuation byte */
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    return n;
}
