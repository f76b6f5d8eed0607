/* The emulated device's cuDNN: descriptors and a reference direct convolution (NHWC tensors with
 * KRSC filters, or NCHW with KCRS; groups, dilation, symmetric pads), fp32 or bf16 storage with
 * fp32 sums, plus the fused bias + residual + ReLU call. What it checks: the formats ftl's backend
 * sets, the output size and that every buffer lies inside an allocation (see emu_driver.c).
 * FTL_EMU_NO_NHWC=1 makes it a cuDNN with no algorithm for NHWC convolutions. */
#include <cudnn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int emu_valid_range(const void *p, size_t bytes);
int emu_capturing(void);
void emu_record(void (*run)(void *arg), void *arg);

/* A convolution call kept for a graph launch (stream capture): its arguments, scalars by value. */
typedef struct conv_call {
    bool fused;
    float alpha, beta;
    cudnnTensorDescriptor_t xd, yd, zd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t algo;
    const void *x, *w, *z, *bias;
    void *ws, *y;
    size_t ws_bytes;
} conv_call;
static void replay_conv(void *arg);

struct cudnnContext { int unused; };
struct cudnnTensorStruct { cudnnTensorFormat_t format; cudnnDataType_t type; int n, c, h, w; int set; };
struct cudnnFilterStruct { cudnnTensorFormat_t format; cudnnDataType_t type; int k, c, r, s; int set; };
struct cudnnConvolutionStruct { int ph, pw, sh, sw, dh, dw, groups; int set; cudnnMathType_t math; };
struct cudnnActivationStruct { cudnnActivationMode_t mode; };

size_t cudnnGetVersion(void) { return 91900; }
const char *cudnnGetErrorString(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS ? "success" : "emulated cuDNN error"; }
cudnnStatus_t cudnnCreate(cudnnHandle_t *h) { *h = calloc(1, sizeof **h); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { free(h); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) { (void)h; (void)s; return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) { *d = calloc(1, sizeof **d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c,
                                         int h, int w) {
    if (n < 1 || c < 1 || h < 1 || w < 1 || (f != CUDNN_TENSOR_NHWC && f != CUDNN_TENSOR_NCHW)) return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnTensorStruct){f, t, n, c, h, w, 1};
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb, const int *dims,
                                         const int *strides) {
    (void)d; (void)t; (void)nb; (void)dims; (void)strides;
    return CUDNN_STATUS_NOT_SUPPORTED; /* ftl sets 4-D NHWC descriptors only */
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) { *d = calloc(1, sizeof **d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c,
                                         int r, int s) {
    if (k < 1 || c < 1 || r < 1 || s < 1 || (f != CUDNN_TENSOR_NHWC && f != CUDNN_TENSOR_NCHW)) return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnFilterStruct){f, t, k, c, r, s, 1};
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    *d = calloc(1, sizeof **d);
    (*d)->groups = 1;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int sh, int sw, int dh,
                                              int dw, cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
    if (ph < 0 || pw < 0 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || mode != CUDNN_CROSS_CORRELATION ||
        compute != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_BAD_PARAM;
    d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw, d->dh = dh, d->dw = dw, d->set = 1;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
    if (groups < 1) return CUDNN_STATUS_BAD_PARAM;
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
    if (m != CUDNN_FMA_MATH && m != CUDNN_TENSOR_OP_MATH && m != CUDNN_DEFAULT_MATH) return CUDNN_STATUS_BAD_PARAM;
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

static int out_size(int in, int pad, int k, int stride, int dil) { return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1; }

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n, int *k, int *h, int *wo) {
    if (!c->set || !x->set || !w->set || x->c != w->c * c->groups || w->k % c->groups) return CUDNN_STATUS_BAD_PARAM;
    *n = x->n, *k = w->k;
    *h = out_size(x->h, c->ph, w->r, c->sh, c->dh);
    *wo = out_size(x->w, c->pw, w->s, c->sw, c->dw);
    return CUDNN_STATUS_SUCCESS;
}

static size_t elem(cudnnDataType_t t) { return t == CUDNN_DATA_BFLOAT16 ? 2 : 4; }

static float get(const void *p, cudnnDataType_t t, size_t i) {
    if (t == CUDNN_DATA_BFLOAT16) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)p)[i];
}

static void put(void *p, cudnnDataType_t t, size_t i, float v) {
    if (t == CUDNN_DATA_BFLOAT16) {
        uint32_t u;
        memcpy(&u, &v, 4);
        ((uint16_t *)p)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
        ((float *)p)[i] = v;
    }
}

/* out[i] = f(conv value i, i) for every output element, NHWC order. */
static cudnnStatus_t convolve(const cudnnTensorDescriptor_t xd, const void *x, const cudnnFilterDescriptor_t wd,
                              const void *w, const cudnnConvolutionDescriptor_t cd, const cudnnTensorDescriptor_t yd,
                              void *y, float *out) {
    int n, k, oh, ow;
    if (cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &k, &oh, &ow) != CUDNN_STATUS_SUCCESS)
        return CUDNN_STATUS_BAD_PARAM;
    if (!yd->set || yd->n != n || yd->c != k || yd->h != oh || yd->w != ow || xd->type != wd->type || xd->type != yd->type)
        return CUDNN_STATUS_BAD_PARAM;
    size_t xn = (size_t)xd->n * xd->h * xd->w * xd->c, wn = (size_t)wd->k * wd->r * wd->s * wd->c,
           yn = (size_t)n * oh * ow * k;
    if (!emu_valid_range(x, xn * elem(xd->type)) || !emu_valid_range(w, wn * elem(wd->type)) ||
        !emu_valid_range(y, yn * elem(yd->type))) {
        fprintf(stderr, "emulated cuDNN: a convolution buffer lies outside its allocation\n");
        return CUDNN_STATUS_BAD_PARAM;
    }
    /* fp32 copies of both operands, so the inner product over channels is a plain loop */
    float *xf = malloc(xn * sizeof *xf + 4), *wf = malloc(wn * sizeof *wf + 4);
    for (size_t i = 0; i < xn; i++) xf[i] = get(x, xd->type, i);
    for (size_t i = 0; i < wn; i++) wf[i] = get(w, wd->type, i);
    if (xd->format != yd->format || xd->format != wd->format) return CUDNN_STATUS_BAD_PARAM;
    bool nhwc = xd->format == CUDNN_TENSOR_NHWC;
    int cg = wd->c, kg = k / cd->groups;
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int o = 0; o < k; o++) {
                    int g = o / kg;
                    float acc = 0;
                    for (int r = 0; r < wd->r; r++) {
                        int iy = oy * cd->sh - cd->ph + r * cd->dh;
                        if (iy < 0 || iy >= xd->h) continue;
                        for (int s = 0; s < wd->s; s++) {
                            int ix = ox * cd->sw - cd->pw + s * cd->dw;
                            if (ix < 0 || ix >= xd->w) continue;
                            if (nhwc) {
                                const float *xp = xf + (((size_t)b * xd->h + iy) * xd->w + ix) * xd->c + (size_t)g * cg;
                                const float *wp = wf + (((size_t)o * wd->r + r) * wd->s + s) * wd->c;
                                for (int c = 0; c < cg; c++) acc += xp[c] * wp[c];
                            } else {
                                size_t plane = (size_t)xd->h * xd->w, wplane = (size_t)wd->r * wd->s;
                                const float *xp = xf + ((size_t)b * xd->c + (size_t)g * cg) * plane + (size_t)iy * xd->w + ix;
                                const float *wp = wf + (size_t)o * cg * wplane + (size_t)r * wd->s + s;
                                for (int c = 0; c < cg; c++) acc += xp[c * plane] * wp[c * wplane];
                            }
                        }
                    }
                    out[nhwc ? (((size_t)b * oh + oy) * ow + ox) * k + o : (((size_t)b * k + o) * oh + oy) * ow + ox] = acc;
                }
    free(xf);
    free(wf);
    return CUDNN_STATUS_SUCCESS;
}

static size_t count_of(const cudnnTensorDescriptor_t d) { return (size_t)d->n * d->c * d->h * d->w; }

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t xd, const void *x,
                                                     const cudnnFilterDescriptor_t wd, const void *w,
                                                     const cudnnConvolutionDescriptor_t cd,
                                                     const cudnnTensorDescriptor_t yd, void *y, const int requested,
                                                     int *returned, cudnnConvolutionFwdAlgoPerf_t *perf, void *ws,
                                                     size_t ws_bytes) {
    (void)h; (void)x; (void)w; (void)y; (void)ws; (void)ws_bytes;
    int n, k, oh, ow;
    if (requested < 1 || cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &k, &oh, &ow) != CUDNN_STATUS_SUCCESS ||
        yd->n != n || yd->c != k || yd->h != oh || yd->w != ow)
        return CUDNN_STATUS_BAD_PARAM;
    /* Like cuDNN, rows for the descriptor's math type and for DEFAULT_MATH, fastest first: a
     * DEFAULT_MATH one (TF32 on a real GPU, so fp32 must pass it by), a non-deterministic one, then a
     * deterministic one (--deterministic's choice). */
    memset(perf, 0, sizeof *perf * 3);
    perf[0] = (cudnnConvolutionFwdAlgoPerf_t){.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, .status = CUDNN_STATUS_SUCCESS,
                                              .time = 0.5f, .memory = 0, .determinism = CUDNN_DETERMINISTIC,
                                              .mathType = CUDNN_DEFAULT_MATH};
    perf[1] = (cudnnConvolutionFwdAlgoPerf_t){.algo = CUDNN_CONVOLUTION_FWD_ALGO_FFT, .status = CUDNN_STATUS_SUCCESS,
                                              .time = 1.0f, .memory = 4096, .determinism = CUDNN_NON_DETERMINISTIC,
                                              .mathType = cd->math};
    perf[2] = (cudnnConvolutionFwdAlgoPerf_t){.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                              .status = CUDNN_STATUS_SUCCESS, .time = 2.0f, .memory = 0,
                                              .determinism = CUDNN_DETERMINISTIC, .mathType = cd->math};
    *returned = requested < 3 ? requested : 3;
    const char *no_nhwc = getenv("FTL_EMU_NO_NHWC");
    if (no_nhwc && strcmp(no_nhwc, "1") == 0 && xd->format == CUDNN_TENSOR_NHWC)
        perf[0].status = perf[1].status = perf[2].status = CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, void *ws,
                                      size_t ws_bytes, const void *beta, const cudnnTensorDescriptor_t yd, void *y) {
    (void)h;
    if (ws_bytes && !emu_valid_range(ws, ws_bytes)) return CUDNN_STATUS_BAD_PARAM;
    if (emu_capturing()) {
        conv_call *c = malloc(sizeof *c);
        *c = (conv_call){.alpha = *(const float *)alpha, .beta = *(const float *)beta, .xd = xd, .yd = yd, .wd = wd,
                         .cd = cd, .algo = algo, .x = x, .w = w, .ws = ws, .y = y, .ws_bytes = ws_bytes};
        emu_record(replay_conv, c);
        return CUDNN_STATUS_SUCCESS;
    }
    float *acc = malloc(count_of(yd) * sizeof *acc + 4);
    cudnnStatus_t s = convolve(xd, x, wd, w, cd, yd, y, acc);
    float a = *(const float *)alpha, b = *(const float *)beta;
    for (size_t i = 0; s == CUDNN_STATUS_SUCCESS && i < count_of(yd); i++)
        put(y, yd->type, i, a * acc[i] + (b != 0 ? b * get(y, yd->type, i) : 0.0f));
    free(acc);
    return s;
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void *alpha1, const cudnnTensorDescriptor_t xd, const void *x, const cudnnFilterDescriptor_t wd,
    const void *w, const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes,
    const void *alpha2, const cudnnTensorDescriptor_t zd, const void *z, const cudnnTensorDescriptor_t bd,
    const void *bias, const cudnnActivationDescriptor_t ad, const cudnnTensorDescriptor_t yd, void *y) {
    (void)h;
    if (ws_bytes && !emu_valid_range(ws, ws_bytes)) return CUDNN_STATUS_BAD_PARAM;
    if (emu_capturing()) {
        conv_call *c = malloc(sizeof *c);
        *c = (conv_call){.fused = true, .alpha = *(const float *)alpha1, .beta = *(const float *)alpha2, .xd = xd, .yd = yd,
                         .zd = zd, .bd = bd, .wd = wd, .cd = cd, .ad = ad, .algo = algo, .x = x, .w = w, .z = z,
                         .bias = bias, .ws = ws, .y = y, .ws_bytes = ws_bytes};
        emu_record(replay_conv, c);
        return CUDNN_STATUS_SUCCESS;
    }
    if (!bd->set || bd->n != 1 || bd->c != yd->c || bd->h != 1 || bd->w != 1 || bd->type != CUDNN_DATA_FLOAT ||
        bd->format != yd->format ||
        zd != yd || !emu_valid_range(bias, (size_t)bd->c * 4) || !emu_valid_range(z, count_of(yd) * elem(yd->type)))
        return CUDNN_STATUS_BAD_PARAM;
    float *acc = malloc(count_of(yd) * sizeof *acc + 4);
    cudnnStatus_t s = convolve(xd, x, wd, w, cd, yd, y, acc);
    float a1 = *(const float *)alpha1, a2 = *(const float *)alpha2;
    for (size_t i = 0; s == CUDNN_STATUS_SUCCESS && i < count_of(yd); i++) {
        size_t channel = yd->format == CUDNN_TENSOR_NHWC ? i % (size_t)yd->c : i / ((size_t)yd->h * yd->w) % (size_t)yd->c;
        float v = a1 * acc[i] + (a2 != 0 ? a2 * get(z, zd->type, i) : 0.0f) + ((const float *)bias)[channel];
        if (ad->mode == CUDNN_ACTIVATION_RELU) v = v > 0 ? v : 0;
        put(y, yd->type, i, v);
    }
    free(acc);
    return s;
}

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *d) { *d = calloc(1, sizeof **d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) { free(d); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t m, cudnnNanPropagation_t p,
                                           double coef) {
    (void)p; (void)coef;
    if (m != CUDNN_ACTIVATION_RELU && m != CUDNN_ACTIVATION_IDENTITY) return CUDNN_STATUS_NOT_SUPPORTED;
    d->mode = m;
    return CUDNN_STATUS_SUCCESS;
}

static void replay_conv(void *arg) {
    conv_call *c = arg;
    if (c->fused)
        cudnnConvolutionBiasActivationForward(NULL, &c->alpha, c->xd, c->x, c->wd, c->w, c->cd, c->algo, c->ws, c->ws_bytes,
                                              &c->beta, c->zd, c->z, c->bd, c->bias, c->ad, c->yd, c->y);
    else
        cudnnConvolutionForward(NULL, &c->alpha, c->xd, c->x, c->wd, c->w, c->cd, c->algo, c->ws, c->ws_bytes, &c->beta,
                                c->yd, c->y);
}
