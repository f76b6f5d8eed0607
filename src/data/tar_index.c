/* tar_index: a tar file's regular-file members from its headers alone (see tar_index.h). */
#include "data/tar_index.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    TAR_BLOCK = 512,
    /* A long name or pax header larger than this is damage, not metadata: refused before allocating. */
    TAR_EXTENSION_MAX = 1 << 20,
    SKIPPED_NAMED_MAX = 3,
    QUOTED_CAP = 300,
};

/* Header fields (POSIX ustar; GNU and v7 share the first 257 bytes). */
enum {
    F_NAME = 0, L_NAME = 100, F_SIZE = 124, L_SIZE = 12, F_CHKSUM = 148, L_CHKSUM = 8, F_TYPE = 156,
    F_MAGIC = 257, F_PREFIX = 345, L_PREFIX = 155,
};

/* Members skipped for their type: counted, the first few named in the index's warning. */
typedef struct skipped_names {
    size_t count;
    char *names[SKIPPED_NAMED_MAX];
} skipped_names;

/* One walk over the headers: the extension headers (pax, GNU long name) seen for the next member. */
typedef struct tar_walk {
    tar_index *t;
    size_t cap;
    bool pending;           /* extension headers seen, their member not yet */
    uint64_t pending_from;  /* header offset of the first of them */
    char *long_name, *pax_path;
    bool pax_has_size;
    uint64_t pax_size;
    skipped_names links, others;
    /* An extension's data is read with the header after it in one pread (all metadata, no member
     * data): a pax shard then costs two reads per member, not three. */
    uint8_t *ahead;
    uint64_t ahead_from;
    size_t ahead_len, ahead_cap;
} tar_walk;

void tar_quote(const char *bytes, size_t len, char *out, size_t cap) {
    size_t o = 0;
    out[o++] = '\'';
    for (size_t i = 0; i < len;) {
        char piece[8];
        size_t n, step = 1;
        unsigned char c = (unsigned char)bytes[i];
        char utf8[5] = {0}; /* copied, so the length check never reads past `len` */
        memcpy(utf8, bytes + i, len - i < 4 ? len - i : 4);
        int u = c >= 0x80 ? ftl_utf8_char_length(utf8) : 0;
        if (u > 0) {
            memcpy(piece, utf8, (size_t)u);
            n = step = (size_t)u;
        } else if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
            n = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
        } else {
            piece[0] = (char)c;
            n = 1;
        }
        if (o + n + 5 > cap) { /* keep room for "...", the closing quote and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, piece, n);
        o += n;
        i += step;
    }
    out[o++] = '\'';
    out[o] = '\0';
}

/* A name as quoted text for messages (a static-size buffer per call site). */
typedef struct quoted {
    char text[QUOTED_CAP];
} quoted;

static quoted quote_string(const char *s) {
    quoted q;
    tar_quote(s, strlen(s), q.text, sizeof q.text);
    return q;
}

/* A field up to its NUL (a base-256 number: all of it). */
static quoted quote_field(const uint8_t *h, size_t offset, size_t len) {
    quoted q;
    size_t n = h[offset] & 0x80 ? len : strnlen((const char *)h + offset, len);
    tar_quote((const char *)h + offset, n, q.text, sizeof q.text);
    return q;
}

static quoted quote_name_field(const uint8_t *h) { return quote_field(h, F_NAME, L_NAME); }

/* pread of exactly `size` bytes; the messages lack the file's name (callers add it with the member). */
static ftl_status read_exact(const tar_index *t, void *buf, size_t size, uint64_t offset) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(t->fd, (uint8_t *)buf + got, size - got, (off_t)(offset + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            return ftl_fail(FTL_E_IO, "cannot read %zu bytes at byte %llu: %s", size, (unsigned long long)offset, strerror(errno));
        }
        if (n == 0)
            return ftl_fail(FTL_E_FORMAT, "the file ends at byte %llu, before the %zu bytes at byte %llu (shortened while open?)",
                            (unsigned long long)(offset + got), size, (unsigned long long)offset);
        got += (size_t)n;
    }
    return FTL_OK;
}

typedef enum number_result { NUMBER_OK, NUMBER_BLANK, NUMBER_GARBAGE, NUMBER_NEGATIVE, NUMBER_TOO_LARGE } number_result;

/* An octal field as GNU tar reads it: leading spaces, octal digits, then a NUL or a space (or the
 * field's end); what follows that terminator is not looked at. */
static number_result parse_octal(const uint8_t *f, size_t len, uint64_t *out) {
    size_t i = 0;
    while (i < len && f[i] == ' ') i++;
    size_t first = i;
    uint64_t v = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > UINT64_MAX >> 3) return NUMBER_TOO_LARGE;
        v = v << 3 | (uint64_t)(f[i] - '0');
    }
    if (i == first) {
        for (size_t j = first; j < len; j++)
            if (f[j] != '\0' && f[j] != ' ') return NUMBER_GARBAGE;
        return NUMBER_BLANK;
    }
    if (i < len && f[i] != '\0' && f[i] != ' ') return NUMBER_GARBAGE;
    *out = v;
    return NUMBER_OK;
}

/* A numeric field: octal, or GNU's base-256 (first byte 0x80 positive, 0xff negative). */
static number_result parse_number(const uint8_t *f, size_t len, uint64_t *out) {
    if (f[0] == 0xff) return NUMBER_NEGATIVE;
    if (f[0] != 0x80) return parse_octal(f, len, out);
    uint64_t v = 0;
    for (size_t i = 1; i < len; i++) {
        if (v > UINT64_MAX >> 8) return NUMBER_TOO_LARGE;
        v = v << 8 | f[i];
    }
    *out = v;
    return NUMBER_OK;
}

/* A file that is no tar at its first header may be a compressed one (shard.tar.gz renamed): say so. */
static ftl_status refuse_compressed(const tar_index *t, const uint8_t *h) {
    const char *codec = h[0] == 0x1f && h[1] == 0x8b                  ? "gzip"
                        : memcmp(h, "BZh", 3) == 0                     ? "bzip2"
                        : memcmp(h, "\xfd" "7zXZ\0", 6) == 0          ? "xz"
                        : memcmp(h, "\x28\xb5\x2f\xfd", 4) == 0      ? "zstd"
                                                                       : NULL;
    if (!codec) return FTL_OK;
    return ftl_fail(FTL_E_UNSUPPORTED, "%s: is compressed with %s; ftl reads uncompressed tar shards (decompress it first)",
                    t->path, codec);
}

/* The header checksum: the sum of its bytes with the checksum field read as spaces, unsigned (POSIX)
 * or signed (some old writers). */
static ftl_status check_header(const tar_index *t, const uint8_t *h, uint64_t pos) {
    uint64_t stored = 0;
    number_result r = parse_octal(h + F_CHKSUM, L_CHKSUM, &stored);
    /* Over all 512 bytes (a loop the compiler vectorizes: it is most of the indexing time), then the
     * checksum field's bytes replaced by spaces. */
    uint32_t unsigned_sum = 0;
    int32_t signed_sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++) {
        unsigned_sum += h[i];
        signed_sum += (int8_t)h[i];
    }
    for (size_t i = F_CHKSUM; i < F_CHKSUM + L_CHKSUM; i++) {
        unsigned_sum += (uint32_t)' ' - h[i];
        signed_sum += ' ' - (int8_t)h[i];
    }
    if (r == NUMBER_OK && (stored == unsigned_sum || (int64_t)stored == (int64_t)signed_sum)) return FTL_OK;
    if (pos == 0) FTL_TRY(refuse_compressed(t, h));
    return ftl_fail(FTL_E_FORMAT,
                    "%s: header at byte %llu (name field %s): checksum field %s does not match the header's bytes, which sum "
                    "to %llu (a damaged header%s)",
                    t->path, (unsigned long long)pos, quote_name_field(h).text, quote_field(h, F_CHKSUM, L_CHKSUM).text,
                    (unsigned long long)unsigned_sum, pos == 0 ? ", or not a tar file" : "");
}

static ftl_status header_size(const tar_index *t, const uint8_t *h, uint64_t pos, uint64_t *size) {
    static const char *const why[] = {"", "is blank, expected an octal number", "is not an octal or base-256 number",
                                      "is negative", "is too large"};
    number_result r = parse_number(h + F_SIZE, L_SIZE, size);
    if (r == NUMBER_OK) return FTL_OK;
    return ftl_fail(FTL_E_FORMAT, "%s: header at byte %llu (name field %s): size field %s %s", t->path, (unsigned long long)pos,
                    quote_name_field(h).text, quote_field(h, F_SIZE, L_SIZE).text, why[r]);
}

static void note_pending(tar_walk *w, uint64_t pos) {
    if (!w->pending) w->pending_from = pos;
    w->pending = true;
}

static void clear_pending(tar_walk *w) {
    free(w->long_name);
    free(w->pax_path);
    w->long_name = w->pax_path = NULL;
    w->pax_has_size = false;
    w->pending = false;
}

/* One pax record's effect. A global header ('g') that would rename or resize every member is refused. */
static ftl_status take_pax_record(tar_walk *w, const char *key, size_t key_len, const char *value, size_t value_len,
                                  bool global, const char *where) {
    bool is_path = key_len == 4 && memcmp(key, "path", 4) == 0;
    bool is_size = key_len == 4 && memcmp(key, "size", 4) == 0;
    if (key_len >= 11 && memcmp(key, "GNU.sparse.", 11) == 0)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: %s: a GNU sparse member, whose stored bytes are not the file's: not supported "
                        "(write the shard without --sparse)", w->t->path, where);
    if ((is_path || is_size) && global)
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: %s: a global '%s' record would apply to every member: not supported", w->t->path,
                        where, is_path ? "path" : "size");
    if (is_path) {
        free(w->pax_path);
        w->pax_path = NULL;
        if (value_len == 0) return FTL_OK; /* an empty value unsets the keyword */
        if (memchr(value, '\0', value_len))
            return ftl_fail(FTL_E_FORMAT, "%s: %s: the path record holds a NUL byte", w->t->path, where);
        w->pax_path = ftl_xmalloc(value_len + 1);
        memcpy(w->pax_path, value, value_len);
        w->pax_path[value_len] = '\0';
    } else if (is_size) {
        w->pax_has_size = false;
        if (value_len == 0) return FTL_OK;
        uint64_t v = 0;
        for (size_t i = 0; i < value_len; i++) {
            if (value[i] < '0' || value[i] > '9' || v > (UINT64_MAX - 9) / 10) {
                quoted q;
                tar_quote(value, value_len, q.text, sizeof q.text);
                return ftl_fail(FTL_E_FORMAT, "%s: %s: size record %s is not a decimal byte count", w->t->path, where, q.text);
            }
            v = v * 10 + (uint64_t)(value[i] - '0');
        }
        w->pax_size = v;
        w->pax_has_size = true;
    }
    return FTL_OK;
}

/* Records "LENGTH KEY=VALUE\n", LENGTH counting the whole record; NUL padding after the last is allowed. */
static ftl_status parse_pax(tar_walk *w, const char *rec, size_t n, bool global, uint64_t pos) {
    char where[64];
    snprintf(where, sizeof where, "%s header at byte %llu", global ? "global pax" : "pax", (unsigned long long)pos);
    for (size_t i = 0, k = 1; i < n; k++) {
        if (rec[i] == '\0') {
            for (size_t j = i; j < n; j++)
                if (rec[j] != '\0') return ftl_fail(FTL_E_FORMAT, "%s: %s: bytes after a NUL at offset %zu", w->t->path, where, i);
            break;
        }
        size_t len = 0, j = i;
        for (; j < n && rec[j] >= '0' && rec[j] <= '9' && j - i < 19; j++) len = len * 10 + (size_t)(rec[j] - '0');
        if (j == i || j >= n || rec[j] != ' ')
            return ftl_fail(FTL_E_FORMAT, "%s: %s: record %zu (offset %zu) does not start with 'LENGTH ', as 'LENGTH KEY=VALUE\\n' does",
                            w->t->path, where, k, i);
        if (len > n - i)
            return ftl_fail(FTL_E_FORMAT, "%s: %s: record %zu (offset %zu) says it is %zu bytes long, but only %zu of the header's %zu "
                            "remain", w->t->path, where, k, i, len, n - i, n);
        size_t key = j + 1, end = i + len;
        if (end < key + 3 || rec[end - 1] != '\n')
            return ftl_fail(FTL_E_FORMAT, "%s: %s: record %zu (offset %zu) of length %zu does not end with a newline where its length "
                            "says (a wrong length)", w->t->path, where, k, i, len);
        const char *eq = memchr(rec + key, '=', end - 1 - key);
        if (!eq || eq == rec + key)
            return ftl_fail(FTL_E_FORMAT, "%s: %s: record %zu (offset %zu) has no 'KEY='", w->t->path, where, k, i);
        size_t key_len = (size_t)(eq - (rec + key)), value_start = key + key_len + 1;
        FTL_TRY(take_pax_record(w, rec + key, key_len, rec + value_start, end - 1 - value_start, global, where));
        i = end;
    }
    return FTL_OK;
}

/* The data of a pax or GNU long-name header (at most TAR_EXTENSION_MAX bytes), NUL-terminated; the
 * header that follows it (when the file holds one) is kept in w->ahead. */
static ftl_status read_extension(tar_walk *w, const char *kind, uint64_t pos, uint64_t size, char **out) {
    *out = NULL;
    if (size > TAR_EXTENSION_MAX)
        return ftl_fail(FTL_E_FORMAT, "%s: %s header at byte %llu holds %llu bytes, more than the %d such a header may hold",
                        w->t->path, kind, (unsigned long long)pos, (unsigned long long)size, TAR_EXTENSION_MAX);
    uint64_t from = pos + TAR_BLOCK, left = w->t->file_size - from;
    uint64_t want = (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK + TAR_BLOCK;
    size_t len = (size_t)(want < left ? want : left); /* at least `size`: the caller checked the file holds it */
    if (len > w->ahead_cap) {
        w->ahead_cap = len;
        w->ahead = ftl_xrealloc(w->ahead, len);
    }
    w->ahead_len = 0;
    ftl_status st = read_exact(w->t, w->ahead, len, from);
    if (st != FTL_OK) return ftl_fail_context(st, "%s: %s header at byte %llu", w->t->path, kind, (unsigned long long)pos);
    w->ahead_from = from;
    w->ahead_len = len;
    char *buf = ftl_xmalloc((size_t)size + 1);
    memcpy(buf, w->ahead, (size_t)size);
    buf[size] = '\0';
    *out = buf;
    return FTL_OK;
}

/* The header at pos: from w->ahead when the last extension read brought it, else one pread. */
static ftl_status read_header(tar_walk *w, uint8_t *h, uint64_t pos) {
    if (w->ahead_len && pos >= w->ahead_from && pos - w->ahead_from + TAR_BLOCK <= w->ahead_len) {
        memcpy(h, w->ahead + (pos - w->ahead_from), TAR_BLOCK);
        return FTL_OK;
    }
    ftl_status st = read_exact(w->t, h, TAR_BLOCK, pos);
    if (st != FTL_OK) return ftl_fail_context(st, "%s: header at byte %llu", w->t->path, (unsigned long long)pos);
    return FTL_OK;
}

/* typeflag 'x', 'g', 'L' or 'K': metadata for the next member (or, 'g', for all). */
static ftl_status take_extension(tar_walk *w, char type, uint64_t pos, uint64_t size) {
    const char *kind = type == 'x' ? "pax" : type == 'g' ? "global pax" : type == 'L' ? "GNU long-name" : "GNU long-link";
    if (size > w->t->file_size - (pos + TAR_BLOCK))
        return ftl_fail(FTL_E_FORMAT, "%s: %s header at byte %llu: its %llu bytes run past the end of the file at byte %llu "
                        "(the shard is cut short)", w->t->path, kind, (unsigned long long)pos, (unsigned long long)size,
                        (unsigned long long)w->t->file_size);
    if (type == 'K') { /* a link's long target: links are skipped, so it is not read */
        note_pending(w, pos);
        return FTL_OK;
    }
    char *data;
    FTL_TRY(read_extension(w, kind, pos, size, &data));
    ftl_status st = FTL_OK;
    if (type == 'L') {
        free(w->long_name);
        w->long_name = data; /* the name ends at its first NUL */
        data = NULL;
    } else {
        st = parse_pax(w, data, (size_t)size, type == 'g', pos);
    }
    free(data);
    if (type != 'g') note_pending(w, pos);
    return st;
}

/* The member's full name: a pax path, a GNU long name, or the header's (POSIX ustar: prefix/name). */
static char *member_name(tar_walk *w, const uint8_t *h) {
    char *name;
    if (w->pax_path) {
        name = w->pax_path;
        w->pax_path = NULL;
    } else if (w->long_name) {
        name = w->long_name;
        w->long_name = NULL;
    } else {
        size_t n = strnlen((const char *)h + F_NAME, L_NAME);
        bool posix = memcmp(h + F_MAGIC, "ustar\0", 6) == 0; /* GNU's magic is "ustar " and has no prefix */
        size_t p = posix ? strnlen((const char *)h + F_PREFIX, L_PREFIX) : 0;
        name = ftl_xmalloc(p + 1 + n + 1);
        size_t o = 0;
        if (p) {
            memcpy(name, h + F_PREFIX, p);
            name[p] = '/';
            o = p + 1;
        }
        memcpy(name + o, h + F_NAME, n);
        name[o + n] = '\0';
    }
    return name;
}

static void skip_named(skipped_names *s, char *name) {
    if (s->count < SKIPPED_NAMED_MAX) s->names[s->count] = name;
    else free(name);
    s->count++;
}

static ftl_status add_member(tar_walk *w, char *name, uint64_t header_offset, uint64_t data_offset, uint64_t size) {
    tar_index *t = w->t;
    if (!name[0]) {
        free(name);
        return ftl_fail(FTL_E_FORMAT, "%s: the member at byte %llu has an empty name", t->path, (unsigned long long)header_offset);
    }
    if (t->count == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        t->members = ftl_xrealloc(t->members, w->cap * sizeof *t->members);
    }
    t->members[t->count++] = (tar_member){name, data_offset, size, header_offset};
    return FTL_OK;
}

/* One verified header at `pos`: its member (or metadata) taken, *next the offset of the next header. */
static ftl_status take_header(tar_walk *w, const uint8_t *h, uint64_t pos, uint64_t *next) {
    tar_index *t = w->t;
    char type = (char)h[F_TYPE];
    uint64_t size;
    FTL_TRY(header_size(t, h, pos, &size));
    uint64_t data = pos + TAR_BLOCK;
    if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
        FTL_TRY(take_extension(w, type, pos, size));
        *next = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        return FTL_OK;
    }
    if (w->pax_has_size) size = w->pax_size;
    uint64_t header_offset = w->pending ? w->pending_from : pos;
    char *name = member_name(w, h);
    clear_pending(w);
    if (type == 'S' || type == 'M') {
        quoted q = quote_string(name);
        free(name);
        return ftl_fail(FTL_E_UNSUPPORTED, "%s: member %s (header at byte %llu) is a GNU %s member, whose stored bytes are not the "
                        "file's: not supported", t->path, q.text, (unsigned long long)header_offset,
                        type == 'S' ? "sparse" : "multi-volume continuation");
    }
    /* As GNU tar: directories and hard links have no data in the archive, whatever their size says. */
    bool has_data = type != '5' && type != '1';
    if (has_data && size > t->file_size - data) {
        quoted q = quote_string(name);
        free(name);
        return ftl_fail(FTL_E_FORMAT, "%s: member %s (header at byte %llu): its %llu bytes of data run past the end of the file "
                        "at byte %llu (the shard is cut short)", t->path, q.text, (unsigned long long)header_offset,
                        (unsigned long long)size, (unsigned long long)t->file_size);
    }
    *next = has_data ? data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK : data;
    size_t len = strlen(name);
    bool regular = type == '0' || type == '\0' || type == '7';
    if (type == '5' || (regular && len && name[len - 1] == '/')) { /* v7 marks folders by the slash */
        free(name);
        return FTL_OK;
    }
    if (regular) return add_member(w, name, header_offset, data, size);
    skip_named(type == '1' || type == '2' ? &w->links : &w->others, name);
    return FTL_OK;
}

static bool is_zero_block(const uint8_t *h) {
    for (size_t i = 0; i < TAR_BLOCK; i++)
        if (h[i]) return false;
    return true;
}

static ftl_status walk_headers(tar_walk *w) {
    tar_index *t = w->t;
    uint8_t h[TAR_BLOCK];
    uint64_t pos = 0;
    /* A last member whose data is whole but unpadded ends the file past pos + size: that is the end too. */
    while (pos < t->file_size) {
        if (t->file_size - pos < TAR_BLOCK) {
            if (pos == 0 && read_exact(t, h, (size_t)t->file_size, 0) == FTL_OK) {
                memset(h + t->file_size, 0, TAR_BLOCK - (size_t)t->file_size);
                FTL_TRY(refuse_compressed(t, h));
            }
            return ftl_fail(FTL_E_FORMAT, "%s: the file ends inside the header at byte %llu (%llu of its %d bytes; the shard is "
                            "cut short)", t->path, (unsigned long long)pos, (unsigned long long)(t->file_size - pos), TAR_BLOCK);
        }
        FTL_TRY(read_header(w, h, pos));
        if (is_zero_block(h)) break; /* the end-of-archive marker (its second block is not needed) */
        FTL_TRY(check_header(t, h, pos));
        FTL_TRY(take_header(w, h, pos, &pos));
    }
    if (w->pending)
        return ftl_fail(FTL_E_FORMAT, "%s: the archive ends after the extended header at byte %llu, with no member for it (the "
                        "shard is cut short)", t->path, (unsigned long long)w->pending_from);
    return FTL_OK;
}

static void append_skipped(ftl_strbuf *b, const skipped_names *s, const char *what) {
    if (!s->count) return;
    ftl_strbuf_printf(b, "%s%zu %s skipped:", b->len ? "; " : "", s->count, what);
    for (size_t i = 0; i < s->count && i < SKIPPED_NAMED_MAX; i++)
        ftl_strbuf_printf(b, "%s %s", i ? "," : "", quote_string(s->names[i]).text);
    if (s->count > SKIPPED_NAMED_MAX) ftl_strbuf_printf(b, " and %zu more", s->count - SKIPPED_NAMED_MAX);
}

static void finish_walk(tar_walk *w) {
    tar_index *t = w->t;
    t->links_skipped = w->links.count;
    t->others_skipped = w->others.count;
    if (t->links_skipped || t->others_skipped) {
        ftl_strbuf b = {0};
        append_skipped(&b, &w->links, w->links.count == 1 ? "link (not followed)" : "links (not followed)");
        append_skipped(&b, &w->others, "members that are not regular files (devices, FIFOs, unknown types)");
        t->warning = ftl_format("%s: %s", t->path, b.data);
        ftl_strbuf_free(&b);
    }
    clear_pending(w);
    free(w->ahead);
    for (size_t i = 0; i < SKIPPED_NAMED_MAX; i++) {
        free(w->links.names[i]);
        free(w->others.names[i]);
    }
}

ftl_status tar_index_open(const char *path, tar_index **out) {
    *out = NULL;
    tar_index *t = ftl_xcalloc(1, sizeof *t);
    t->path = ftl_strdup(path);
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    ftl_status st = FTL_OK;
    if (t->fd < 0)
        st = ftl_fail(errno == ENOENT ? FTL_E_NOT_FOUND : FTL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (fstat(t->fd, &sb) != 0)
        st = ftl_fail(FTL_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = ftl_fail(FTL_E_INVALID_ARG, "%s: is not a file (a tar shard was expected)", path);
    if (st == FTL_OK) {
        t->file_size = (uint64_t)sb.st_size;
        tar_walk w = {.t = t};
        st = walk_headers(&w);
        finish_walk(&w);
    }
    if (st != FTL_OK) {
        tar_index_close(t);
        return st;
    }
    *out = t;
    return FTL_OK;
}

void tar_index_close(tar_index *t) {
    if (!t) return;
    if (t->fd >= 0) close(t->fd);
    for (size_t i = 0; i < t->count; i++) free(t->members[i].name);
    free(t->members);
    free(t->warning);
    free(t->path);
    free(t);
}

ftl_status tar_index_read(const tar_index *t, size_t member, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    if (member >= t->count)
        return ftl_fail(FTL_E_INVALID_ARG, "%s: member %zu asked for, the shard has %zu", t->path, member, t->count);
    const tar_member *m = &t->members[member];
    uint8_t *buf = malloc(m->size ? (size_t)m->size : 1);
    if (!buf)
        return ftl_fail(FTL_E_NOMEM, "%s: member %s: cannot allocate %llu bytes", t->path, quote_string(m->name).text,
                        (unsigned long long)m->size);
    ftl_status st = read_exact(t, buf, (size_t)m->size, m->data_offset);
    if (st != FTL_OK) {
        free(buf);
        return ftl_fail_context(st, "%s: member %s", t->path, quote_string(m->name).text);
    }
    *data = buf;
    *size = (size_t)m->size;
    return FTL_OK;
}
