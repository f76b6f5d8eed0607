"""`import ftl` against the CLI and independent references (run by tests/e2e/test_python.sh, which
trains FTL_PY_MODEL with `ftl train` and puts the package on PYTHONPATH)."""
import glob
import json
import os
import signal
import struct
import subprocess
import sys
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
SOURCE = os.environ["FTL_PY_SOURCE"]
DATA = os.path.join(SCRATCH, "ds")
TRAIN_FLAGS = os.environ["FTL_PY_TRAIN_FLAGS"].split()


def duckdb_file(name):
    """A file the test script made with DuckDB's reading of a Parquet file (absent without Node)."""
    p = os.path.join(SCRATCH, name)
    if not os.path.exists(p):
        pytest.skip("DuckDB (the pinned Node tools) is not installed: %s was not made" % name)
    return p


def keywords(flags):
    """`ftl train` flags as ftl.train keywords: --batch 8 -> batch=8 (numbers as numbers)."""
    out, i = {}, 0
    while i < len(flags):
        name = flags[i][2:].replace("-", "_")
        value = flags[i + 1]
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                pass
        if name == "early_stopping":
            value = dict(kv.split("=") for kv in value.split(","))
        out[name] = value
        i += 2
    return out


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
    # ftl's head sums in float32: its logits carry about eps32 x sum|f k| of rounding (~3e-5 on a sum of
    # ~800 here), and a probability moves by at most p (1 - p) <= 1/4 of the logits' difference
    scale = np.abs(features.astype(np.float64)) @ np.abs(kernel.astype(np.float64))
    tol = 0.5 * 8 * np.finfo(np.float32).eps * scale.max(1, keepdims=True)
    got = model.predict(x)
    assert np.all(np.abs(got - expect) <= tol), (np.abs(got - expect).max(), tol.min())


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
    with pytest.raises(ValueError, match=r"\[N, H, W, 3\]"):
        backbone.embed(np.zeros((2, 64, 64, 4), np.uint8))
    with pytest.raises(ValueError, match=r"\[N, S, S, 3\]"):
        ftl.Model.load(MODEL).predict(np.zeros((2, 64, 32, 3), np.uint8))
    with pytest.raises(FileNotFoundError, match="missing.onnx"):
        ftl.Backbone(os.path.join(SCRATCH, "missing.onnx"))
    with pytest.raises(FileNotFoundError, match="missing.ftl"):
        ftl.Model.load(os.path.join(SCRATCH, "missing.ftl"))
    with pytest.raises(FileNotFoundError, match="nothere.jpg"):
        backbone.embed([os.path.join(SCRATCH, "nothere.jpg")])
    not_image = os.path.join(SCRATCH, "not-an-image.jpg")
    open(not_image, "w").write("text")
    with pytest.raises(ftl.Error, match="not-an-image.jpg"):
        backbone.embed([not_image])
    with pytest.raises(ftl.Error, match="model.ftl: not an ONNX model"):
        ftl.Backbone(MODEL)  # a MODEL.ftl is not an ONNX backbone
    with pytest.raises(ValueError, match="precision"):
        ftl.Backbone(BACKBONE, precision="fp8")
    assert issubclass(ftl.Error, RuntimeError)


def test_train_options_are_checked_as_the_cli_checks_them():
    train = os.path.join(DATA, "train.parquet")
    with pytest.raises(TypeError, match="'bach'.*'batch'"):
        ftl.train(train, backbone=BACKBONE, bach=8)
    with pytest.raises(ValueError, match=r"^batch must be 1\.\.65536, not 0"):
        ftl.train(train, backbone=BACKBONE, batch=0)
    with pytest.raises(ValueError, match="dropout"):
        ftl.train(train, backbone=BACKBONE, dropout=1.5)
    with pytest.raises(ValueError, match="momentum"):
        ftl.train(train, backbone=BACKBONE, momentum=0.9)  # the default optimizer is nadam
    with pytest.raises(TypeError, match="feature_cache must be True or False"):
        ftl.train(train, backbone=BACKBONE, feature_cache="no")
    with pytest.raises(TypeError, match="backbone"):
        ftl.train(train)
    assert set(keywords(TRAIN_FLAGS)) <= set(ftl.train_options())


def test_train_equals_ftl_train():
    """The same options as keywords: the model file is byte-identical, the history is the log's."""
    out = os.path.join(SCRATCH, "py", "model.ftl")
    seen = []
    h = ftl.train(os.path.join(DATA, "train.parquet"), val=os.path.join(DATA, "val.parquet"), backbone=BACKBONE,
                  out=out, log=os.path.join(SCRATCH, "py", "run.jsonl"), report=os.path.join(SCRATCH, "py", "report.html"), verbose=0,
                  on_epoch_end=lambda epoch, logs: seen.append((epoch, logs["val_loss"])), **keywords(TRAIN_FLAGS))
    assert open(out, "rb").read() == open(MODEL, "rb").read()
    records = [json.loads(line) for line in open(os.path.join(SCRATCH, "cli", "run.jsonl"))]
    epochs = [r for r in records if r.get("record") == "epoch"]
    assert len(epochs) == len(h.epochs) == len(h.history["loss"]) and epochs
    for key in ("loss", "acc", "val_loss", "val_acc"):
        assert h.history[key] == pytest.approx([r[key] for r in epochs], rel=1e-12, abs=0), key
    assert [e for e, _ in seen] == list(range(1, len(epochs) + 1))
    assert h.best_epoch == max(r["best_epoch"] for r in epochs)
    assert open(os.path.join(SCRATCH, "py", "report.html")).read().count("<svg") >= 1  # report= as --report
    assert isinstance(h.model, ftl.Model) and h.model.classes == ftl.Model.load(MODEL).classes


def test_on_epoch_end_can_stop_training():
    seen = []
    def stop_after_two(epoch, logs):
        seen.append(sorted(logs))
        return epoch == 2
    h = ftl.train(os.path.join(DATA, "train.parquet"), val=os.path.join(DATA, "val.parquet"), backbone=BACKBONE,
                  out=os.path.join(SCRATCH, "stop", "model.ftl"), epochs=6, verbose=0, on_epoch_end=stop_after_two)
    assert len(h.epochs) == 2 and len(seen) == 2
    assert {"loss", "acc", "val_loss", "val_acc", "lr", "epoch"} <= set(seen[0])
    class Boom(Exception):
        pass
    def boom(epoch, logs):
        raise Boom("from the callback")
    with pytest.raises(Boom):
        ftl.train(os.path.join(DATA, "train.parquet"), backbone=BACKBONE, out=os.path.join(SCRATCH, "boom", "m.ftl"),
                  epochs=3, verbose=0, on_epoch_end=boom)
    assert not os.path.exists(os.path.join(SCRATCH, "boom", "m.ftl"))


def test_messages_reach_pythons_streams(capsys):
    """Epoch lines go to sys.stdout and progress to sys.stderr (what a notebook shows), not to C's streams."""
    ftl.train(os.path.join(DATA, "train.parquet"), val=os.path.join(DATA, "val.parquet"), backbone=BACKBONE,
              out=os.path.join(SCRATCH, "streams", "model.ftl"), cache_dir=os.path.join(SCRATCH, "streams", "cache"),
              epochs=2)
    out, err = capsys.readouterr()
    assert "Epoch 1/2 - " in out and "Epoch 2/2 - " in out, out
    assert "feature cache: computing train features" in err, err
    ftl.train(os.path.join(DATA, "train.parquet"), backbone=BACKBONE, out=os.path.join(SCRATCH, "streams", "quiet.ftl"),
              cache_dir=os.path.join(SCRATCH, "streams", "cache"), epochs=2, verbose=0)
    out, err = capsys.readouterr()
    assert out == "" and err == "", (out, err)
    with pytest.raises(ValueError, match="^val_fraction 2 must be in"):
        ftl.prep(SOURCE, os.path.join(SCRATCH, "never"), val_fraction=2.0)


def test_ctrl_c_during_train_raises_keyboard_interrupt_and_leaves_no_files():
    out = os.path.join(SCRATCH, "sigint")
    script = """
import sys, ftl
print("start", flush=True)
ftl.train(sys.argv[1], backbone=sys.argv[2], out=sys.argv[3] + "/model.ftl", epochs=200, feature_cache=False,
          verbose=0, on_epoch_end=lambda e, logs: print("epoch", e, flush=True))
"""
    p = subprocess.Popen([sys.executable, "-c", script, os.path.join(DATA, "train.parquet"), BACKBONE, out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    assert p.stdout.readline().startswith("epoch")  # training runs: the backbone on every batch
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert time.monotonic() - sent < 1.0, "not interrupted within a second"
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err
    left = [f for f in glob.glob(out + "/**", recursive=True) if os.path.isfile(f)]
    assert left == [], left


def test_ctrl_c_during_embed_raises_keyboard_interrupt_within_a_batch():
    script = """
import sys, numpy as np, ftl
b = ftl.Backbone(sys.argv[1])
x = np.zeros((800, 224, 224, 3), np.uint8)
print("start", flush=True)
b.embed(x)
print("finished", flush=True)
"""
    big = os.path.join(os.path.dirname(BACKBONE), "mobilenet_v2_1.0_224_features.onnx")  # ~10 s for 800 images
    p = subprocess.Popen([sys.executable, "-c", script, big], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    time.sleep(1)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - sent < 1.0, "not interrupted within a second"
    assert "finished" not in out and "KeyboardInterrupt" in err and "self._impl.embed(" in err, err


def test_embed_equals_ftl_embed():
    """The val images as DuckDB reads them, as a torch tensor, as the photo files, and as the Parquet
    path: each gives ftl embed's features (read by DuckDB), exactly."""
    x = np.load(duckdb_file("val-images.npy"))
    rows = json.load(open(duckdb_file("val-rows.json")))["rows"]
    expect = np.load(duckdb_file("val-features.npy")).view("<f4")
    backbone = ftl.Backbone(BACKBONE)
    assert np.array_equal(backbone.embed(x), expect)
    torch = pytest.importorskip("torch")
    assert np.array_equal(backbone.embed(torch.from_numpy(x)), expect)
    files = [os.path.join(SOURCE, r["path"]) for r in rows]  # the dataset's paths are relative to prep's SRC
    assert np.array_equal(backbone.embed(files, size=x.shape[1]), expect)
    features, labels = backbone.embed_dataset(os.path.join(DATA, "val.parquet"))
    assert np.array_equal(features, expect) and labels.tolist() == [r["label"] for r in rows]
    assert np.array_equal(backbone.embed(os.path.join(DATA, "val.parquet")), expect)


def test_an_image_that_is_not_square_is_padded_as_prep_pads():
    """[N, H, W, 3] is padded to its longer side, centered on white (numpy here), then embedded."""
    backbone = ftl.Backbone(BACKBONE)
    x = images(3, 96, seed=6)[:, 10:90, :, :]   # 80 x 96
    padded = np.full((3, 96, 96, 3), 255, np.uint8)
    padded[:, 8:88, :, :] = x
    assert np.array_equal(backbone.embed(x), backbone.embed(padded))
    tall = np.ascontiguousarray(x.transpose(0, 2, 1, 3))   # 96 x 80
    padded_tall = np.full((3, 96, 96, 3), 255, np.uint8)
    padded_tall[:, :, 8:88, :] = tall
    assert np.array_equal(backbone.embed(tall), backbone.embed(padded_tall))


def test_evaluate_equals_ftl_eval_json():
    model = ftl.Model.load(MODEL)
    got = model.evaluate(os.path.join(DATA, "val.parquet"), verbose=0)
    assert got == json.load(open(os.path.join(SCRATCH, "eval.json")))
    assert 0 <= got["top1"] <= 1 and got["images"] == sum(map(sum, got["confusion"]))


def test_export_equals_ftl_export():
    out = os.path.join(SCRATCH, "py.onnx")
    r = ftl.Model.load(MODEL).export(out)
    assert open(out, "rb").read() == open(os.path.join(SCRATCH, "cli.onnx"), "rb").read()
    assert r["classes"] == 2
    with pytest.raises(ftl.Error, match="exists"):
        ftl.Model.load(MODEL).export(out)


def test_prep_equals_ftl_prep():
    out = os.path.join(SCRATCH, "py-ds")
    s = ftl.prep(SOURCE, out, size=128, verbose=0)
    for split in ("train", "val"):
        assert open(os.path.join(out, split + ".parquet"), "rb").read() == \
            open(os.path.join(DATA, split + ".parquet"), "rb").read(), split
    assert s["classes"] == ["ants", "bees"] and s["val_rows"] == sum(s["val_counts"].values())
    assert s["train_rows"] == sum(s["train_counts"].values()) and s["skipped"]  # the GIF placeholder
    with pytest.raises(FileNotFoundError):
        ftl.prep(os.path.join(SCRATCH, "no-such-folder"), os.path.join(SCRATCH, "x"))


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
