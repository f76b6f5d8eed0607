/* The kernels' fatbin (kernels.cu compiled for every architecture of the build), embedded so the
 * binary needs no file beside it; FTL_CUDA_FATBIN is its path at build time. */
    .section .rodata
    .global ftl_cuda_fatbin
    .type ftl_cuda_fatbin, @object
    .balign 64
ftl_cuda_fatbin:
    .incbin FTL_CUDA_FATBIN
    .byte 0
    .section .note.GNU-stack,"",@progbits
