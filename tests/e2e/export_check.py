"""Checks of `ftl export` outputs against independent references (python3-onnx, numpy, Pillow).

  compare ORT.npy PRED.csv [--logits] [--rows K] [--int8]   ONNX Runtime's output vs `ftl eval --predictions`
        (probability of ftl's predicted class within 1e-4, the same top-1 on every row; --int8: the same
        top-1 on >= 99% of rows, probabilities within 1e-2 at the median and 0.1 at most; --int8-self
        ORT_UNFUSED.npy: and the gaps' median and 95th percentile within 1.5x (or 1e-3) of those between
        ORT's own two int8 paths on the same file)
  model OUT.onnx --opset N --size S --classes A,B --output NAME --input uint8|float [--batch B] [--no-checker]
        onnx.checker (full check) and strict shape inference accept it; IR version, producer,
        opset, input/output types and shapes, metadata_props
  preprocess X.npy IMAGES.npy H W tf|torch [--nhwc]   the graph's backbone input equals Pillow's
        bilinear resize + ftl's scaling, bit for bit
  float_input IMAGES.npy OUT.npy H W tf|torch         writes that preprocessed input (NCHW float32)
  same A.npy B.npy [--softmax-of-a] [--tol T]         two outputs agree
"""
import csv
import json
import sys

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def compare(args):
    out = np.load(args[0]).astype(np.float64)
    pred = list(csv.DictReader(open(args[1])))
    if "--logits" in args:
        out = softmax(out)
    if "--rows" in args:
        pred = pred[: int(args[args.index("--rows") + 1])]
    assert out.shape[0] == len(pred), (out.shape, len(pred))
    cls = np.array([int(p["predicted"]) for p in pred])
    prob = np.array([float(p["probability"]) for p in pred])
    got = out[np.arange(len(cls)), cls]
    gaps = np.abs(got - prob)
    diff = gaps.max()
    same = out.argmax(axis=1) == cls
    print(f"rows {len(cls)}, max |p_ort - p_ftl| {diff:.3g} (median {np.median(gaps):.3g}), top-1 agrees on "
          f"{same.sum()}/{len(cls)}")
    if "--int8" in args:  # an int8 model's QDQ export: rounding ties differ between the engines (see docs/export.md)
        assert same.mean() >= 0.99 and np.median(gaps) <= 1e-2 and diff <= 0.1
        if "--int8-self" in args:  # as far from ONNX Runtime as its fused kernels are from its unfused QDQ
            other = np.load(args[args.index("--int8-self") + 1]).astype(np.float64)
            self_gaps = np.abs(out - other)[np.arange(len(cls)), cls]
            for q in (50, 95):  # the gaps' distributions (a maximum is one borderline image either way)
                a, b = np.percentile(gaps, q), np.percentile(self_gaps, q)
                print(f"gap percentile {q}: ftl vs ONNX Runtime {a:.3g}, ONNX Runtime fused vs unfused {b:.3g}")
                assert a <= max(1e-3, 1.5 * b)
    else:
        assert diff <= 1e-4 and same.all()


def model(args):
    import onnx
    path = args[0]
    opt = {args[i][2:]: args[i + 1] for i in range(1, len(args) - 1) if args[i].startswith("--") and args[i] != "--no-checker"}
    m = onnx.load(path)
    if "--no-checker" not in args:
        onnx.checker.check_model(path, full_check=True)  # by path: external data is read too
        onnx.shape_inference.infer_shapes_path(path, path + ".inferred", strict_mode=True)
    opset = int(opt["opset"])
    assert [(o.domain, o.version) for o in m.opset_import] == [("", opset)], m.opset_import
    ir = {11: 6, 12: 7, 13: 7, 14: 7}.get(opset, 8)
    assert m.ir_version == ir, (m.ir_version, ir)
    meta = {p.key: p.value for p in m.metadata_props}
    assert m.producer_name == "ftl" and m.producer_version == meta["ftl.version"], (m.producer_name, m.producer_version)
    classes = opt["classes"].split(",")
    assert json.loads(meta["ftl.classes"]) == classes, meta["ftl.classes"]
    assert len(meta["ftl.backbone_sha256"]) == 64 and "ftl.label_offset" in meta and "scale" in json.loads(meta["ftl.input_scaling"])
    assert int(meta["ftl.input_size"]) == int(opt["size"]), meta["ftl.input_size"]
    (inp,), (out,) = m.graph.input, m.graph.output
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    s, n = int(opt["size"]), int(opt["batch"]) if "batch" in opt else "N"
    if opt["input"] == "uint8":
        assert inp.name == "images" and inp.type.tensor_type.elem_type == onnx.TensorProto.UINT8 and dims(inp) == [n, s, s, 3], inp
    else:
        assert inp.name == "images" and inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT and dims(inp)[:2] == [n, 3], inp
    assert out.name == opt["output"] and dims(out) == [n, len(classes)], out
    print(f"{path}: checker and shape inference ok, opset {opset}, IR {m.ir_version}, {len(m.graph.node)} nodes, metadata {sorted(meta)}")


def pillow_input(images, h, w, scale):
    from PIL import Image
    if images.shape[1:3] != (h, w):
        images = np.stack([np.asarray(Image.fromarray(im).resize((w, h), Image.BILINEAR)) for im in images])
    q = images.astype(np.float64)
    if scale == "tf":
        x = q / 127.5 - 1.0
    else:
        x = (q / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    return x.astype(np.float32)  # ftl rounds the double formula once to float


def preprocess(args):
    x = np.load(args[0])
    ref = pillow_input(np.load(args[1]), int(args[2]), int(args[3]), args[4])
    if "--nhwc" not in args:
        ref = ref.transpose(0, 3, 1, 2)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    bad = int((x != ref).sum())
    print(f"backbone input {x.shape}: {bad} values differ from Pillow + scaling")
    assert bad == 0


def float_input(args):
    ref = pillow_input(np.load(args[0]), int(args[2]), int(args[3]), args[4])
    np.save(args[1], np.ascontiguousarray(ref.transpose(0, 3, 1, 2)))


def same(args):
    a, b = np.load(args[0]).astype(np.float64), np.load(args[1]).astype(np.float64)
    if "--softmax-of-a" in args:
        a = softmax(a)
    tol = float(args[args.index("--tol") + 1]) if "--tol" in args else 0.0
    diff = np.abs(a - b).max()
    print(f"{a.shape} vs {b.shape}: max difference {diff:.3g} (allowed {tol})")
    assert a.shape == b.shape and diff <= tol


if __name__ == "__main__":
    {"compare": compare, "model": model, "preprocess": preprocess, "float_input": float_input, "same": same}[sys.argv[1]](sys.argv[2:])
