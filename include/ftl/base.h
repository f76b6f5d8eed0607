/* ftl public API: version, status codes, error messages, logging. */
#ifndef FTL_BASE_H
#define FTL_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTL_VERSION "0.1.0"

typedef enum ftl_status {
    FTL_OK = 0,
    FTL_E_INVALID_ARG,  /* a bad option or argument from the caller */
    FTL_E_NOT_FOUND,    /* a missing file, column, tensor or class */
    FTL_E_EXISTS,       /* an output exists and overwriting was not asked for */
    FTL_E_IO,           /* a read or write failed (disk full, permissions) */
    FTL_E_FORMAT,       /* malformed input: corrupt or truncated file */
    FTL_E_UNSUPPORTED,  /* well-formed input that ftl does not handle */
    FTL_E_NOMEM,
    FTL_E_INTERRUPTED,  /* stopped by a signal */
    FTL_E_INTERNAL,
} ftl_status;

/* The message of the last failure on this thread ("" when none). */
const char *ftl_last_error(void);
const char *ftl_status_name(ftl_status status);
/* Process exit code for a status: 0 ok, 2 bad arguments or missing/existing inputs, 1 otherwise. */
int ftl_status_exit_code(ftl_status status);

/* The length (1-4) of the well-formed UTF-8 character starting at s, 0 when the bytes there are not
 * one (a stray continuation byte, an overlong or surrogate form, a truncated sequence): writers of
 * JSON and HTML replace such bytes with U+FFFD, since file names need not be UTF-8. */
int ftl_utf8_char_length(const char *s);

/* A named float32 tensor replacing a backbone initializer (a fine-tuned tensor: ftl_model_options,
 * MODEL.ftl): `name` as in the ONNX file, `count` values in its ONNX layout. */
typedef struct ftl_tensor_override {
    const char *name;
    const float *data;
    int64_t count;
} ftl_tensor_override;

typedef enum ftl_log_level {
    FTL_LOG_ERROR = 0,
    FTL_LOG_WARN,
    FTL_LOG_INFO,
    FTL_LOG_DEBUG,
} ftl_log_level;

void ftl_log_set_level(ftl_log_level level);
/* Under data parallelism only rank 0 prints info lines; warnings and errors carry the rank. */
void ftl_log_set_rank(int rank, int world_size);
/* Where ftl's messages go instead of stderr and stdout (a notebook shows neither): every warning,
 * info and progress text, and the result lines the CLI prints on stdout (output: the trainer's epoch
 * lines). text is as it would be written: a line ending in a newline, or a progress bar's redraw
 * starting with '\r' (redraw_progress: bars redraw in place; else a line every 10 s). It may be called
 * from any of ftl's threads, one call at a time per line. NULL: back to stderr and stdout. */
typedef void (*ftl_log_sink)(void *ctx, ftl_log_level level, bool output, const char *text);
void ftl_log_set_sink(ftl_log_sink sink, void *ctx, bool redraw_progress);

/* On SIGINT/SIGTERM, delete the temporary files ftl is writing, then exit with 128+signal,
 * so an interrupted command never leaves a half-written output behind. */
void ftl_install_interrupt_cleanup(void);
/* Cooperative cancellation for programs that host ftl (the Python package): after ftl_interrupt()
 * (async-signal-safe: call it from a SIGINT handler) running work stops at its next batch and returns
 * FTL_E_INTERRUPTED ("interrupted"), its partial outputs removed. The flag stays set until cleared. */
void ftl_interrupt(void);
void ftl_interrupt_clear(void);
bool ftl_interrupt_requested(void);

/* Writes a whole file as ftl writes every output: under a temporary name (locked while it is written,
 * removed if ftl is interrupted, swept by the next ftl command there if ftl is killed), fsynced, then
 * renamed. Without `overwrite` a file that appeared at `path` meanwhile (another run's) is never
 * replaced: FTL_E_EXISTS, this file kept beside it under the name the error gives. */
ftl_status ftl_output_write(const char *path, const void *data, size_t size, bool overwrite);

/* Number of CPU cores this process may use (sched affinity), at least 1. */
int ftl_cpu_count(void);

#ifdef __cplusplus
}
#endif
#endif
