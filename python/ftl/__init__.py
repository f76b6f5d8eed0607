"""ftl: fast transfer learning from Python, over libftl (the C engine behind the `ftl` command).

    import ftl
    backbone = ftl.Backbone("mobilenet_v2_features.onnx")
    features = backbone.embed(images)          # uint8 [N, S, S, 3] -> float32 [N, D]
    model = ftl.Model.load("model.ftl")        # a head trained by `ftl train`
    probs = model.predict(images)              # float32 [N, C]; model.classes names the columns

Images are what `ftl prep` makes of a photo: RGB, uint8, square, in rows [N, S, S, 3]; any object with
the buffer protocol or `__array__` (a NumPy array, a torch tensor) is taken. ftl's work runs with the
GIL released. Errors from the engine are `ftl.Error` (a RuntimeError) with its message; a wrong dtype
is a TypeError and a wrong shape a ValueError, naming what was expected.
"""
import numpy as _np

from . import _ftl

Error = _ftl.Error
__version__ = _ftl.version()
__all__ = ["Backbone", "Model", "Error", "__version__"]


def _images(x, what="images"):
    """A C-contiguous uint8 [N, S, S, 3] array of x, or the TypeError / ValueError saying why not."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor: its CPU values, without the graph
        x = x.detach().cpu()
    a = _np.asarray(x)
    if a.dtype != _np.uint8:
        raise TypeError("%s must be uint8 RGB pixels [N, S, S, 3], not %s" % (what, a.dtype))
    if a.ndim == 3:  # one image
        a = a[None]
    if a.ndim != 4 or a.shape[3] != 3 or a.shape[1] != a.shape[2] or a.shape[1] < 1:
        raise ValueError("%s must have the shape [N, S, S, 3] (square RGB images, as ftl prep makes them), "
                         "not %s" % (what, list(a.shape)))
    return _np.ascontiguousarray(a)


class Backbone:
    """A frozen backbone (an ONNX file) that turns images into feature vectors, as `ftl embed` does.

    features_from: the tensor to take the features from (default: the graph's output).
    input_scale: "tf" (x / 127.5 - 1, Keras and the article) or "torch" (ImageNet mean and std).
    precision: "fp32", "bf16", "int8" or "auto" (as `ftl embed --precision`). threads: 0 = all cores.
    """

    def __init__(self, path, features_from=None, input_scale="tf", precision="fp32", threads=None, batch=None):
        self._impl = _ftl.Backbone(str(path), features_from, input_scale, precision, int(threads or 0), int(batch or 0))
        self.info = self._impl.info()

    def embed(self, images):
        """float32 [N, D] features of uint8 images [N, S, S, 3] (resized to the backbone's input as
        `ftl embed` resizes a dataset's)."""
        a = _images(images)
        out = self._impl.embed(a)
        return _np.frombuffer(out, dtype=_np.float32).reshape(a.shape[0], self.info["feature_dim"])

    def __repr__(self):
        return "ftl.Backbone(%r, features=%s[%d])" % (self.info["path"], self.info["feature_tensor"], self.info["feature_dim"])


class Model:
    """A classifier trained by `ftl train` (MODEL.ftl) with its backbone and preprocessing."""

    def __init__(self, impl):
        self._impl = impl
        self.classes = impl.classes()
        self.input_size = impl.input_size()

    @classmethod
    def load(cls, path, backbone=None, threads=None):
        """Opens MODEL.ftl and the backbone it records (its sha256 is checked); backbone: its new path
        if it moved."""
        return cls(_ftl.Predictor(str(path), None if backbone is None else str(backbone), int(threads or 0)))

    def predict(self, images):
        """float32 [N, C] class probabilities of uint8 images [N, S, S, 3], the columns in
        `classes` order (what `ftl predict` prints, for every class)."""
        a = _images(images)
        out = self._impl.predict(a)
        return _np.frombuffer(out, dtype=_np.float32).reshape(a.shape[0], len(self.classes))

    def __repr__(self):
        return "ftl.Model(classes=%r)" % (self.classes,)
