#!/usr/bin/python3
"""Quantized ONNX models for ftl's import of them (Debian's python3-onnx, numpy; torch only to find the
float ranges the scales are set from). ONNX Runtime's quantization tool is not available without PyPI, so
the models are built here the way it writes them: QDQ pairs (QuantizeLinear -> DequantizeLinear) around
activations, integer weights behind DequantizeLinear (per tensor and per output channel), int32 biases at
scale x_scale * w_scale, and the operator forms QLinearConv, QLinearMatMul, ConvInteger and MatMulInteger.
u8 and s8, symmetric (zero point 0) and not.

usage: nn_qdq.py OUTDIR
Writes OUTDIR/<case>.onnx, <case>.in.npy and OUTDIR/manifest.txt (name model input expected tolerance
step: tolerance = one quantization step of the output, or a relative bound for the Integer ops' float
sums). The expected outputs come from ONNX Runtime (nn_ort_batch.mjs), twice: graph optimisations off
(<case>.out.npy: its QDQ kernels as written) and on (<case>.opt.npy: QDQ fused into its integer kernels).
Also OUTDIR/bad/*.onnx: quantization ftl must refuse with a message naming the node.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261202)
CASES = []
U8, S8 = "u8", "s8"


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def qrange(kind):
    return (0, 255) if kind == U8 else (-128, 127)


def act_params(y, kind, symmetric):
    """Scale and zero point covering the float values y, as a static calibration would set them."""
    lo, hi = qrange(kind)
    mn, mx = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
    if symmetric:
        a = max(abs(mn), abs(mx))
        if kind == U8:  # symmetric u8 only for values >= 0 (after a ReLU)
            return a / 255.0, 0
        return a / 127.0, 0
    s = (mx - mn) / (hi - lo)
    z = int(round(lo - mn / s))
    return s, max(lo, min(hi, z))


def fake_quant(y, s, z, kind):
    lo, hi = qrange(kind)
    return ((np.clip(np.round(y / s) + z, lo, hi) - z) * s).astype(np.float32)


def np_type(kind):
    return np.uint8 if kind == U8 else np.int8


class Q:
    """A quantized graph builder: activations carry (float reference, scale, zero point, kind)."""

    def __init__(self, name, in_shape):
        self.name, self.in_shape = name, list(in_shape)
        self.nodes, self.inits, self.k = [], [], 0
        self.x = rand(*in_shape)

    def t(self, p="t"):
        self.k += 1
        return f"{p}{self.k}"

    def const(self, arr, p="c"):
        n = self.t(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def node(self, op, ins, **attrs):
        out = self.t(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=f"{op}_{self.k}", **attrs))
        return out

    def quant(self, name, y, kind, symmetric):
        """QuantizeLinear of activation `name` whose float values are y: (q name, scale, zero)."""
        s, z = act_params(y, kind, symmetric)
        q = self.node("QuantizeLinear", [name, self.const(np.float32(s), "s"), self.const(np_type(kind)(z), "z")])
        return q, s, z

    def qdq(self, name, y, kind, symmetric):
        """QuantizeLinear -> DequantizeLinear: the (name, float values) of the pair's output."""
        q, s, z = self.quant(name, y, kind, symmetric)
        out = self.node("DequantizeLinear", [q, self.const(np.float32(s), "s"), self.const(np_type(kind)(z), "z")])
        self.last = (s, kind)
        return out, fake_quant(y, s, z, kind)

    def int_weights(self, w, per_channel):
        """s8 symmetric weights (as ONNX Runtime's tool makes them): (q, scales)."""
        if per_channel:
            s = np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 127.0
            q = np.round(w / s.reshape(-1, *[1] * (w.ndim - 1)))
        else:
            s = np.array(np.abs(w).max() / 127.0)
            q = np.round(w / s)
        return np.clip(q, -127, 127).astype(np.int8), s.astype(np.float32)

    def dq_weights(self, w, per_channel, float_q=False):
        """Conv weights behind DequantizeLinear (or QuantizeLinear on float weights): (name, float values)."""
        q, s = self.int_weights(w, per_channel)
        zero = np.zeros(s.shape, np.int8)
        attrs = {"axis": 0} if per_channel else {}
        src = self.const(w, "wf") if float_q else self.const(q, "wq")
        if float_q:
            src = self.node("QuantizeLinear", [src, self.const(s, "ws"), self.const(zero, "wz")], **attrs)
        name = self.node("DequantizeLinear", [src, self.const(s, "ws"), self.const(zero, "wz")], **attrs)
        return name, (q.astype(np.float32) * s.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32), s

    def conv(self, x, xv, xs, cin, cout, k=3, group=1, per_channel=True, float_q=False, pad=None):
        w = rand(cout, cin // group, k, k, scale=1.0 / np.sqrt(cin // group * k * k))
        wn, wv, ws = self.dq_weights(w, per_channel, float_q)
        b = rand(cout, scale=0.1)
        bs = (xs * (ws if ws.ndim else np.full(cout, ws))).astype(np.float32)
        bq = np.round(b / bs).astype(np.int32)
        bn = self.node("DequantizeLinear", [self.const(bq, "bq"), self.const(bs, "bs"), self.const(np.zeros(cout, np.int32), "bz")], axis=0)
        p = k // 2 if pad is None else pad
        y = self.node("Conv", [x, wn, bn], kernel_shape=[k, k], pads=[p] * 4, group=group)
        yv = F.conv2d(torch.from_numpy(xv), torch.from_numpy(wv), torch.from_numpy((bq * bs).astype(np.float32)), padding=p, groups=group).numpy()
        return y, yv

    def save(self, outdir, out, out_shape, tol, opset=13):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + self.in_shape[1:])
        for nd in self.nodes:  # the graph input is "x"
            nd.input[:] = ["x" if i == "x0" else i for i in nd.input]
        graph = helper.make_graph(self.nodes, self.name, [x], [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N"] + out_shape)],
                                  initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="nn_qdq.py")
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(outdir, f"{self.name}.onnx"))
        np.save(os.path.join(outdir, f"{self.name}.in.npy"), self.x)
        CASES.append((self.name, tol))


def qdq_cases(d):
    # 1. the QDQ form: two convs (3x3, then a depthwise with a residual Add), ReLU, MaxPool, the head's average
    for kind, sym, pc, fq in ((U8, False, True, False), (U8, True, False, False), (S8, False, True, True), (S8, True, True, False)):
        name = f"qdq_convnet_{kind}_{'sym' if sym else 'asym'}_{'per_channel' if pc else 'per_tensor'}{'_float_weights' if fq else ''}"
        g = Q(name, [2, 8, 12, 12])
        a, av = g.qdq("x0", g.x, kind if not (kind == U8 and sym) else S8, sym)  # u8 symmetric is for >= 0 values only
        s_in = g.last[0]
        c1, c1v = g.conv(a, av, s_in, 8, 16, per_channel=pc, float_q=fq)
        r1 = g.node("Relu", [c1])
        r1v = np.maximum(c1v, 0)
        b, bv = g.qdq(r1, r1v, kind, sym)
        c2, c2v = g.conv(b, bv, g.last[0], 16, 16, group=16, per_channel=pc)
        c2q, c2qv = g.qdq(c2, c2v, S8 if kind == S8 else U8, False)
        add = g.node("Add", [c2q, b])
        addv = c2qv + bv
        aq, aqv = g.qdq(add, addv, kind, False)
        mp = g.node("MaxPool", [aq], kernel_shape=[2, 2], strides=[2, 2])
        mpv = F.max_pool2d(torch.from_numpy(aqv), 2).numpy()
        c3, c3v = g.conv(mp, mpv, g.last[0], 16, 12, k=1, per_channel=pc)
        out, _ = g.qdq(c3, c3v, kind if not sym else S8, False)
        g.save(d, out, [12, 6, 6], tol=g.last[0] * 1.001)

    # 1b. QDQ around Concat, AveragePool, GlobalAveragePool and Gemm (int8 weights per tensor, int32 bias)
    g = Q("qdq_concat_pool_gemm_u8", [2, 6, 8, 8])
    a, av = g.qdq("x0", g.x, U8, False)
    c1, c1v = g.conv(a, av, g.last[0], 6, 8)
    r1 = g.node("Relu", [c1])
    b, bv = g.qdq(r1, np.maximum(c1v, 0), U8, False)
    c2, c2v = g.conv(b, bv, g.last[0], 8, 8, k=1)
    c2q, c2qv = g.qdq(c2, c2v, U8, False)
    ap = g.node("AveragePool", [b], kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1], count_include_pad=0)
    apv = F.avg_pool2d(torch.from_numpy(bv), 3, 1, 1, count_include_pad=False).numpy()
    apq, apqv = g.qdq(ap, apv, U8, False)
    cat = g.node("Concat", [c2q, apq], axis=1)
    catv = np.concatenate([c2qv, apqv], axis=1)
    catq, catqv = g.qdq(cat, catv, U8, False)
    gp = g.node("GlobalAveragePool", [catq])
    gpv = catqv.mean(axis=(2, 3), keepdims=True)
    gpq, gpqv = g.qdq(gp, gpv, U8, False)
    fl = g.node("Flatten", [gpq])
    flv = gpqv.reshape(2, -1)
    wg = rand(7, 16, scale=0.3)
    wq, ws = g.int_weights(wg, False)
    wn = g.node("DequantizeLinear", [g.const(wq, "wq"), g.const(ws, "ws"), g.const(np.int8(0), "wz")])
    bias = rand(7, scale=0.1)
    bsc = np.float32(g.last[0] * ws)
    bn = g.node("DequantizeLinear", [g.const(np.round(bias / bsc).astype(np.int32), "bq"), g.const(bsc, "bs"),
                                     g.const(np.int32(0), "bz")])
    gm = g.node("Gemm", [fl, wn, bn], transB=1)
    gmv = flv @ (wq.astype(np.float32) * ws).T
    out, _ = g.qdq(gm, gmv, U8, False)
    g.save(d, out, [7], tol=g.last[0] * 1.001)

    # 1c. a BatchNormalization after a QDQ conv (folded by ftl: the weights' scales take its per-channel factor)
    g = Q("qdq_conv_batchnorm_s8", [2, 4, 10, 10])
    a, av = g.qdq("x0", g.x, S8, False)
    c1, c1v = g.conv(a, av, g.last[0], 4, 8)
    gamma, beta = rand(8, scale=0.5) + 1.0, rand(8, scale=0.1)
    gamma[3] = -0.7  # a negative factor: the integers change sign, the scale keeps its magnitude
    mean, var = rand(8, scale=0.1), np.abs(rand(8)) + 0.5
    bn = g.node("BatchNormalization", [c1, g.const(gamma, "g"), g.const(beta, "b"), g.const(mean, "m"), g.const(var, "v")],
                epsilon=1e-5)
    bnv = (c1v - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5) * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1)
    r = g.node("Relu", [bn])
    b, bv = g.qdq(r, np.maximum(bnv, 0), U8, False)
    c2, c2v = g.conv(b, bv, g.last[0], 8, 6, k=1)
    out, _ = g.qdq(c2, c2v, S8, False)
    g.save(d, out, [6, 10, 10], tol=g.last[0] * 1.001)

    # 2. QLinearConv chain (u8 activations, s8 per-channel weights, int32 bias), MaxPool on the u8 tensor
    for kind, pc in ((U8, True), (S8, False)):
        g = Q(f"qlinear_conv_{kind}_{'per_channel' if pc else 'per_tensor'}", [2, 6, 10, 10])
        q0, s0, z0 = g.quant("x0", g.x, kind, False)
        xv = fake_quant(g.x, s0, z0, kind)
        cur, curv, cs, cz = q0, xv, s0, z0
        for cin, cout, k in ((6, 12, 3), (12, 12, 1)):
            w = rand(cout, cin, k, k, scale=1.0 / np.sqrt(cin * k * k))
            wq, ws = g.int_weights(w, pc)
            wv = wq.astype(np.float32) * (ws.reshape(-1, 1, 1, 1) if pc else ws)
            b = rand(cout, scale=0.1)
            bs = (cs * (ws if pc else np.full(cout, ws))).astype(np.float32)
            bq = np.round(b / bs).astype(np.int32)
            yv = F.conv2d(torch.from_numpy(curv), torch.from_numpy(wv.astype(np.float32)), torch.from_numpy((bq * bs).astype(np.float32)), padding=k // 2).numpy()
            yv = np.maximum(yv, 0) if kind == U8 else yv
            ys, yz = act_params(yv, kind, False)
            ins = [cur, g.const(np.float32(cs), "s"), g.const(np_type(kind)(cz), "z"), g.const(wq, "wq"), g.const(ws, "ws"),
                   g.const(np.zeros(ws.shape, np.int8), "wz"), g.const(np.float32(ys), "s"), g.const(np_type(kind)(yz), "z"),
                   g.const(bq, "bq")]
            cur = g.node("QLinearConv", ins, kernel_shape=[k, k], pads=[k // 2] * 4)
            curv, cs, cz = fake_quant(yv, ys, yz, kind), ys, yz
        mp = g.node("MaxPool", [cur], kernel_shape=[2, 2], strides=[2, 2])
        out = g.node("DequantizeLinear", [mp, g.const(np.float32(cs), "s"), g.const(np_type(kind)(cz), "z")])
        g.save(d, out, [12, 5, 5], tol=cs * 1.001)

    # 3. QLinearMatMul on flattened features (u8 x u8 with zero points, as the tool writes for MatMul)
    g = Q("qlinear_matmul_u8", [3, 4, 4, 4])
    fl = g.node("Flatten", ["x0"])
    flv = g.x.reshape(3, -1)
    q0, s0, z0 = g.quant(fl, flv, U8, False)
    b = rand(64, 10, scale=0.2)
    bs, bz = act_params(b, U8, False)
    bq = np.clip(np.round(b / bs) + bz, 0, 255).astype(np.uint8)
    yv = fake_quant(flv, s0, z0, U8) @ ((bq.astype(np.float32) - bz) * bs)
    ys, yz = act_params(yv, U8, False)
    ins = [q0, g.const(np.float32(s0), "s"), g.const(np.uint8(z0), "z"), g.const(bq, "bq"), g.const(np.float32(bs), "s"),
           g.const(np.uint8(bz), "z"), g.const(np.float32(ys), "s"), g.const(np.uint8(yz), "z")]
    mm = g.node("QLinearMatMul", ins)
    out = g.node("DequantizeLinear", [mm, g.const(np.float32(ys), "s"), g.const(np.uint8(yz), "z")])
    g.save(d, out, [10], tol=ys * 1.001)

    # 4. ConvInteger / MatMulInteger: int32 sums, cast to float and scaled (static activations)
    g = Q("conv_integer_u8", [2, 4, 8, 8])
    q0, s0, z0 = g.quant("x0", g.x, U8, False)
    w = rand(6, 4, 3, 3, scale=0.3)
    wq, ws = g.int_weights(w, False)
    ci = g.node("ConvInteger", [q0, g.const(wq, "wq"), g.const(np.uint8(z0), "z")], kernel_shape=[3, 3], pads=[0] * 4)
    cf = g.node("Cast", [ci], to=TensorProto.FLOAT)
    out = g.node("Mul", [cf, g.const(np.float32(s0 * ws), "s")])
    yv = F.conv2d(torch.from_numpy(fake_quant(g.x, s0, z0, U8)), torch.from_numpy(wq.astype(np.float32) * ws)).numpy()
    g.save(d, out, [6, 6, 6], tol=float(np.abs(yv).max()) * 1e-5)

    # uint8 weights with zero point 0 (ConvInteger allows them): values up to 255, beyond int8's range
    g = Q("conv_integer_u8_weights", [2, 4, 8, 8])
    q0, s0, z0 = g.quant("x0", g.x, U8, False)
    wq = RNG.integers(0, 256, size=(5, 4, 3, 3)).astype(np.uint8)
    ci = g.node("ConvInteger", [q0, g.const(wq, "wq"), g.const(np.uint8(z0), "z"), g.const(np.uint8(0), "wz")],
                kernel_shape=[3, 3], pads=[1] * 4)
    cf = g.node("Cast", [ci], to=TensorProto.FLOAT)
    out = g.node("Mul", [cf, g.const(np.float32(s0 * 1e-3), "s")])
    yv = F.conv2d(torch.from_numpy(fake_quant(g.x, s0, z0, U8)), torch.from_numpy(wq.astype(np.float32) * 1e-3), padding=1).numpy()
    g.save(d, out, [5, 8, 8], tol=float(np.abs(yv).max()) * 1e-5)

    # conv weights dequantized per input channel (axis 1), then a BatchNormalization ftl folds
    g = Q("qdq_conv_axis1_weights_bn", [2, 4, 6, 6])
    a, av = g.qdq("x0", g.x, S8, False)
    w = rand(6, 4, 3, 3, scale=0.3)
    ws = (np.abs(w).max(axis=(0, 2, 3)) / 127.0).astype(np.float32)
    wq = np.clip(np.round(w / ws.reshape(1, -1, 1, 1)), -127, 127).astype(np.int8)
    wn = g.node("DequantizeLinear", [g.const(wq, "wq"), g.const(ws, "ws"), g.const(np.zeros(4, np.int8), "wz")], axis=1)
    c1 = g.node("Conv", [a, wn], kernel_shape=[3, 3], pads=[1] * 4)
    bn = g.node("BatchNormalization", [c1, g.const(rand(6, scale=0.3) + 1, "g"), g.const(rand(6, scale=0.1), "b"),
                                       g.const(rand(6, scale=0.1), "m"), g.const(np.abs(rand(6)) + 0.5, "v")])
    g.save(d, bn, [6, 6, 6], tol=1e-4)

    g = Q("matmul_integer_s8", [3, 16])
    q0, s0, z0 = g.quant("x0", g.x, S8, False)
    b = rand(16, 8, scale=0.3)
    bq, bs = g.int_weights(b, False)
    mi = g.node("MatMulInteger", [q0, g.const(bq, "bq"), g.const(np.int8(z0), "z")])
    cf = g.node("Cast", [mi], to=TensorProto.FLOAT)
    out = g.node("Mul", [cf, g.const(np.float32(s0 * bs), "s")])
    yv = fake_quant(g.x, s0, z0, S8) @ (bq.astype(np.float32) * bs)
    g.save(d, out, [8], tol=float(np.abs(yv).max()) * 1e-5)


def bad_models(d):
    """Quantization ftl refuses, each naming the node."""
    os.makedirs(d, exist_ok=True)

    def save(name, nodes, inits):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4, 4])
        m = helper.make_model(helper.make_graph(nodes, name, [x], [y], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 13)], producer_name="nn_qdq.py")
        m.ir_version = 8
        onnx.save(m, os.path.join(d, f"{name}.onnx"))

    def pair(scale, zero, dq_scale=None):
        inits = [numpy_helper.from_array(np.asarray(scale, np.float32), "s"), numpy_helper.from_array(zero, "z"),
                 numpy_helper.from_array(np.asarray(scale if dq_scale is None else dq_scale, np.float32), "s2")]
        return [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant_x"),
                helper.make_node("DequantizeLinear", ["q", "s2", "z"], ["y"], name="dequant_x")], inits

    save("scale_zero", *pair(0.0, np.uint8(0)))
    save("scale_negative", *pair(-0.5, np.uint8(0)))
    save("scale_nan", *pair(np.nan, np.uint8(0)))
    save("scales_mismatch", *pair(0.1, np.uint8(3), dq_scale=0.2))
    # a zero point outside its type's range: int8 storage given -129 through an int32 zero point
    nodes, inits = pair(0.1, np.int32(300))
    save("zero_point_int32", nodes, inits)
    # a uint8 zero point stored as raw bytes with a value past 255 (int32_data carries any int)
    z = helper.make_tensor("z", TensorProto.UINT8, [], [300])
    nodes, inits = pair(0.1, np.uint8(0))
    inits[1] = z
    save("zero_point_out_of_range", nodes, inits)
    # dynamic quantization: the scale is computed per batch
    save("dynamic_quantize", [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dyn"),
                              helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")], [])
    # a scale that is not a constant
    save("scale_not_constant", [helper.make_node("ReduceMean", ["x"], ["m"], name="range", keepdims=0),
                                helper.make_node("QuantizeLinear", ["x", "m"], ["q"], name="quant_runtime"),
                                helper.make_node("DequantizeLinear", ["q", "m"], ["y"], name="dq")], [])
    # malformed quantized nodes: too few inputs, no output, an attribute ftl does not read, int32 activations
    inits = [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.uint8(0), "z")]
    save("qlinear_conv_two_inputs", [helper.make_node("QLinearConv", ["x", "s"], ["y"], name="qconv_short")], inits)
    save("quantize_no_output", [helper.make_node("QuantizeLinear", ["x", "s", "z"], [""], name="quant_nowhere"),
                                helper.make_node("DequantizeLinear", ["", "s", "z"], ["y"], name="dq")], inits)
    save("dequantize_block_size", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant_x"),
                                   helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq_blocked",
                                                    block_size=4)], inits)
    # an integer tensor read by a float op
    nodes, inits = pair(0.1, np.uint8(0))
    nodes[1] = helper.make_node("Relu", ["q"], ["y"], name="relu_on_uint8")
    save("float_op_on_integers", nodes, inits)


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    qdq_cases(outdir)
    bad_models(os.path.join(outdir, "bad"))
    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        for name, tol in CASES:
            f.write(f"{name} {name}.onnx {name}.in.npy {name}.out.npy {tol:.9g}\n")
    with open(os.path.join(outdir, "manifest_opt.txt"), "w") as f:
        for name, tol in CASES:
            f.write(f"{name} {name}.onnx {name}.in.npy {name}.opt.npy {tol:.9g}\n")
    print(f"{len(CASES)} quantized cases")


if __name__ == "__main__":
    main()
