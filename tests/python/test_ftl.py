"""`import ftl` against the CLI and independent references (run by tests/e2e/test_python.sh, which
trains FTL_PY_MODEL with `ftl train` and puts the package on PYTHONPATH)."""
import json
import os
import struct
import subprocess
import threading
import time

import numpy as np
import pytest
from PIL import Image

import ftl

FTL = os.environ["FTL"]
MODEL = os.environ["FTL_PY_MODEL"]
BACKBONE = os.environ["FTL_PY_BACKBONE"]
SCRATCH = os.environ["FTL_PY_SCRATCH"]


def images(n, size, seed=0):
    """Smooth random RGB images (blocks of 8 pixels): prep's thumbnail leaves an S x S PNG as it is."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (n, size // 8, size // 8, 3), dtype=np.uint8)
    return np.ascontiguousarray(coarse.repeat(8, 1).repeat(8, 2))


def head_of(path):
    """The head's kernel [D, C] and bias [C] read from MODEL.ftl (safetensors) without ftl."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    def tensor(name):
        t = header[name]
        a, b = t["data_offsets"]
        return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(t["shape"])
    return tensor("head.kernel"), tensor("head.bias")


def test_version_matches_the_cli():
    out = subprocess.run([FTL, "--version"], capture_output=True, text=True, check=True).stdout
    assert ftl.__version__ and ftl.__version__ in out.splitlines()[0], (ftl.__version__, out)


def test_predict_equals_ftl_predict():
    model = ftl.Model.load(MODEL)
    x = images(5, model.input_size, seed=1)
    paths = []
    for i, im in enumerate(x):
        p = os.path.join(SCRATCH, "py-%d.png" % i)
        Image.fromarray(im).save(p)
        paths.append(p)
    out = subprocess.run([FTL, "predict", MODEL, *paths, "--top", str(len(model.classes)), "--json"],
                         capture_output=True, text=True, check=True).stdout
    probs = model.predict(x)
    assert probs.shape == (5, len(model.classes)) and probs.dtype == np.float32
    for row, line in zip(probs, out.splitlines()):
        for entry in json.loads(line)["top"]:
            assert model.classes[entry["index"]] == entry["class"]
            assert abs(row[entry["index"]] - entry["probability"]) <= 6e-7, (row, entry)


def test_embed_through_the_head_gives_predict():
    """Backbone.embed, then the head computed here from the file's tensors, is Model.predict."""
    model = ftl.Model.load(MODEL)
    backbone = ftl.Backbone(BACKBONE)
    x = images(4, model.input_size, seed=2)
    features = backbone.embed(x)
    assert features.shape == (4, backbone.info["feature_dim"]) and features.dtype == np.float32
    kernel, bias = head_of(MODEL)
    logits = features.astype(np.float64) @ kernel.astype(np.float64) + bias
    expect = np.exp(logits - logits.max(1, keepdims=True))
    expect /= expect.sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict(x), expect, rtol=0, atol=2e-6)


def test_any_array_like_gives_the_same_features():
    torch = pytest.importorskip("torch")
    backbone = ftl.Backbone(BACKBONE)
    x = images(3, 64, seed=3)
    a = backbone.embed(x)
    assert np.array_equal(a, backbone.embed(torch.from_numpy(x)))
    assert np.array_equal(a, backbone.embed(np.asfortranarray(x)))      # copied to C order first
    assert np.array_equal(a[1], backbone.embed(x[1])[0])                # one image [S, S, 3]
    assert np.array_equal(a[1:], backbone.embed(x[1:]))                 # rows do not depend on the batch


def test_bad_input_names_what_was_expected():
    backbone = ftl.Backbone(BACKBONE)
    with pytest.raises(TypeError, match="uint8"):
        backbone.embed(images(2, 64).astype(np.float32))
    with pytest.raises(ValueError, match=r"\[N, S, S, 3\]"):
        backbone.embed(np.zeros((2, 64, 32, 3), np.uint8))
    with pytest.raises(ValueError, match=r"\[N, S, S, 3\]"):
        backbone.embed(np.zeros((2, 64, 64, 4), np.uint8))
    with pytest.raises(ftl.Error, match="missing.onnx"):
        ftl.Backbone(os.path.join(SCRATCH, "missing.onnx"))
    with pytest.raises(ftl.Error, match="missing.ftl"):
        ftl.Model.load(os.path.join(SCRATCH, "missing.ftl"))
    with pytest.raises(ValueError, match="precision"):
        ftl.Backbone(BACKBONE, precision="fp8")
    assert issubclass(ftl.Error, RuntimeError)


def test_the_gil_is_released_while_ftl_computes():
    backbone = ftl.Backbone(BACKBONE, threads=1)
    x = images(64, 128, seed=4)
    ticks, done = [0], threading.Event()
    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)
    t = threading.Thread(target=count)
    t.start()
    start = ticks[0]
    backbone.embed(x)
    during = ticks[0] - start
    done.set()
    t.join()
    assert during > 3, during  # the counting thread ran while the batch was embedded


def test_embedding_in_a_loop_does_not_grow_memory():
    backbone = ftl.Backbone(BACKBONE)
    x = images(256, 128, seed=5)
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    backbone.embed(x)
    first = rss()
    for _ in range(10):
        backbone.embed(x)
    assert rss() <= first * 1.10, (first, rss())
