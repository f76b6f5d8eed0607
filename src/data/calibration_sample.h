/* The images int8 calibration runs on: a seeded, spread-out sample of a dataset's rows. */
#ifndef FTL_DATA_CALIBRATION_SAMPLE_H
#define FTL_DATA_CALIBRATION_SAMPLE_H

#include "ftl/embed.h"

/* o->calibration_rows images (all when the set has fewer) of o->calibration_path, or of the
 * sources, read in 8 windows of consecutive rows that start at seeded places spread over the
 * set (so classes stored one after another are all seen); *images (caller frees) holds *count
 * images of *size x *size x 3 bytes. Errors: a set with fewer rows than o->batch, or whose image
 * size differs from the sources'. */
ftl_status calibration_sample_read(const ftl_embed_options *o, uint8_t **images, int *count, int *size);

#endif
