/* placeholder */
#include "image/image_internal.h"
#if defined(__x86_64__) || defined(__i386__)
const ftl_resample_kernels ftl_resample_kernels_avx2 = {"avx2", ftl_hpass_scalar, ftl_vpass_scalar, 0};
const ftl_resample_kernels ftl_resample_kernels_avx512 = {"avx512", ftl_hpass_scalar, ftl_vpass_scalar, 0};
#endif
