"""ftl: fast transfer learning from Python, over libftl (the C engine behind the `ftl` command).

    import ftl
    summary = ftl.prep("hymenoptera_data", "ds", size=224)        # photos -> Parquet datasets
    history = ftl.train("ds/train.parquet", val="ds/val.parquet",
                        backbone="mobilenet_v2.onnx", out="model.ftl", epochs=5, batch=16, lr=0.004,
                        early_stopping={"monitor": "val_acc", "patience": 3})
    history.history["val_acc"]                                      # as Keras' History
    model = history.model                                           # or ftl.Model.load("model.ftl")
    probs = model.predict(images)                                   # uint8 [N, S, S, 3] -> [N, C]
    model.evaluate("ds/val.parquet")["top1"]
    features = ftl.Backbone("mobilenet_v2.onnx").embed(images)      # -> float32 [N, D]

Images are RGB uint8 rows [N, H, W, 3] (what `ftl prep` makes of a photo is square); any object with
the buffer protocol or `__array__` is taken (a NumPy array, a torch tensor). ftl's work runs with the
GIL released; Ctrl-C stops it within a batch as KeyboardInterrupt, leaving no partial files. Errors
from the engine are `ftl.Error` (a RuntimeError) with its message; a wrong dtype is a TypeError, a
wrong shape or option value a ValueError, an unknown option a TypeError, each naming what was expected.
"""
import atexit as _atexit
import difflib as _difflib
import json as _json
import os as _os
import sys as _sys
import tempfile as _tempfile
import threading as _threading

import numpy as _np

from . import _ftl

Error = _ftl.Error
__version__ = _ftl.version()
__all__ = ["rank", "world_size", "prep", "train", "Backbone", "Model", "History", "Error", "train_options", "__version__"]

# ---------------------------------------------------------------- messages

_ERROR, _WARN, _INFO = 0, 1, 2


def _in_notebook():
    return "ipykernel" in _sys.modules


def _log_sink(level, output, text):
    """ftl's messages to Python's streams (a notebook shows those, not C's): epoch lines to stdout as
    Keras prints them, the rest (warnings, progress) to stderr. Called from any of ftl's threads."""
    if _quiet.active and level >= _INFO:
        return
    if _notebook:  # Jupyter redraws on '\r' but prints the terminal's erase-line code as is
        text = text.replace("\x1b[K", "")
    stream = _sys.stdout if output else _sys.stderr
    if stream is not None:
        stream.write(text)
        stream.flush()


class _Quiet:
    """verbose=0 of the running call; process-wide, since ftl's own threads log on its behalf."""
    active = False


_quiet = _Quiet()
_notebook = _in_notebook()
# Under `mpirun -np N python3 script.py` every rank joins the group here, as `mpirun ftl ...` ranks do:
# train, prep and evaluate then run data-parallel (rank 0 writes the outputs).
rank, world_size = _ftl.dist_init()
_atexit.register(_ftl.dist_finalize)
_ftl.set_log_sink(_log_sink, bool(_notebook or (_sys.stderr is not None and _sys.stderr.isatty())))
_atexit.register(_ftl.set_log_sink, None)


def _main_thread():
    """Ctrl-C is caught (and turned into KeyboardInterrupt) only where Python delivers it."""
    return _threading.current_thread() is _threading.main_thread()


class _verbosity:
    def __init__(self, verbose):
        self.quiet = not verbose

    def __enter__(self):
        self.before = _quiet.active
        _quiet.active = self.quiet

    def __exit__(self, *exc):
        _quiet.active = self.before


def _path(p, what):
    """p as a str path that exists, else FileNotFoundError naming it."""
    p = _os.fspath(p)
    if not _os.path.exists(p):
        raise FileNotFoundError(2, "%s not found" % what, p)
    return p


# ---------------------------------------------------------------- images

def _images(x, what="images", square=False):
    """A C-contiguous uint8 [N, H, W, 3] array of x, or the TypeError / ValueError saying why not."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor: its CPU values, without the graph
        x = x.detach().cpu()
    a = _np.asarray(x)
    if a.dtype != _np.uint8:
        raise TypeError("%s must be uint8 RGB pixels [N, H, W, 3], not %s" % (what, a.dtype))
    if a.ndim == 3:  # one image
        a = a[None]
    shape = "[N, S, S, 3] (square RGB images, as ftl prep makes them)" if square else "[N, H, W, 3] (RGB images)"
    if a.ndim != 4 or a.shape[3] != 3 or min(a.shape[1:3]) < 1 or (square and a.shape[1] != a.shape[2]):
        raise ValueError("%s must have the shape %s, not %s" % (what, shape, list(a.shape)))
    return _np.ascontiguousarray(a)


def _floats(buffer, rows, cols):
    return _np.frombuffer(buffer, dtype=_np.float32).reshape(rows, cols)


# ---------------------------------------------------------------- prep

def prep(src, out, size=299, val_fraction=None, seed=42, stratify=True, codec=None, threads=None, strict=False,
         overwrite=False, verbose=1, image_col=None, label_col=None, label_from=None, split_col=None, val_source=None,
         images_root=None, keep_encoded=False):
    """`ftl prep SRC OUT`: a folder of class folders of photos (or train/ and val/ folders of them), a Parquet
    table of encoded images (a file or a folder of parts: Spark binaryFile, Hugging Face, DuckDB read_blob) or
    WebDataset shards (.tar) into OUT/train.parquet and OUT/val.parquet, each photo made a size x size
    thumbnail on white. image_col, label_col, label_from="path", split_col, val_source and images_root are
    `ftl prep`'s --image-col ... --images-root; keep_encoded=True is --keep-encoded (each JPEG/PNG kept where it
    is smaller than its pixels). Returns a summary: classes, train_counts, val_counts,
    train_rows, val_rows, skipped files with the reason."""
    src = _path(src, "prep: the source")
    optional = {"image_col": image_col, "label_col": label_col, "label_from": label_from, "split_col": split_col,
                "val_source": None if val_source is None else _os.fspath(val_source),
                "images_root": None if images_root is None else _os.fspath(images_root)}
    with _verbosity(verbose), _keyword_errors({"size", "val-fraction", "seed", "codec", "threads", "image-col", "label-col",
                                               "label-from", "split-col", "val-source", "images-root"}):
        return _ftl.prep(src, _os.fspath(out), size=int(size), val_fraction=-1.0 if val_fraction is None else float(val_fraction),
                         seed=int(seed), stratify=bool(stratify), codec=codec, threads=int(threads or 0),
                         strict=bool(strict), overwrite=bool(overwrite), verbose=bool(verbose), catch_sigint=_main_thread(),
                         keep_encoded=bool(keep_encoded), **optional)


# ---------------------------------------------------------------- train

def train_options():
    """{keyword: (kind, help)} of every option ftl.train takes (`ftl train`'s flags, '-' as '_')."""
    return {name.replace("-", "_"): (kind, help_text) for name, kind, _, help_text in _ftl.train_options()}


def _option_args(options):
    """`ftl train`'s flags for keyword options; an unknown keyword is a TypeError naming the nearest."""
    known = {name.replace("-", "_"): (name, kind) for name, kind, _, _ in _ftl.train_options()}
    args = []
    for key, value in options.items():
        if key not in known:
            near = _difflib.get_close_matches(key, known, n=1)
            raise TypeError("train() got an unexpected keyword argument %r%s" %
                            (key, " (did you mean %r?)" % near[0] if near else ""))
        name, kind = known[key]
        if value is None:
            continue
        if kind == "bool":
            if not isinstance(value, (bool, _np.bool_)):
                raise TypeError("train(): %s must be True or False, not %r" % (key, value))
            args.append("--" + name if value else "--no-" + name)
            continue
        if isinstance(value, dict):  # early_stopping={"monitor": "val_acc", "patience": 3}
            value = ",".join("%s=%s" % (k, v) for k, v in value.items())
        elif isinstance(value, bool) or (kind in ("int", "float") and not isinstance(value, (int, float, _np.number))):
            raise TypeError("train(): %s must be a number, not %r" % (key, value))
        elif isinstance(value, float):
            value = repr(value)
        elif isinstance(value, _os.PathLike):
            value = _os.fspath(value)
        args += ["--" + name, str(value)]
    return args


class History:
    """What ftl.train returns, as Keras' History: history ({"loss": [...], "acc": [...], "val_loss":
    [...], "val_acc": [...], "lr": [...]}, one entry per epoch run, phase 2's after phase 1's when
    fine-tuning), epochs (each epoch's full record), best_epoch, model (the trained ftl.Model) and
    summary (rows, feature size, classes, seconds, the final metrics)."""

    def __init__(self, result, model_path):
        self.epochs = result["epochs"]
        keys = ["loss", "acc", "val_loss", "val_acc", "lr"]
        self.history = {k: [e[k] for e in self.epochs] for k in keys if self.epochs and k in self.epochs[0]}
        self.best_epoch = result["fit"]["best_epoch"]
        self.model_path = model_path
        self._model = None
        self.summary = result

    @property
    def model(self):
        """The trained ftl.Model, opened on first use (under mpirun rank 0 writes the file)."""
        if self._model is None:
            self._model = Model.load(self.model_path)
        return self._model

    def __repr__(self):
        return "ftl.History(epochs=%d, best_epoch=%d, %s)" % (
            len(self.epochs), self.best_epoch,
            ", ".join("%s=%.4f" % (k, self.summary["fit"][k]) for k in ("val_acc", "val_loss") if self.summary["val_rows"]))


def train(train, val=None, backbone=None, out=None, on_epoch_end=None, verbose=1, **options):
    """`ftl train TRAIN --val VAL --backbone BACKBONE --out OUT` with every other option as a keyword
    (its flag with '_' for '-': batch=16, lr=0.004, epochs=30, dropout=0.5, optimizer="sgd",
    early_stopping={"monitor": "val_acc", "patience": 3}, fine_tune_last=4, augment="flip",
    precision="bf16", feature_cache=False, ...; ftl.train_options() lists them). The library checks them
    as the command line does, and the model file is what `ftl train` writes with the same options.

    out: where the model goes (default: a temporary folder, removed when the process ends); the feature
    cache goes next to it unless cache_dir is given (default then: ./ftl-feature-cache, reused by later
    calls). on_epoch_end(epoch, logs): called after every epoch with that epoch's metrics; return True
    to stop training there (as Keras' model.stop_training). verbose=0: only warnings.
    Returns a History."""
    if backbone is None:
        raise TypeError("train() needs backbone= (the ONNX backbone file)")
    argv = ["train", _path(train, "train: the training dataset"), "--backbone", _path(backbone, "train: the backbone")]
    if val is not None:
        argv += ["--val", _path(val, "train: the validation dataset")]
    if out is None:
        folder = _tempfile.mkdtemp(prefix="ftl-train-")
        _atexit.register(_remove_tree, folder)
        out = _os.path.join(folder, "model.ftl")
        options.setdefault("cache_dir", _os.path.join(_os.getcwd(), "ftl-feature-cache"))
    argv += ["--out", _os.fspath(out)]
    if not verbose:
        options["quiet"] = True
    argv += _option_args(options)
    with _verbosity(verbose), _keyword_errors({name for name, _, _, _ in _ftl.train_options()}):
        result = _ftl.train(argv, on_epoch_end, _main_thread())
    return History(result, _os.fspath(out))


class _keyword_errors:
    """The library names its options as flags (--val-fraction): a ValueError names the keyword instead."""

    def __init__(self, flags):
        self.flags = flags

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is ValueError:
            import re
            message = re.sub(r"--(no-)?([a-z0-9-]+)", lambda m: m.group(2).replace("-", "_")
                             if m.group(2) in self.flags else m.group(0), str(value))
            raise ValueError(message) from None
        return False


def _remove_tree(folder):
    import shutil
    shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- backbone

class Backbone:
    """A frozen backbone (an ONNX file) that turns images into feature vectors, as `ftl embed` does.

    features_from: the tensor to take the features from (default: the graph's output).
    input_scale: "tf" (x / 127.5 - 1, Keras and the article) or "torch" (ImageNet mean and std).
    precision: "fp32", "bf16", "int8" or "auto" (as `ftl embed --precision`). threads: 0 = all cores.
    """

    def __init__(self, path, features_from=None, input_scale="tf", precision="fp32", threads=None, batch=None):
        path = _path(path, "Backbone: the ONNX file")
        self._impl = _ftl.Backbone(path, features_from, input_scale, precision, int(threads or 0), int(batch or 0))
        self.info = self._impl.info()

    def embed(self, images, size=None):
        """float32 [N, D] features of:
        - uint8 images [N, H, W, 3] (an array, a torch tensor): resized to the backbone's input as
          `ftl embed` resizes a dataset's; an image that is not square is padded to one first, as
          ftl prep pads its thumbnails;
        - a list of image files: each made a size x size thumbnail by ftl prep's recipe (size: default
          the backbone's input), then as above;
        - the path of a Parquet dataset (ftl prep's): every row, in file order (embed_dataset gives
          the labels too)."""
        dim = self.info["feature_dim"]
        if isinstance(images, (str, _os.PathLike)):
            return self.embed_dataset(images)[0]
        if isinstance(images, (list, tuple)) and (not images or isinstance(images[0], (str, _os.PathLike))):
            paths = [_path(p, "embed: image file") for p in images]
            s = int(size or self.info["input_height"])
            return _floats(self._impl.embed_files(paths, s, _main_thread()), len(paths), dim)
        a = _images(images)
        return _floats(self._impl.embed(a, _main_thread()), a.shape[0], dim)

    def embed_dataset(self, path):
        """(features float32 [N, D], labels int32 [N]) of every row of a Parquet image dataset."""
        f, y = self._impl.embed_dataset(_path(path, "embed: the dataset"), _main_thread())
        labels = _np.frombuffer(y, dtype=_np.int32)
        return _floats(f, labels.shape[0], self.info["feature_dim"]), labels

    def __repr__(self):
        return "ftl.Backbone(%r, features=%s[%d])" % (self.info["path"], self.info["feature_tensor"], self.info["feature_dim"])


# ---------------------------------------------------------------- a trained model

class Model:
    """A classifier trained by `ftl train` (MODEL.ftl) with its backbone and preprocessing."""

    def __init__(self, impl, path, backbone, threads=0):
        self._impl = impl
        self._impls = {None: impl}  # predictors by tta asked per call ("flip"/"none"), opened when first asked
        self._threads = threads
        self.path = path
        self._backbone = backbone
        self.classes = impl.classes()
        self.input_size = impl.input_size()
        self.tta = "flip" if impl.tta_flip() else "none"  # what predict and evaluate do by default

    @classmethod
    def load(cls, path, backbone=None, threads=None, tta=None):
        """Opens MODEL.ftl and the backbone it records (its sha256 is checked); backbone: its new path
        if it moved. tta: "flip" or "none" (default: as the model was trained, `ftl train --tta`)."""
        path = _path(path, "Model.load: the model file")
        b = None if backbone is None else _path(backbone, "Model.load: the backbone")
        return cls(_ftl.Predictor(path, b, int(threads or 0), tta), path, b, int(threads or 0))

    def predict(self, images, tta=None):
        """float32 [N, C] class probabilities of uint8 images [N, S, S, 3], the columns in
        `classes` order (what `ftl predict` prints, for every class). tta="flip": the mean of each
        image's and its mirror image's probabilities (two backbone passes); default: the model's."""
        a = _images(images, square=True)
        if tta not in self._impls:
            self._impls[tta] = _ftl.Predictor(self.path, self._backbone, self._threads, tta)
        out = self._impls[tta].predict(a)
        return _np.frombuffer(out, dtype=_np.float32).reshape(a.shape[0], len(self.classes))

    def evaluate(self, dataset, batch=None, threads=None, cache_dir=None, verbose=1, tta=None):
        """`ftl eval MODEL DATA --json` as a dict: images, loss, top1, top5, classes (each class's
        name, images and accuracy) and the confusion matrix [true][predicted]. tta: "flip" or "none"
        (default: as the model was trained)."""
        data = _path(dataset, "evaluate: the dataset")
        with _verbosity(verbose):
            text = _ftl.evaluate(self.path, data, backbone=self._backbone, cache_dir=cache_dir, batch=int(batch or 0),
                                 threads=int(threads or 0), verbose=bool(verbose), catch_sigint=_main_thread(), tta=tta)
        return _json.loads(text)

    def export(self, path, opset=None, logits=False, input="uint8-nhwc", overwrite=False, tta=None):
        """`ftl export`: the whole classifier (preprocessing, backbone, head) as one ONNX file; under
        flip TTA (the model's, or tta="flip") the graph averages both orientations."""
        return _ftl.export(self.path, _os.fspath(path), backbone=self._backbone, opset=int(opset or 0),
                           logits=bool(logits), input=input, overwrite=bool(overwrite), tta=tta)

    def __repr__(self):
        return "ftl.Model(%r, classes=%r)" % (self.path, self.classes)
