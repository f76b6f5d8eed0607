/* The ftl dataset format: what `ftl prep` writes and every later command reads.
 *
 * Columns: `label` INT32 (0-based index into the sorted class names), `image` BYTE_ARRAY
 * (S*S*3 raw RGB bytes, HWC), `path` UTF8 string (relative to the source folder).
 * Version 2 (`ftl prep --keep-encoded`) adds `image_format` UTF8: "rgb" where `image` holds the
 * S*S*3 pixels, "jpeg" or "png" where it holds the original file, which a reader decodes with
 * the recipe named in ftl.resize to get the very pixels prep computed.
 * Key-value metadata (all values are strings; lists are JSON arrays): */
#ifndef FTL_DATA_DATASET_H
#define FTL_DATA_DATASET_H

#define FTL_META_FORMAT        "ftl.format"        /* FTL_DATASET_PIXELS or FTL_DATASET_ENCODED */
#define FTL_META_VERSION       "ftl.version"       /* ftl version that wrote the file */
#define FTL_META_CLASSES       "ftl.classes"       /* JSON array of class names, index = label */
#define FTL_META_CLASS_FOLDERS "ftl.class_folders" /* JSON array of the source folder names */
#define FTL_META_CLASS_COUNTS  "ftl.class_counts"  /* JSON array of rows per class in this file */
#define FTL_META_IMAGE_SIZE    "ftl.image_size"    /* S: images are S x S x 3 */
#define FTL_META_IMAGE_LAYOUT  "ftl.image_layout"  /* "HWC-RGB-uint8" */
#define FTL_META_SPLIT         "ftl.split"         /* "train" or "val" */
#define FTL_META_SPLIT_METHOD  "ftl.split_method"  /* "folders", "stratified" or "random" */
#define FTL_META_SPLIT_SEED    "ftl.split_seed"
#define FTL_META_VAL_FRACTION  "ftl.val_fraction"
#define FTL_META_RESIZE        "ftl.resize"        /* the recipe: FTL_RESIZE_RECIPE */

#define FTL_DATASET_PIXELS  "ftl-dataset-1"  /* every image stored as its S*S*3 pixels */
#define FTL_DATASET_ENCODED "ftl-dataset-2"  /* per row: pixels or the encoded original (image_format) */
#define FTL_DATASET_PREFIX  "ftl-dataset-"
/* prep's thumbnail recipe (src/image/prepper.c, no DCT scaling): a reader of encoded rows
 * refuses any other, since it could not give the pixels prep computed */
#define FTL_RESIZE_RECIPE "pillow-9.4-thumbnail-lanczos+paste-centred-white"

/* Feature files (`ftl embed`, the feature cache): label, features (FIXED_LEN_BYTE_ARRAY of
 * 4*D bytes: D float32, little-endian), path; plus these keys and the source's ftl.classes. */
#define FTL_META_FEATURES_FORMAT  "ftl-features-1"
#define FTL_META_BACKBONE_SHA256  "ftl.backbone_sha256"
#define FTL_META_BACKBONE_PATH    "ftl.backbone_path"
#define FTL_META_FEATURE_TENSOR   "ftl.feature_tensor"
#define FTL_META_FEATURE_DIM      "ftl.feature_dim"
#define FTL_META_PREPROCESS       "ftl.preprocess"         /* JSON: scaling, mean/std, resize, layout */
#define FTL_META_PRECISION        "ftl.precision"          /* fp32, bf16, tf32 or int8 */
#define FTL_META_INT8_SCALES      "ftl.int8_scales"        /* precision int8: the calibration (ftl_nn_int8_scales_json) */
#define FTL_META_DEVICE           "ftl.device"             /* where the backbone ran (ftl_device.description) */
#define FTL_META_CONV_ALGORITHM   "ftl.conv_algorithm"     /* auto or direct */
#define FTL_META_SOURCE_FINGERPRINT "ftl.source_fingerprint"
#define FTL_META_SOURCE_IMAGE_SIZE  "ftl.source_image_size"
#define FTL_COLUMN_FEATURES "features"

#define FTL_COLUMN_LABEL "label"
#define FTL_COLUMN_IMAGE "image"
#define FTL_COLUMN_PATH  "path"
#define FTL_COLUMN_IMAGE_FORMAT "image_format"  /* version 2: "rgb", "jpeg" or "png" */
#define FTL_IMAGE_FORMAT_PIXELS "rgb"

#endif
