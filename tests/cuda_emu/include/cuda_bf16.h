/* The emulated device's bf16 type: the few conversions ftl's kernels use, on the host. */
#ifndef FTL_EMU_CUDA_BF16_H
#define FTL_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 b) {
    uint32_t u = (uint32_t)b.bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) b.bits = (uint16_t)((u >> 16) | 0x40);
    else b.bits = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return b;
}

#endif
