/* The kernels' fatbins (kernels.cu for the backbone, head_kernels.cu for the head, each compiled
 * for every architecture of the build), embedded so the binary needs no file beside it;
 * FTL_CUDA_FATBIN and FTL_CUDA_HEAD_FATBIN are their paths at build time. */
    .section .rodata
    .global ftl_cuda_fatbin
    .type ftl_cuda_fatbin, @object
    .balign 64
ftl_cuda_fatbin:
    .incbin FTL_CUDA_FATBIN
    .byte 0
    .global ftl_cuda_head_fatbin
    .type ftl_cuda_head_fatbin, @object
    .balign 64
ftl_cuda_head_fatbin:
    .incbin FTL_CUDA_HEAD_FATBIN
    .byte 0
    .section .note.GNU-stack,"",@progbits
