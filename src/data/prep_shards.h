/* `ftl prep` from WebDataset shards: a .tar, or a folder of them (sorted by name), each sample's image
 * (its .jpg, .jpeg or .png member) labelled by its .cls or .json member (data/webdataset.h). Integer
 * labels are class indexes named by their decimal text; names from .json are sorted into indexes, as
 * class folders are. A shard's members are read at their offsets, in any order. */
#ifndef FTL_DATA_PREP_SHARDS_H
#define FTL_DATA_PREP_SHARDS_H

#include "data/prep_source.h"

/* Whether `folder` holds .tar files (and no class folders' images would be meant instead). */
bool prep_shards_folder_has_shards(const char *folder);
/* Fills *source from the shards at options->source_dir (and options->val_source: all val). */
ftl_status prep_shards_open(const ftl_prep_options *options, prep_source *source);
ftl_status prep_shards_read(const prep_shards *shards, const prep_item *item, uint8_t **data, size_t *size);
char *prep_shards_item_name(const prep_shards *shards, const prep_item *item);
void prep_shards_free(prep_shards *shards);

#endif
