/* ftl public API: image decoding and the article's thumbnail recipe. Filled in by src/image/. */
#ifndef FTL_IMAGE_H
#define FTL_IMAGE_H
#include "ftl/base.h"
#endif
