/* A region of a file compiled for a wider instruction set than the rest (the functions in it run only
 * where the CPU has that set): GCC's target pragmas, or for clang (the fuzz build) its equivalent, which
 * ignores GCC's. Usage: FTL_TARGET_BEGIN("avx512f,avx512bw") ... FTL_TARGET_END */
#ifndef FTL_NN_CPU_KERNELS_TARGET_REGION_H
#define FTL_NN_CPU_KERNELS_TARGET_REGION_H

#define FTL_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define FTL_TARGET_BEGIN(isa) FTL_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define FTL_TARGET_END FTL_PRAGMA(clang attribute pop)
#else
#define FTL_TARGET_BEGIN(isa) FTL_PRAGMA(GCC push_options) FTL_PRAGMA(GCC target(isa))
#define FTL_TARGET_END FTL_PRAGMA(GCC pop_options)
#endif

#endif
