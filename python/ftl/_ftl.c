/* ftl._ftl: the C extension under `import ftl`, over the public API (include/ftl). It takes images
 * through the buffer protocol (C-contiguous uint8 [N, S, S, 3]) and returns float32 results as
 * bytearrays the Python layer views as NumPy arrays without a copy; ftl's work runs with the GIL
 * released. The Python layer (ftl/__init__.py) checks shapes and types and names what it expected. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ftl.h"

#include <string.h>

static PyObject *ftl_error; /* ftl.Error, a RuntimeError */

static PyObject *raise_ftl(ftl_status st) {
    PyErr_Format(ftl_error, "%s (%s)", ftl_last_error(), ftl_status_name(st));
    return NULL;
}

/* A C-contiguous uint8 buffer of N images of S x S x 3; *view must be released by the caller. */
static int image_batch(PyObject *obj, Py_buffer *view, int *count, int *size) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND) != 0) return -1;
    const char *fmt = view->format ? view->format : "B";
    if (view->itemsize != 1 || (strcmp(fmt, "B") != 0 && strcmp(fmt, "=B") != 0 && strcmp(fmt, "<B") != 0)) {
        PyErr_Format(PyExc_TypeError, "images must be uint8 (format 'B'), not format '%s'", fmt);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->ndim != 4 || view->shape[3] != 3 || view->shape[1] != view->shape[2] || view->shape[1] < 1 ||
        view->shape[0] > INT32_MAX || view->shape[1] > 65535) {
        PyErr_SetString(PyExc_ValueError, "images must have the shape [N, S, S, 3] (N square RGB images)");
        PyBuffer_Release(view);
        return -1;
    }
    *count = (int)view->shape[0];
    *size = (int)view->shape[1];
    return 0;
}

/* ---------------------------------------------------------------- Backbone */

typedef struct {
    PyObject_HEAD
    ftl_model *model;
    ftl_nn_preprocess preprocess;
} BackboneObject;

static void Backbone_dealloc(BackboneObject *self) {
    ftl_model_free(self->model);
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

static PyObject *Backbone_embed(BackboneObject *self, PyObject *images) {
    Py_buffer view;
    int count, size;
    if (image_batch(images, &view, &count, &size) != 0) return NULL;
    long long dim = ftl_model_get_info(self->model)->feature_dim;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)count * dim * (Py_ssize_t)sizeof(float));
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    float *features = (float *)PyByteArray_AS_STRING(out);
    ftl_status st = FTL_OK;
    Py_BEGIN_ALLOW_THREADS
    if (count > 0) st = ftl_model_extract_features(self->model, &self->preprocess, view.buf, count, size, features);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (st != FTL_OK) {
        Py_DECREF(out);
        return raise_ftl(st);
    }
    return out;
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
    {"embed", (PyCFunction)Backbone_embed, METH_O, "embed(images) -> bytearray of N x D float32 features"},
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
    ftl_predictor_close(self->predictor);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Predictor_init(PredictorObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"path", "backbone", "threads", NULL};
    const char *path, *backbone = NULL;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|zi", keywords, &path, &backbone, &threads)) return -1;
    ftl_predict_options o;
    ftl_predict_options_init(&o);
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
    int count, size;
    if (image_batch(images, &view, &count, &size) != 0) return NULL;
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

static PyMethodDef Predictor_methods[] = {
    {"predict", (PyCFunction)Predictor_predict, METH_O, "predict(images) -> bytearray of N x C float32 probabilities"},
    {"classes", (PyCFunction)Predictor_classes, METH_NOARGS, "classes() -> the class names, in the model's order"},
    {"input_size", (PyCFunction)Predictor_input_size, METH_NOARGS, "input_size() -> the image size it was trained on"},
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

static PyObject *version(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyUnicode_FromString(FTL_VERSION);
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "version() -> the version of libftl this module is built on"},
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
