/* WebDataset samples in a tar shard (timm, DALI, PyTorch): members named KEY.EXT, where KEY is the
 * member's path up to the first dot of its file name (`a/b/000123.jpg`, `a/b/000123.cls` -> key
 * `a/b/000123`, extensions `jpg`, `cls`), the members of one sample adjacent in the shard. Labels are
 * in `KEY.cls` (a decimal integer in ASCII, spaces and newlines around it allowed) or `KEY.json` (an
 * object whose "label" or "cls" field is an integer or a class name). */
#ifndef FTL_DATA_WEBDATASET_H
#define FTL_DATA_WEBDATASET_H

#include "data/tar_index.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct webdataset_part {
    const char *ext;  /* after the first dot of the file name, case kept (points into the member's name) */
    size_t member;    /* index in the tar_index */
} webdataset_part;

typedef struct webdataset_sample {
    char *key;
    webdataset_part *parts;  /* in shard order; no two extensions equal ignoring case */
    size_t part_count;
} webdataset_sample;

/* Valid while its tar_index is open (extensions point into member names). */
typedef struct webdataset_sample_list {
    webdataset_sample *samples;  /* in shard order */
    size_t count;
    /* members with no dot in their file name (or nothing before or after it): in no sample */
    size_t members_without_key;
    webdataset_part *part_storage;
} webdataset_sample_list;

/* Groups the shard's members into samples by key. FTL_E_FORMAT, naming both members, when one sample
 * has two members of the same extension (compared ignoring case: `x.jpg` and `x.JPG`), or when a key
 * comes back after other samples (its members not adjacent: one image would become two samples). */
ftl_status webdataset_samples(const tar_index *t, webdataset_sample_list **out);
void webdataset_samples_free(webdataset_sample_list *s);

/* The member of extension `ext` (ignoring case), or false. */
bool webdataset_sample_find(const webdataset_sample *s, const char *ext, size_t *member);

typedef enum webdataset_label_kind {
    WEBDATASET_LABEL_ABSENT,  /* no .cls, and no .json or one without a label (or a null one): the caller decides */
    WEBDATASET_LABEL_INDEX,   /* an integer: `index` (any int32; the caller checks it against its classes) */
    WEBDATASET_LABEL_NAME,    /* a string from .json: `name`, for the caller to map to an index */
} webdataset_label_kind;

typedef struct webdataset_label {
    webdataset_label_kind kind;
    int32_t index;
    char *name;
    size_t member;  /* the .cls or .json member it came from (ABSENT: unset) */
} webdataset_label;

/* Reads the sample's label: its .cls member when it has one, else its .json member. Each is a small
 * read of the member alone (at most 1 MiB). FTL_E_FORMAT naming the file, the member and the text for
 * a .cls that is not a decimal integer or is out of int32's range, for .json that is not an object,
 * and for a label field that is not an integer (or a string, or null); also when "label" and "cls"
 * both hold integers, or both strings, that differ ("label" is taken first, "cls" when it is absent
 * or null). Thread-safe. Free with webdataset_label_free. */
ftl_status webdataset_sample_label(const tar_index *t, const webdataset_sample *s, webdataset_label *out);
void webdataset_label_free(webdataset_label *label);

#endif
