/* Labels of a table's rows or a shard's samples as prep's class indexes: integers (with class names
 * from the source's metadata, or their decimal text), or text (names sorted into indexes, as class
 * folders are: "001.ak47" shown as "ak47"). One kind per source: a mix is an error. */
#ifndef FTL_DATA_PREP_LABELS_H
#define FTL_DATA_PREP_LABELS_H

#include "data/prep_source.h"
#include "util/string_list.h"

typedef struct prep_labels {
    int64_t count;            /* one per item of the source, in item order */
    int64_t *ints;            /* integer labels (text_count == 0) */
    char **texts;             /* text labels (NULL slots for integer ones) */
    int64_t int_count, text_count;
    char **names;             /* class names of integer labels from metadata (NULL: none) */
    int64_t name_count;
    char *names_from;         /* where the names came from, for messages ("ftl.classes of X") */
} prep_labels;

void prep_labels_add_int(prep_labels *l, int64_t value);
void prep_labels_add_text(prep_labels *l, char *text); /* takes the string */
/* Names for integer labels from a Parquet file's metadata: ftl.classes, or Hugging Face's
 * ClassLabel names of `column` (the `huggingface` key). Returns whether any were found. */
bool prep_labels_names_from_metadata(prep_labels *l, const char *metadata_ftl_classes, const char *metadata_huggingface,
                                     const char *column, const char *file);
/* How messages name an item (prep_source_item_name for the source's kind): the table or shards
 * that call prep_labels_finish pass theirs, so labels sit below the sources. */
typedef char *(*prep_item_namer)(const prep_source *source, const prep_item *item);
/* Sets every item's label and the source's classes (class_folders, class_names, class_count).
 * Out-of-range or negative integers and mixed kinds are FTL_E_INVALID_ARG naming the item. */
ftl_status prep_labels_finish(prep_labels *l, prep_source *source, prep_item_namer name_item);
/* "001.ak47" -> "ak47" (Caltech-style numeric prefixes dropped) for every name, unless that would
 * merge two: then the names as they are. Fills s->class_names from s->class_folders. */
void prep_labels_set_class_names(prep_source *source);
void prep_labels_free(prep_labels *l);

#endif
