/* ftl._ftl: the C extension under `import ftl`, over the public API (include/ftl). It takes images
 * through the buffer protocol (C-contiguous uint8 [N, S, S, 3]) and returns float32 results as
 * bytearrays the Python layer views as NumPy arrays without a copy; ftl's work runs with the GIL
 * released. The Python layer (ftl/__init__.py) checks shapes and types and names what it expected. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ftl.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static PyObject *ftl_error; /* ftl.Error, a RuntimeError */

/* ---------------------------------------------------------------- Ctrl-C */

/* While ftl computes (the GIL released, Python's own handler cannot run), SIGINT asks ftl to stop at
 * its next batch; the call then raises KeyboardInterrupt. Only the main thread installs it (catch). */
static struct sigaction python_sigint;
static volatile sig_atomic_t sigint_seen;
static bool sigint_installed;

static void on_sigint(int sig) {
    (void)sig;
    sigint_seen = 1;
    ftl_interrupt();
}

static void interrupt_guard_begin(int catch) {
    sigint_seen = 0;
    ftl_interrupt_clear();
    if (!catch || sigint_installed) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigint_installed = sigaction(SIGINT, &sa, &python_sigint) == 0;
}

static void interrupt_guard_end(void) {
    if (sigint_installed) sigaction(SIGINT, &python_sigint, NULL);
    sigint_installed = false;
    ftl_interrupt_clear();
}

/* The Python exception for a failed call: KeyboardInterrupt after Ctrl-C, ValueError for a bad
 * option or argument, ftl.Error otherwise, with the library's message. */
static PyObject *raise_ftl(ftl_status st) {
    if (st == FTL_E_INTERRUPTED && sigint_seen) {
        PyErr_SetNone(PyExc_KeyboardInterrupt);
        return NULL;
    }
    if (st == FTL_E_INVALID_ARG) {
        PyErr_SetString(PyExc_ValueError, ftl_last_error());
        return NULL;
    }
    PyErr_Format(ftl_error, "%s (%s)", ftl_last_error(), ftl_status_name(st));
    return NULL;
}

/* ---------------------------------------------------------------- log sink */

static PyObject *log_callable; /* (level, output, text) -> None */

static void python_log_sink(void *ctx, ftl_log_level level, bool output, const char *text) {
    (void)ctx;
    PyGILState_STATE gil = PyGILState_Ensure();
    if (log_callable) {
        PyObject *t = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
        PyObject *r = t ? PyObject_CallFunction(log_callable, "iOO", (int)level, output ? Py_True : Py_False, t) : NULL;
        if (!r) PyErr_WriteUnraisable(log_callable);
        Py_XDECREF(r);
        Py_XDECREF(t);
    }
    PyGILState_Release(gil);
}

static PyObject *set_log_sink(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fn;
    int redraw = 0;
    if (!PyArg_ParseTuple(args, "O|p", &fn, &redraw)) return NULL;
    if (fn == Py_None) {
        ftl_log_set_sink(NULL, NULL, false);
        Py_CLEAR(log_callable);
    } else {
        Py_INCREF(fn);
        Py_XSETREF(log_callable, fn);
        ftl_log_set_sink(python_log_sink, NULL, redraw != 0);
    }
    Py_RETURN_NONE;
}

static PyObject *set_log_level(PyObject *self, PyObject *args) {
    (void)self;
    int level;
    if (!PyArg_ParseTuple(args, "i", &level)) return NULL;
    ftl_log_set_level((ftl_log_level)level);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- argument vectors */

/* argv from a list of str (pointers into the list's strings: keep the list alive). */
static char **argv_of(PyObject *list, int *argc) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    char **argv = calloc((size_t)n + 1, sizeof *argv);
    if (!argv) return (char **)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *a = PyUnicode_Check(PyList_GET_ITEM(list, i)) ? PyUnicode_AsUTF8(PyList_GET_ITEM(list, i)) : NULL;
        if (!a) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "arguments must be str");
            free(argv);
            return NULL;
        }
        argv[i] = (char *)a;
    }
    *argc = (int)n;
    return argv;
}

static const char *arg_kind_name(ftl_arg_kind kind) {
    switch (kind) {
    case FTL_ARG_BOOL: return "bool";
    case FTL_ARG_INT:
    case FTL_ARG_INT64: return "int";
    case FTL_ARG_DOUBLE: return "float";
    case FTL_ARG_BYTES: return "bytes";
    case FTL_ARG_LIST: return "list";
    case FTL_ARG_STRING: break;
    }
    return "str";
}

static PyObject *train_options(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    int n;
    const ftl_arg *table = ftl_train_arg_table(&n);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *item = Py_BuildValue("(ssss)", table[i].name, arg_kind_name(table[i].kind),
                                       table[i].value_name ? table[i].value_name : "", table[i].help ? table[i].help : "");
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* ---------------------------------------------------------------- train */

typedef struct {
    PyObject *callback;   /* on_epoch_end(epoch, logs) or None; a true result stops training */
    PyObject *epochs;     /* list of each epoch's logs */
    bool validated;
    PyObject *error_type, *error_value, *error_traceback; /* what the callback raised */
} train_hook;

static PyObject *epoch_logs(const ftl_epoch_log *l, bool validated) {
    PyObject *d = Py_BuildValue("{s:L,s:d,s:d,s:d,s:d,s:d,s:O,s:L}", "epoch", (long long)l->epoch, "loss", l->loss,
                                "acc", l->acc, "lr", l->lr, "seconds", l->seconds, "images_per_second",
                                l->images_per_second, "improved", l->improved ? Py_True : Py_False, "best_epoch",
                                (long long)l->best_epoch);
    if (d && validated) {
        PyObject *vl = PyFloat_FromDouble(l->val_loss), *va = PyFloat_FromDouble(l->val_acc);
        if (!vl || !va || PyDict_SetItemString(d, "val_loss", vl) < 0 || PyDict_SetItemString(d, "val_acc", va) < 0)
            Py_CLEAR(d);
        Py_XDECREF(vl);
        Py_XDECREF(va);
    }
    return d;
}

static ftl_status train_epoch_end(void *ctx, const ftl_epoch_log *log, bool *stop) {
    train_hook *h = ctx;
    ftl_status st = FTL_OK;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *logs = epoch_logs(log, h->validated);
    if (!logs || PyList_Append(h->epochs, logs) < 0) {
        st = FTL_E_NOMEM;
    } else if (h->callback != Py_None) {
        PyObject *copy = PyDict_Copy(logs);
        PyObject *r = copy ? PyObject_CallFunction(h->callback, "LO", (long long)log->epoch, copy) : NULL;
        if (!r) st = FTL_E_INTERRUPTED;
        else if (PyObject_IsTrue(r) == 1) *stop = true;
        Py_XDECREF(r);
        Py_XDECREF(copy);
    }
    if (st != FTL_OK && PyErr_Occurred()) PyErr_Fetch(&h->error_type, &h->error_value, &h->error_traceback);
    Py_XDECREF(logs);
    PyGILState_Release(gil);
    return st;
}

static PyObject *fit_result(const ftl_fit_result *r) {
    return Py_BuildValue("{s:L,s:L,s:d,s:O,s:O,s:d,s:d,s:d,s:d}", "epochs_run", (long long)r->epochs_run, "best_epoch",
                         (long long)r->best_epoch, "best_value", r->best_value, "stopped_early",
                         r->stopped_early ? Py_True : Py_False, "restored_best", r->restored_best ? Py_True : Py_False,
                         "loss", r->final_loss, "acc", r->final_acc, "val_loss", r->final_val_loss, "val_acc",
                         r->final_val_acc);
}

/* train(argv, on_epoch_end, catch_sigint) -> dict: `ftl train`'s arguments as a list (argv[0] "train"),
 * every check and default of the command line applied by the library. */
static PyObject *train(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list, *callback;
    int catch = 0;
    if (!PyArg_ParseTuple(args, "O!O|p", &PyList_Type, &list, &callback, &catch)) return NULL;
    if (callback != Py_None && !PyCallable_Check(callback)) {
        PyErr_SetString(PyExc_TypeError, "on_epoch_end must be a callable (epoch, logs) or None");
        return NULL;
    }
    int argc = 0;
    char **argv = argv_of(list, &argc);
    if (!argv) return NULL;
    ftl_train_options o;
    ftl_train_args extra;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS /* precision="auto" measures the CPU, and under mpirun agrees with the other ranks */
    st = ftl_train_args_parse(argc, argv, &o, &extra);
    Py_END_ALLOW_THREADS
    if (st == FTL_OK && extra.help_asked) st = FTL_E_INVALID_ARG;
    if (st != FTL_OK) {
        free(argv);
        return raise_ftl(st);
    }
    train_hook hook = {.callback = callback, .epochs = PyList_New(0), .validated = o.val_path != NULL};
    if (!hook.epochs) {
        free(argv);
        return NULL;
    }
    o.fit.on_epoch_end = train_epoch_end;
    o.fit.on_epoch_end_ctx = &hook;
    if (extra.quiet) ftl_log_set_level(FTL_LOG_WARN);
    ftl_train_summary s;
    Py_BEGIN_ALLOW_THREADS
    interrupt_guard_begin(catch);
    st = ftl_train_run(&o, &s);
    interrupt_guard_end();
    Py_END_ALLOW_THREADS
    if (st == FTL_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = ftl_train_write_report(&o, extra.report_path);
        Py_END_ALLOW_THREADS
    }
    if (extra.quiet) ftl_log_set_level(FTL_LOG_INFO);
    free(argv);
    if (hook.error_type) {
        PyErr_Restore(hook.error_type, hook.error_value, hook.error_traceback);
        Py_DECREF(hook.epochs);
        return NULL;
    }
    if (st != FTL_OK) {
        Py_DECREF(hook.epochs);
        return raise_ftl(st);
    }
    PyObject *fit = fit_result(&s.fit), *head = s.fine_tuned ? fit_result(&s.head_phase) : (Py_INCREF(Py_None), Py_None);
    PyObject *r = fit && head ? Py_BuildValue("{s:O,s:O,s:O,s:O,s:L,s:L,s:L,s:L,s:d,s:d,s:O,s:O}", "epochs", hook.epochs,
                                              "fit", fit, "head_phase", head, "fine_tuned", s.fine_tuned ? Py_True : Py_False,
                                              "train_rows", (long long)s.train_rows, "val_rows", (long long)s.val_rows,
                                              "dim", (long long)s.dim, "classes", (long long)s.classes, "seconds",
                                              s.seconds, "features_seconds", s.features_seconds, "features_cached",
                                              s.features_cached ? Py_True : Py_False, "train_cache_reused",
                                              s.train_cache_reused ? Py_True : Py_False)
                              : NULL;
    Py_XDECREF(fit);
    Py_XDECREF(head);
    Py_DECREF(hook.epochs);
    return r;
}

/* ---------------------------------------------------------------- prep, evaluate, export */

static PyObject *prep(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"src", "out", "size", "val_fraction", "seed", "stratify", "codec", "threads", "strict",
                               "overwrite", "verbose", "catch_sigint", "image_col", "label_col", "label_from",
                               "split_col", "val_source", "images_root", "keep_encoded", NULL};
    ftl_prep_options o;
    ftl_prep_options_init(&o);
    unsigned long long seed = o.seed;
    int stratify = o.stratify, strict = 0, overwrite = 0, verbose = 1, catch = 0, keep_encoded = 0;
    double val_fraction = -1;
    const char *codec = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ss|idKpzippppzzzzzzp", keywords, &o.source_dir, &o.output_dir,
                                     &o.image_size, &val_fraction, &seed, &stratify, &codec, &o.threads, &strict,
                                     &overwrite, &verbose, &catch, &o.image_column, &o.label_column, &o.label_from,
                                     &o.split_column, &o.val_source, &o.images_root, &keep_encoded))
        return NULL;
    o.keep_encoded = keep_encoded;
    if (codec) o.codec = codec;
    if (val_fraction >= 0) o.val_fraction = val_fraction, o.split_flags_given = true;
    o.seed = seed;
    o.stratify = stratify;
    o.strict = strict;
    o.overwrite = overwrite;
    o.show_progress = verbose;
    o.collectives = ftl_dist_world();
    ftl_prep_summary sum;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    interrupt_guard_begin(catch);
    st = ftl_prep_run(&o, &sum);
    interrupt_guard_end();
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) return raise_ftl(st);
    PyObject *classes = PyList_New(sum.class_count), *train_counts = PyDict_New(), *val_counts = PyDict_New(),
             *skipped = PyList_New(0);
    for (int i = 0; classes && train_counts && val_counts && i < sum.class_count; i++) {
        PyObject *name = PyUnicode_DecodeUTF8(sum.class_names[i], (Py_ssize_t)strlen(sum.class_names[i]), "replace");
        PyObject *tc = PyLong_FromLongLong(sum.train_counts[i]), *vc = PyLong_FromLongLong(sum.val_counts[i]);
        if (name && tc && vc) {
            PyDict_SetItem(train_counts, name, tc);
            PyDict_SetItem(val_counts, name, vc);
            Py_INCREF(name);
            PyList_SET_ITEM(classes, i, name);
        }
        Py_XDECREF(name);
        Py_XDECREF(tc);
        Py_XDECREF(vc);
    }
    for (int64_t i = 0; skipped && i < sum.skipped_count; i++) {
        PyObject *item = Py_BuildValue("{s:s,s:s}", "path", sum.skipped[i].path, "reason", sum.skipped[i].reason);
        if (item) PyList_Append(skipped, item);
        Py_XDECREF(item);
    }
    PyObject *r = PyErr_Occurred() || !classes || !train_counts || !val_counts || !skipped
                      ? NULL
                      : Py_BuildValue("{s:O,s:O,s:O,s:L,s:L,s:O,s:s,s:d,s:i,s:L}", "classes", classes, "train_counts",
                                      train_counts, "val_counts", val_counts, "train_rows", (long long)sum.train_rows,
                                      "val_rows", (long long)sum.val_rows, "skipped", skipped, "split_method",
                                      sum.split_method ? sum.split_method : "", "seconds", sum.seconds, "threads",
                                      sum.threads, "encoded_rows", (long long)sum.encoded_rows);
    Py_XDECREF(classes);
    Py_XDECREF(train_counts);
    Py_XDECREF(val_counts);
    Py_XDECREF(skipped);
    ftl_prep_summary_free(&sum);
    return r;
}

static PyObject *evaluate(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"model", "data", "backbone", "cache_dir", "batch", "threads", "verbose", "catch_sigint",
                               "tta", NULL};
    ftl_eval_options o;
    ftl_eval_options_init(&o);
    int verbose = 1, catch = 0, batch = 0;
    const char *tta = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ss|zziippz", keywords, &o.model_path, &o.data_path, &o.backbone_path,
                                     &o.cache_dir, &batch, &o.threads, &verbose, &catch, &tta))
        return NULL;
    if (tta && ftl_tta_parse(tta, true, &o.tta) != FTL_OK) return raise_ftl(FTL_E_INVALID_ARG);
    if (batch > 0) o.batch = batch;
    o.device = FTL_DEVICE_CPU;
    o.show_progress = verbose;
    o.collectives = ftl_dist_world();
    ftl_eval_result r;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    interrupt_guard_begin(catch);
    st = ftl_eval_run(&o, &r);
    interrupt_guard_end();
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) return raise_ftl(st);
    char *json = ftl_eval_result_json(&r);
    ftl_eval_result_free(&r);
    PyObject *text = PyUnicode_DecodeUTF8(json, (Py_ssize_t)strlen(json), "replace");
    free(json);
    return text;
}

static PyObject *export_onnx(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"model", "out", "backbone", "opset", "logits", "input", "overwrite", "tta", NULL};
    ftl_export_options o;
    ftl_export_options_init(&o);
    const char *input = "uint8-nhwc", *tta = NULL;
    int logits = 0, overwrite = 0, opset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ss|zipspz", keywords, &o.model_path, &o.output_path, &o.backbone_path,
                                     &opset, &logits, &input, &overwrite, &tta))
        return NULL;
    if (tta && ftl_tta_parse(tta, true, &o.tta) != FTL_OK) return raise_ftl(FTL_E_INVALID_ARG);
    if (opset > 0) o.opset = opset;
    o.logits = logits;
    o.overwrite = overwrite;
    ftl_status st = ftl_export_input_parse(input, &o.input);
    ftl_export_result r;
    if (st == FTL_OK) {
        Py_BEGIN_ALLOW_THREADS
        st = ftl_export_onnx(&o, &r);
        Py_END_ALLOW_THREADS
    }
    if (st != FTL_OK) return raise_ftl(st);
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:K,s:O}", "opset", r.opset, "classes", r.classes, "image_size", r.image_size,
                         "backbone_nodes", r.backbone_nodes, "bytes", (unsigned long long)(r.model_bytes + r.data_bytes),
                         "tta_flip", r.tta_flip ? Py_True : Py_False);
}

/* A C-contiguous uint8 buffer of N images of H x W x 3 (square when `square`); *view must be
 * released by the caller. */
static int image_batch(PyObject *obj, Py_buffer *view, int *count, int *height, int *width, bool square) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) != 0) return -1;
    const char *fmt = view->format ? view->format : "B";
    if (view->itemsize != 1 || (strcmp(fmt, "B") != 0 && strcmp(fmt, "=B") != 0 && strcmp(fmt, "<B") != 0)) {
        PyErr_Format(PyExc_TypeError, "images must be uint8 (format 'B'), not format '%s'", fmt);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->ndim != 4 || view->shape[3] != 3 || view->shape[1] < 1 || view->shape[2] < 1 ||
        (square && view->shape[1] != view->shape[2]) || view->shape[0] > INT32_MAX || view->shape[1] > 16384 ||
        view->shape[2] > 16384) {
        PyErr_SetString(PyExc_ValueError, square ? "images must have the shape [N, S, S, 3] (N square RGB images)"
                                                 : "images must have the shape [N, H, W, 3] (N RGB images, H and W <= 16384)");
        PyBuffer_Release(view);
        return -1;
    }
    *count = (int)view->shape[0];
    *height = (int)view->shape[1];
    *width = (int)view->shape[2];
    return 0;
}

/* ---------------------------------------------------------------- Backbone */

typedef struct {
    PyObject_HEAD
    ftl_model *model;
    ftl_nn_preprocess preprocess;
} BackboneObject;

/* Freed with the GIL released: a thread of ftl's that is logging (through the Python sink) must be able
 * to finish while ftl joins it. */
static void Backbone_dealloc(BackboneObject *self) {
    ftl_model *m = self->model;
    Py_BEGIN_ALLOW_THREADS
    ftl_model_free(m);
    Py_END_ALLOW_THREADS
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Backbone_init(BackboneObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"path", "features_from", "input_scale", "precision", "threads", "batch", NULL};
    const char *path, *features_from = NULL, *input_scale = "tf", *precision = "fp32";
    int threads = 0, batch = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zssii", keywords, &path, &features_from, &input_scale, &precision,
                                     &threads, &batch))
        return -1;
    ftl_model_options o;
    ftl_model_options_init(&o);
    o.features_from = features_from;
    o.threads = threads;
    if (batch > 0) o.batch = batch;
    ftl_status st = ftl_nn_precision_parse(precision, &o.precision);
    if (st == FTL_OK) st = ftl_nn_preprocess_parse(&self->preprocess, input_scale, NULL, NULL);
    if (st != FTL_OK) {
        PyErr_Format(PyExc_ValueError, "%s", ftl_last_error());
        return -1;
    }
    ftl_model_free(self->model);
    self->model = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = ftl_model_load(path, &o, &self->model);
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) {
        raise_ftl(st);
        return -1;
    }
    return 0;
}

static PyObject *float_rows(int64_t rows, int64_t dim) {
    return PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(rows * dim) * (Py_ssize_t)sizeof(float));
}

/* embed(images, catch_sigint) -> bytearray of N x D float32 */
static PyObject *Backbone_embed(BackboneObject *self, PyObject *args) {
    PyObject *images;
    int catch = 0;
    if (!PyArg_ParseTuple(args, "O|p", &images, &catch)) return NULL;
    Py_buffer view;
    int count, height, width;
    if (image_batch(images, &view, &count, &height, &width, false) != 0) return NULL;
    PyObject *out = float_rows(count, ftl_model_get_info(self->model)->feature_dim);
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    float *features = (float *)PyByteArray_AS_STRING(out);
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    interrupt_guard_begin(catch);
    st = ftl_embed_images(self->model, &self->preprocess, view.buf, count, height, width, features);
    interrupt_guard_end();
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (st != FTL_OK) {
        Py_DECREF(out);
        return raise_ftl(st);
    }
    return out;
}

/* embed_files(paths, size, catch_sigint) -> bytearray of N x D float32 */
static PyObject *Backbone_embed_files(BackboneObject *self, PyObject *args) {
    PyObject *list;
    int size, catch = 0;
    if (!PyArg_ParseTuple(args, "O!i|p", &PyList_Type, &list, &size, &catch)) return NULL;
    int count = 0;
    char **paths = argv_of(list, &count);
    if (!paths) return NULL;
    PyObject *out = float_rows(count, ftl_model_get_info(self->model)->feature_dim);
    ftl_status st = FTL_OK;
    if (out) {
        float *features = (float *)PyByteArray_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        interrupt_guard_begin(catch);
        st = ftl_embed_files(self->model, &self->preprocess, (const char *const *)paths, count, size, features);
        interrupt_guard_end();
        Py_END_ALLOW_THREADS
    }
    free(paths);
    if (out && st != FTL_OK) {
        Py_DECREF(out);
        return raise_ftl(st);
    }
    return out;
}

/* embed_dataset(path, catch_sigint) -> (features bytearray N x D float32, labels bytearray N int32) */
static PyObject *Backbone_embed_dataset(BackboneObject *self, PyObject *args) {
    const char *path;
    int catch = 0;
    if (!PyArg_ParseTuple(args, "s|p", &path, &catch)) return NULL;
    float *features = NULL;
    int32_t *labels = NULL;
    int64_t rows = 0;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    interrupt_guard_begin(catch);
    st = ftl_embed_dataset(self->model, &self->preprocess, path, &features, &labels, &rows);
    interrupt_guard_end();
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) return raise_ftl(st);
    int64_t dim = ftl_model_get_info(self->model)->feature_dim;
    PyObject *r = Py_BuildValue("(y#y#)", (const char *)features, (Py_ssize_t)(rows * dim) * (Py_ssize_t)sizeof(float),
                                (const char *)labels, (Py_ssize_t)rows * (Py_ssize_t)sizeof(int32_t));
    free(features);
    free(labels);
    return r;
}

static PyObject *Backbone_info(BackboneObject *self, PyObject *unused) {
    (void)unused;
    const ftl_model_info *i = ftl_model_get_info(self->model);
    return Py_BuildValue("{s:s,s:s,s:s,s:L,s:i,s:i,s:s,s:s,s:i}", "path", i->path, "sha256", i->sha256, "feature_tensor",
                         i->feature_name, "feature_dim", (long long)i->feature_dim, "input_height", i->height,
                         "input_width", i->width, "precision", ftl_nn_precision_name(i->precision), "backend",
                         i->backend ? i->backend : "", "threads", i->threads);
}

static PyMethodDef Backbone_methods[] = {
    {"embed", (PyCFunction)Backbone_embed, METH_VARARGS, "embed(images, catch_sigint) -> bytearray of N x D float32 features"},
    {"embed_files", (PyCFunction)Backbone_embed_files, METH_VARARGS, "embed_files(paths, size, catch_sigint) -> bytearray"},
    {"embed_dataset", (PyCFunction)Backbone_embed_dataset, METH_VARARGS, "embed_dataset(path, catch_sigint) -> (features, labels)"},
    {"info", (PyCFunction)Backbone_info, METH_NOARGS, "info() -> dict: the model's input, feature tensor and size"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BackboneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ftl._ftl.Backbone",
    .tp_basicsize = sizeof(BackboneObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A frozen backbone (ONNX) that turns images into features.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Backbone_init,
    .tp_dealloc = (destructor)Backbone_dealloc,
    .tp_methods = Backbone_methods,
};

/* ---------------------------------------------------------------- Predictor (a trained MODEL.ftl) */

typedef struct {
    PyObject_HEAD
    ftl_predictor *predictor;
} PredictorObject;

static void Predictor_dealloc(PredictorObject *self) {
    ftl_predictor *p = self->predictor;
    Py_BEGIN_ALLOW_THREADS
    ftl_predictor_close(p);
    Py_END_ALLOW_THREADS
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Predictor_init(PredictorObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"path", "backbone", "threads", "tta", NULL};
    const char *path, *backbone = NULL, *tta = NULL;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|ziz", keywords, &path, &backbone, &threads, &tta)) return -1;
    ftl_predict_options o;
    ftl_predict_options_init(&o);
    if (tta && ftl_tta_parse(tta, true, &o.tta) != FTL_OK) {
        raise_ftl(FTL_E_INVALID_ARG);
        return -1;
    }
    o.model_path = path;
    o.backbone_path = backbone;
    o.threads = threads;
    o.device = FTL_DEVICE_CPU;
    ftl_predictor_close(self->predictor);
    self->predictor = NULL;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ftl_predictor_open(&o, &self->predictor);
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) {
        raise_ftl(st);
        return -1;
    }
    return 0;
}

static PyObject *Predictor_predict(PredictorObject *self, PyObject *images) {
    Py_buffer view;
    int count, size, width;
    if (image_batch(images, &view, &count, &size, &width, true) != 0) return NULL;
    int64_t classes = ftl_predictor_class_count(self->predictor);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)count * (Py_ssize_t)classes * (Py_ssize_t)sizeof(float));
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ftl_predictor_predict(self->predictor, view.buf, count, size, (float *)PyByteArray_AS_STRING(out));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (st != FTL_OK) {
        Py_DECREF(out);
        return raise_ftl(st);
    }
    return out;
}

static PyObject *Predictor_classes(PredictorObject *self, PyObject *unused) {
    (void)unused;
    int64_t n = ftl_predictor_class_count(self->predictor);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        PyObject *name = PyUnicode_FromString(ftl_predictor_class_name(self->predictor, i));
        if (!name) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, name);
    }
    return list;
}

static PyObject *Predictor_input_size(PredictorObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(ftl_predictor_input_size(self->predictor));
}

static PyObject *Predictor_tta_flip(PredictorObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ftl_predictor_tta_flip(self->predictor));
}

static PyMethodDef Predictor_methods[] = {
    {"predict", (PyCFunction)Predictor_predict, METH_O, "predict(images) -> bytearray of N x C float32 probabilities"},
    {"classes", (PyCFunction)Predictor_classes, METH_NOARGS, "classes() -> the class names, in the model's order"},
    {"input_size", (PyCFunction)Predictor_input_size, METH_NOARGS, "input_size() -> the image size it was trained on"},
    {"tta_flip", (PyCFunction)Predictor_tta_flip, METH_NOARGS, "tta_flip() -> whether it averages each image with its mirror"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PredictorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ftl._ftl.Predictor",
    .tp_basicsize = sizeof(PredictorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A trained MODEL.ftl with its backbone: images in, class probabilities out.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Predictor_init,
    .tp_dealloc = (destructor)Predictor_dealloc,
    .tp_methods = Predictor_methods,
};

/* ---------------------------------------------------------------- module */

/* dist_init() -> (rank, world size): under mpirun every rank that imports ftl joins the group, as
 * every rank of `mpirun ftl ...` does; a process no launcher started stays single. */
static PyObject *dist_init(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    const ftl_collectives *world = NULL;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ftl_dist_init(NULL, &world);
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) return raise_ftl(st);
    return Py_BuildValue("(ii)", ftl_dist_rank(world), ftl_dist_size(world));
}

static PyObject *dist_finalize(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ftl_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ftl_dist_finalize();
    Py_END_ALLOW_THREADS
    if (st != FTL_OK) return raise_ftl(st);
    Py_RETURN_NONE;
}

static PyObject *version(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyUnicode_FromString(FTL_VERSION);
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "version() -> the version of libftl this module is built on"},
    {"dist_init", dist_init, METH_NOARGS, "dist_init() -> (rank, world_size)"},
    {"dist_finalize", dist_finalize, METH_NOARGS, "dist_finalize(): wait for every rank, shut MPI down"},
    {"set_log_sink", set_log_sink, METH_VARARGS, "set_log_sink(fn(level, output, text) or None, redraw_progress)"},
    {"set_log_level", set_log_level, METH_VARARGS, "set_log_level(0 error .. 3 debug)"},
    {"train_options", train_options, METH_NOARGS, "train_options() -> [(name, kind, value_name, help)] of ftl train"},
    {"train", train, METH_VARARGS, "train(argv, on_epoch_end, catch_sigint) -> dict"},
    {"prep", (PyCFunction)(void (*)(void))prep, METH_VARARGS | METH_KEYWORDS, "prep(src, out, ...) -> summary dict"},
    {"evaluate", (PyCFunction)(void (*)(void))evaluate, METH_VARARGS | METH_KEYWORDS, "evaluate(model, data, ...) -> JSON text"},
    {"export", (PyCFunction)(void (*)(void))export_onnx, METH_VARARGS | METH_KEYWORDS, "export(model, out, ...) -> dict"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ftl._ftl", "libftl for Python", -1, module_methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ftl(void) {
    if (PyType_Ready(&BackboneType) < 0 || PyType_Ready(&PredictorType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    ftl_error = PyErr_NewExceptionWithDoc("ftl.Error", "An error from libftl: its message says what and where.",
                                          PyExc_RuntimeError, NULL);
    Py_INCREF(&BackboneType);
    Py_INCREF(&PredictorType);
    if (!ftl_error || PyModule_AddObject(m, "Error", ftl_error) < 0 ||
        PyModule_AddObject(m, "Backbone", (PyObject *)&BackboneType) < 0 ||
        PyModule_AddObject(m, "Predictor", (PyObject *)&PredictorType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(ftl_error);
    return m;
}
