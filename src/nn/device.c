/* Device selection: the CPU, or a CUDA GPU when the build and the machine have one. */
#include "ftl/device.h"
#include "nn/backend.h"
#include "nn/cuda_backend.h"
#include "nn/device_caps.h"
#include "util/error.h"

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ftl_status ftl_device_parse(const char *text, ftl_device_kind *kind) {
    if (strcmp(text, "auto") == 0) *kind = FTL_DEVICE_AUTO;
    else if (strcmp(text, "cpu") == 0) *kind = FTL_DEVICE_CPU;
    else if (strcmp(text, "cuda") == 0 || strcmp(text, "gpu") == 0) *kind = FTL_DEVICE_CUDA;
    else return ftl_fail(FTL_E_INVALID_ARG, "--device '%s': expected cpu, cuda or auto", text);
    return FTL_OK;
}

const char *ftl_device_kind_name(ftl_device_kind kind) {
    return kind == FTL_DEVICE_CPU ? "cpu" : kind == FTL_DEVICE_CUDA ? "cuda" : "auto";
}

bool ftl_device_cuda_built(void) { return nn_cuda_built(); }

const nn_device_caps *nn_device_caps_of(ftl_device_kind kind) {
    static const nn_device_caps cpu = {.name = "cpu", .gpu = false, .int8 = true, .tf32 = false};
    static const nn_device_caps cuda = {.name = "cuda", .gpu = true, .int8 = false, .tf32 = true};
    return kind == FTL_DEVICE_CUDA ? &cuda : &cpu;
}

static void cpu_model_name(char *out, size_t size) {
    snprintf(out, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, size, "%s", colon);
        break;
    }
    fclose(f);
}

/* The launcher's rank on this host (Open MPI, MPICH/Intel MPI, Slurm, torchrun), or 0. */
static int launcher_local_rank(void) {
    const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v >= '0' && *v <= '9') return atoi(v);
    }
    return 0;
}

static void select_cpu(ftl_device *d) {
    d->kind = FTL_DEVICE_CPU;
    cpu_model_name(d->name, sizeof d->name);
    const dnnl_version_t *v = dnnl_version();
    snprintf(d->versions, sizeof d->versions, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    snprintf(d->description, sizeof d->description, "cpu: %s (%s, %s)", d->name, d->versions, nn_cpu_isa_name());
}

void ftl_backends_describe(ftl_backends *b) {
    memset(b, 0, sizeof *b);
    ftl_device cpu;
    select_cpu(&cpu);
    snprintf(b->cpu, sizeof b->cpu, "%s (%s on this CPU: %s)", cpu.versions, nn_cpu_isa_name(), cpu.name);
    b->cuda_built = nn_cuda_built();
    if (!b->cuda_built) {
        snprintf(b->cuda_runtime, sizeof b->cuda_runtime, "built without CUDA (no nvcc at build time, or make CUDA=0)");
        return;
    }
    const char *archs = nn_cuda_archs();
    size_t at = 0;
    for (const char *p = archs; p && *p && at + 16 < sizeof b->cuda_archs;) {
        while (*p == ' ') p++;
        int n = 0;
        while (p[n] && p[n] != ' ') n++;
        if (n) at += (size_t)snprintf(b->cuda_archs + at, sizeof b->cuda_archs - at, "%ssm_%.*s", at ? ", " : "", n, p);
        p += n;
    }
    if (at + 24 < sizeof b->cuda_archs) snprintf(b->cuda_archs + at, sizeof b->cuda_archs - at, " and PTX for newer GPUs");
    ftl_device gpu;
    if (nn_cuda_probe(0, &gpu) == FTL_OK) {
        b->cuda_found = true;
        snprintf(b->cuda_runtime, sizeof b->cuda_runtime, "%s (sm_%d), %s", gpu.name, gpu.sm, gpu.versions);
    } else {
        const char *why = ftl_last_error();
        if (strncmp(why, "--device cuda: ", 15) == 0) why += 15;
        snprintf(b->cuda_runtime, sizeof b->cuda_runtime, "%s", why);
    }
}

ftl_status ftl_device_select(ftl_device_kind want, int index, ftl_device *d) {
    memset(d, 0, sizeof *d);
    d->ordinal = -1;
    if (want != FTL_DEVICE_AUTO && want != FTL_DEVICE_CPU && want != FTL_DEVICE_CUDA)
        return ftl_fail(FTL_E_INVALID_ARG, "unknown device kind %d", (int)want);
    if (want == FTL_DEVICE_CPU) {
        select_cpu(d);
        return FTL_OK;
    }
    if (index < -1) return ftl_fail(FTL_E_INVALID_ARG, "GPU index %d: must be >= 0 (-1: the local rank)", index);
    ftl_status st = nn_cuda_probe(index >= 0 ? index : launcher_local_rank(), d);
    if (st == FTL_OK || want == FTL_DEVICE_CUDA) return st;
    char why[sizeof d->fallback];
    snprintf(why, sizeof why, "%s", ftl_last_error());
    memset(d, 0, sizeof *d);
    select_cpu(d);
    snprintf(d->fallback, sizeof d->fallback, "%s", why);
    ftl_clear_error();
    return FTL_OK;
}

ftl_status ftl_device_head_engine_create(const ftl_device *device, int64_t dim, int64_t classes, size_t max_rows,
                                         int optimizer_slots, const ftl_collectives *collectives, ftl_head_engine **engine) {
    *engine = NULL;
    if (!device || device->kind != FTL_DEVICE_CUDA)
        return ftl_fail(FTL_E_INVALID_ARG, "a head engine needs a GPU device (the CPU head is ftl_head_*)");
    return nn_cuda_head_engine_create(device, dim, classes, max_rows, optimizer_slots, collectives, engine);
}

void ftl_head_engine_free(ftl_head_engine *engine) {
    if (engine && engine->destroy) engine->destroy(engine->ctx);
}
