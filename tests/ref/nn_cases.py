#!/usr/bin/python3
"""Builds the ONNX graphs for the nn per-op tests (Debian's python3-onnx + numpy).

usage: nn_cases.py OUTDIR
Writes OUTDIR/<case>.onnx and OUTDIR/<case>.in.npy for every case, OUTDIR/manifest.txt (one line per
case: name model input expected tolerance), and OUTDIR/bad/*.onnx (malformed models). The expected
outputs (<case>.out.npy) are then computed by ONNX Runtime (nn_ort_batch.mjs), not here.
Inputs are seeded random normals; odd sizes, asymmetric pads, groups and broadcasting on purpose.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261130)
CASES = []


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def init(name, arr):
    arr = np.asarray(arr)
    return numpy_helper.from_array(arr.astype(np.int64 if arr.dtype.kind in "iu" else np.float32), name)


class G:
    """Tiny graph builder: one float input 'x', one output."""

    def __init__(self, name, in_shape, opset=13):
        self.name, self.in_shape, self.opset = name, list(in_shape), opset
        self.nodes, self.inits, self.k = [], [], 0

    def t(self, prefix="t"):
        self.k += 1
        return f"{prefix}{self.k}"

    def const(self, arr, prefix="c"):
        n = self.t(prefix)
        self.inits.append(init(n, arr))
        return n

    def op(self, op_type, inputs, **attrs):
        out = self.t(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.k}", **attrs))
        return out

    def conv(self, x, cin, cout, k=(3, 3), group=1, bias=True, **attrs):
        w = self.const(rand(cout, cin // group, *k, scale=1.0 / np.sqrt(cin // group * k[0] * k[1])), "w")
        ins = [x, w] + ([self.const(rand(cout, scale=0.1), "b")] if bias else [])
        return self.op("Conv", ins, kernel_shape=list(k), group=group, **attrs)

    def bn(self, x, c):
        ins = [x, self.const(RNG.uniform(0.5, 1.5, c)), self.const(rand(c, scale=0.1)),
               self.const(rand(c, scale=0.1)), self.const(RNG.uniform(0.5, 1.5, c))]
        return self.op("BatchNormalization", ins, epsilon=1e-3)

    def save(self, outdir, out, tol=1e-4, batch_dim=None, out_shape=None, check=True):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + self.in_shape[1:])
        graph = helper.make_graph(self.nodes, self.name, [x], [], initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="nn_cases.py")
        model.ir_version = 8 if check else 9
        inferred = onnx.shape_inference.infer_shapes(model) if check else model  # the output's shape, for a checker-valid graph
        vi = [v for v in inferred.graph.value_info if v.name == out]
        if out_shape:  # shapes computed by shape arithmetic: onnx's inference cannot follow them
            vi = [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)]
        if not vi:
            raise SystemExit(f"{self.name}: no inferred shape for {out}")
        model.graph.output.append(vi[0])
        if check:  # (Debian's onnx 1.12 knows opsets up to 17)
            onnx.checker.check_model(model)
        onnx.save(model, os.path.join(outdir, f"{self.name}.onnx"))
        np.save(os.path.join(outdir, f"{self.name}.in.npy"), rand(*self.in_shape))
        CASES.append((self.name, tol))


def build_cases(d):
    # ---- Conv: groups, depthwise, asymmetric pads, strides, dilations, bias, auto_pad
    g = G("conv_basic", [2, 3, 11, 13]); g.save(d, g.conv("x", 3, 8, pads=[1, 1, 1, 1]))
    g = G("conv_asym_pads_stride2", [2, 4, 10, 10])
    g.save(d, g.conv("x", 4, 16, bias=False, pads=[0, 0, 1, 1], strides=[2, 2]))
    g = G("conv_group2_rect_dilated", [2, 8, 12, 9])
    g.save(d, g.conv("x", 8, 6, k=(3, 2), group=2, pads=[1, 0, 2, 1], dilations=[2, 1]))
    g = G("conv_depthwise_s2", [3, 16, 15, 15]); g.save(d, g.conv("x", 16, 16, group=16, pads=[1, 1, 1, 1], strides=[2, 2]))
    g = G("conv_depthwise_mult2", [2, 8, 9, 7]); g.save(d, g.conv("x", 8, 16, group=8, pads=[0, 1, 2, 1]))
    g = G("conv_1x1_s2", [2, 24, 9, 9]); g.save(d, g.conv("x", 24, 40, k=(1, 1), strides=[2, 2]))
    g = G("conv_same_upper_s2", [2, 5, 9, 10]); g.save(d, g.conv("x", 5, 7, auto_pad="SAME_UPPER", strides=[2, 2]))
    g = G("conv_same_lower", [2, 5, 8, 7]); g.save(d, g.conv("x", 5, 7, k=(4, 4), auto_pad="SAME_LOWER"))
    g = G("conv_valid_5x5_dil2", [2, 3, 17, 16]); g.save(d, g.conv("x", 3, 5, k=(5, 5), auto_pad="VALID", dilations=[2, 2]))
    # ---- int8 separable pairs (ftl:separable_int8): ReLU -> 3x3 depthwise -> 1x1, channel counts off the
    # vector widths, rows shorter than the kernel's 12-pixel block, a residual sum; and pairs it leaves alone
    # (a signed depthwise input, a stride-2 depthwise)
    g = G("separable_pairs", [2, 20, 5, 7])
    p1 = g.op("Relu", [g.conv(g.conv(g.op("Relu", ["x"]), 20, 20, group=20, pads=[1, 1, 1, 1], bias=False), 20, 33, k=(1, 1))])
    g.save(d, g.conv(g.conv(p1, 33, 33, group=33, pads=[1, 1, 1, 1], bias=False), 33, 17, k=(1, 1)))
    g = G("separable_residual", [3, 24, 9, 4])
    dw = g.conv(g.op("Relu", ["x"]), 24, 24, group=24, pads=[1, 1, 1, 1], bias=False)
    g.save(d, g.op("Add", [g.conv(dw, 24, 24, k=(1, 1)), "x"]))
    g = G("separable_inverted_residual", [2, 16, 7, 11])  # MobileNetV2: ReLU6 depthwise (u8 between), linear 1x1 + x
    relu6 = lambda t: g.op("Clip", [t, g.const(np.array(0.0, np.float32)), g.const(np.array(6.0, np.float32))])
    e = relu6(g.conv("x", 16, 48, k=(1, 1)))
    g.save(d, g.op("Add", [g.conv(relu6(g.conv(e, 48, 48, group=48, pads=[1, 1, 1, 1])), 48, 16, k=(1, 1)), "x"]))
    # a pair whose f32 1x1 output only a 3x3 stride-2 MaxPool reads (ftl:separable_int8+max_pool): Xception's
    # entry-flow block (padding 1, odd and even sizes, the pool + a strided 1x1 shortcut), and one image
    # whose pooled rows the kernel splits into bands, padded at the end only (TF's 'same' on even sizes)
    g = G("separable_pool", [2, 20, 13, 10])
    p1 = g.op("Relu", [g.conv(g.conv(g.op("Relu", ["x"]), 20, 20, group=20, pads=[1, 1, 1, 1], bias=False), 20, 24, k=(1, 1))])
    p2 = g.conv(g.conv(p1, 24, 24, group=24, pads=[1, 1, 1, 1], bias=False), 24, 33, k=(1, 1))
    pooled = g.op("MaxPool", [p2], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.save(d, g.op("Add", [pooled, g.conv("x", 20, 33, k=(1, 1), strides=[2, 2])]))
    g = G("separable_pool_one_image", [1, 16, 8, 19])
    p1 = g.conv(g.conv(g.op("Relu", ["x"]), 16, 16, group=16, pads=[1, 1, 1, 1], bias=False), 16, 20, k=(1, 1))
    g.save(d, g.op("MaxPool", [p1], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]))
    # a signed depthwise input (the graph's input: s8), then a stride-2 pair padded 1 all round on odd sizes
    g = G("separable_signed_then_stride2", [2, 16, 7, 9])
    p1 = g.op("Relu", [g.conv(g.conv("x", 16, 16, group=16, pads=[1, 1, 1, 1], bias=False), 16, 24, k=(1, 1))])
    g.save(d, g.conv(g.conv(p1, 24, 24, group=24, pads=[1, 1, 1, 1], strides=[2, 2], bias=False), 24, 8, k=(1, 1)))
    # the MobileNets' downsampling pair: TF SAME padding (0 before, 1 after), a ReLU6 depthwise, a linear 1x1
    g = G("separable_stride2_same", [2, 24, 10, 14])
    dw = g.op("Clip", [g.conv(g.op("Relu", ["x"]), 24, 24, group=24, pads=[0, 0, 1, 1], strides=[2, 2], bias=False),
                       g.const(np.array(0.0, np.float32)), g.const(np.array(6.0, np.float32))])
    g.save(d, g.conv(dw, 24, 20, k=(1, 1)))
    # Xception's block boundary: the residual stream (f32, signed) read by a ReLU into a pair (u8) and by the
    # stride-2 shortcut (s8), which adds the pair's pooled output
    g = G("separable_block_boundary", [2, 16, 9, 9])
    t = g.op("Add", [g.conv("x", 16, 16, k=(1, 1)), "x"])
    p1 = g.conv(g.conv(g.op("Relu", [t]), 16, 16, group=16, pads=[1, 1, 1, 1], bias=False), 16, 24, k=(1, 1))
    pooled = g.op("MaxPool", [p1], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.save(d, g.op("Add", [pooled, g.conv(t, 16, 24, k=(1, 1), strides=[2, 2])]))
    # ---- BatchNormalization: folded into a conv, and alone (becomes a 1x1 depthwise conv)
    g = G("conv_bn_relu", [2, 6, 10, 11]); g.save(d, g.op("Relu", [g.bn(g.conv("x", 6, 12, bias=False, pads=[1, 1, 1, 1]), 12)]))
    g = G("conv_bias_bn", [2, 6, 7, 7]); g.save(d, g.bn(g.conv("x", 6, 12, k=(1, 1)), 12))
    g = G("bn_alone", [2, 5, 6, 7]); g.save(d, g.bn("x", 5))
    # ---- activations: alone (eltwise primitive) and after a conv (fused post-op)
    acts = [("relu", "Relu", [], {}, 13), ("leakyrelu", "LeakyRelu", [], {"alpha": 0.1}, 13),
            ("sigmoid", "Sigmoid", [], {}, 13), ("tanh", "Tanh", [], {}, 13),
            ("hardsigmoid", "HardSigmoid", [], {"alpha": 0.3, "beta": 0.4}, 13), ("hardswish", "HardSwish", [], {}, 14),
            ("clip06", "Clip", [0.0, 6.0], {}, 13), ("clip_min_only", "Clip", [-0.5], {}, 13)]
    for name, op, clip, attrs, opset in acts:
        for fused in (False, True):
            g = G(f"act_{name}_{'fused' if fused else 'alone'}", [2, 5, 9, 8], opset=opset)
            x = g.conv("x", 5, 6, pads=[1, 1, 1, 1]) if fused else "x"
            g.save(d, g.op(op, [x] + [g.const(np.array(v, np.float32)) for v in clip], **attrs))
    g = G("clip_attrs_opset10", [2, 3, 5, 5], opset=10)
    g.save(d, g.op("Clip", [g.conv("x", 3, 4)], min=-0.2, max=0.3))
    # ---- binary ops and broadcasting
    g = G("add_residual_relu", [2, 8, 9, 9])  # ResNet: relu(bn(conv(x)) + x): sum post-op
    g.save(d, g.op("Relu", [g.op("Add", [g.bn(g.conv("x", 8, 8, pads=[1, 1, 1, 1], bias=False), 8), "x"])]))
    # Winograd (ftl's default for fp32 3x3 stride-1 convs with >= 64 channels): with the residual
    # sum and ReLU post-ops, odd sizes that do not fill the 4x4 output tiles, and no padding (sizes
    # large enough for the per-run pixel rule in cpu_plan.c to pick Winograd at the whole batch)
    g = G("conv_winograd_64ch_residual", [2, 64, 13, 11])
    g.save(d, g.op("Relu", [g.op("Add", [g.bn(g.conv("x", 64, 64, pads=[1, 1, 1, 1], bias=False), 64), "x"])]))
    g = G("conv_winograd_80to96_odd", [3, 80, 9, 11]); g.save(d, g.conv("x", 80, 96, pads=[1, 1, 1, 1]))
    g = G("conv_winograd_64ch_valid", [2, 64, 12, 12]); g.save(d, g.op("Relu", [g.conv("x", 64, 128)]))
    g = G("add_two_convs", [2, 6, 7, 9])  # Xception-style: conv + conv shortcut
    a = g.conv("x", 6, 10, pads=[1, 1, 1, 1]); b = g.conv("x", 6, 10, k=(1, 1))
    g.save(d, g.op("Add", [a, b]))
    g = G("add_summand_reused", [2, 4, 6, 6])  # the summand is read again after the add: no in-place
    r = g.op("Relu", ["x"]); s = g.op("Add", [g.conv(r, 4, 4, pads=[1, 1, 1, 1]), r])
    g.save(d, g.op("Concat", [s, r], axis=1))
    g = G("mul_squeeze_excite", [2, 12, 7, 5])
    gap = g.op("GlobalAveragePool", ["x"])
    se = g.op("Sigmoid", [g.conv(g.op("Relu", [g.conv(gap, 12, 3, k=(1, 1))]), 3, 12, k=(1, 1))])
    g.save(d, g.op("Mul", ["x", se]))
    g = G("mul_broadcast_first", [2, 6, 5, 5])  # the broadcast operand first: swapped
    g.save(d, g.op("Mul", [g.op("GlobalAveragePool", ["x"]), "x"]))
    g = G("add_const_per_channel", [2, 6, 5, 4]); g.save(d, g.op("Add", ["x", g.const(rand(6, 1, 1))]))
    g = G("mul_const_scalar_relu", [2, 3, 5, 4]); g.save(d, g.op("Relu", [g.op("Mul", [g.conv("x", 3, 5), g.const(np.float32(0.7))])]))
    g = G("sub_const_minus_x", [2, 4, 3, 5]); g.save(d, g.op("Sub", [g.const(rand(1, 4, 1, 1)), "x"]))
    g = G("sub_x_minus_const", [2, 4, 3, 5]); g.save(d, g.op("Sub", ["x", g.const(rand(4, 3, 5))]))
    g = G("div_const", [2, 4, 3, 5]); g.save(d, g.op("Div", ["x", g.const(RNG.uniform(0.5, 2, (1, 4, 1, 1)))]))
    g = G("hardswish_mul_pattern", [2, 4, 6, 6])  # opset-13 exports of hardswish: x * HardSigmoid(x)
    g.save(d, g.op("Mul", ["x", g.op("HardSigmoid", ["x"], alpha=1 / 6, beta=0.5)]))
    # ---- pooling (padded cells never win a max: inputs are shifted negative)
    neg = lambda g: g.op("Add", ["x", g.const(np.float32(-3.0))])
    g = G("maxpool_3x3_s2_p1", [2, 5, 13, 12]); g.save(d, g.op("MaxPool", [neg(g)], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    g = G("maxpool_asym_pads", [2, 5, 10, 10]); g.save(d, g.op("MaxPool", [neg(g)], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]))
    g = G("maxpool_ceil", [2, 3, 10, 11]); g.save(d, g.op("MaxPool", [neg(g)], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    g = G("maxpool_dilated", [2, 3, 11, 11]); g.save(d, g.op("MaxPool", ["x"], kernel_shape=[3, 2], dilations=[2, 2], pads=[1, 1, 2, 0]))
    g = G("maxpool_same_upper", [2, 3, 9, 8]); g.save(d, g.op("MaxPool", [neg(g)], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"))
    # after a convolution a MaxPool reads the conv layout (channels-last or nChw8c/16c): ftl's own loop
    # on AVX2 CPUs (test_nn_max_pool.c also runs these in the blocked layout and against oneDNN's pooling)
    g = G("maxpool_after_conv_3x3_s2_p1", [2, 3, 15, 13])
    g.save(d, g.op("MaxPool", [g.conv("x", 3, 24, pads=[1, 1, 1, 1])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    g = G("maxpool_after_conv_ceil_dilated", [1, 3, 12, 11])
    g.save(d, g.op("MaxPool", [g.conv("x", 3, 16, pads=[1, 1, 1, 1])], kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 1],
                   pads=[1, 0, 2, 1], ceil_mode=1))
    g = G("maxpool_after_conv_20ch_k2", [3, 3, 9, 10])
    g.save(d, g.op("MaxPool", [g.conv("x", 3, 20)], kernel_shape=[2, 2], strides=[2, 2]))
    # the conv layouts' slow paths (test_nn_layouts.c runs these channels-last and blocked, no scalar kernel):
    # a channel concat of two convs read by a MaxPool (SqueezeNet's fire module, GoogLeNet's inception)
    g = G("layout_concat_convs_maxpool", [2, 3, 11, 13])
    cat = g.op("Concat", [g.conv("x", 3, 16, pads=[1, 1, 1, 1]), g.conv("x", 3, 8, k=(1, 1))], axis=1)
    g.save(d, g.op("MaxPool", [cat], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    # a 3-channel 11x11 stride-4 conv (oneDNN runs it as a GEMM into plain NCHW) then a MaxPool (AlexNet)
    g = G("layout_gemm_conv_maxpool", [2, 3, 39, 41])
    g.save(d, g.op("MaxPool", [g.op("Relu", [g.conv("x", 3, 16, k=(11, 11), strides=[4, 4], pads=[2, 2, 2, 2])])],
                   kernel_shape=[3, 3], strides=[2, 2]))
    # squeeze-and-excitation after a conv: the per-channel gate multiplies a blocked tensor (EfficientNet)
    g = G("layout_conv_squeeze_excite", [2, 3, 9, 10])
    c = g.op("Relu", [g.conv("x", 3, 24, pads=[1, 1, 1, 1])])
    gate = g.op("Sigmoid", [g.conv(g.op("Relu", [g.conv(g.op("GlobalAveragePool", [c]), 24, 8, k=(1, 1))]), 8, 24, k=(1, 1))])
    g.save(d, g.op("Mul", [c, gate]))
    # a CNN whose classifier ends in a softmax over [N, classes]: still an image CNN (blocked on AVX2 CPUs)
    g = G("layout_cnn_softmax_head", [2, 3, 8, 9])
    f = g.op("Flatten", [g.op("GlobalAveragePool", [g.op("Relu", [g.conv("x", 3, 16, pads=[1, 1, 1, 1])])])])
    g.save(d, g.op("Softmax", [g.op("Gemm", [f, g.const(rand(5, 16, scale=0.3)), g.const(rand(5, scale=0.1))], transB=1)],
                   axis=1))
    # SiLU as exporters write it, x * Sigmoid(x): fused into the conv before it (a swish post-op), the
    # operands in either order; a sigmoid read twice stays two ops (test_nn_fusions.c counts the steps)
    g = G("silu_after_conv", [2, 3, 9, 10])
    c = g.conv("x", 3, 16, pads=[1, 1, 1, 1])
    s = g.op("Mul", [g.op("Sigmoid", [c]), c])
    t = g.conv(s, 16, 8, k=(1, 1))
    g.save(d, g.op("Mul", [t, g.op("Sigmoid", [t])]))
    g = G("silu_sigmoid_shared", [2, 4, 6, 7])
    sg = g.op("Sigmoid", ["x"])
    g.save(d, g.op("Add", [g.op("Mul", ["x", sg]), sg]))
    g = G("avgpool_exclude_pad", [2, 4, 9, 10]); g.save(d, g.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2]))
    g = G("avgpool_include_pad", [2, 4, 9, 10]); g.save(d, g.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1))
    g = G("avgpool_ceil", [2, 4, 10, 10]); g.save(d, g.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    g = G("avgpool_ceil_include_pad", [2, 4, 6, 9])  # the last windows pass the padding: ORT does not count that part
    g.save(d, g.op("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1, count_include_pad=1))
    g = G("avgpool_ceil_include_nopad", [2, 3, 6, 7])
    g.save(d, g.op("AveragePool", ["x"], kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1, count_include_pad=1))
    g = G("gap", [2, 7, 5, 6]); g.save(d, g.op("GlobalAveragePool", [g.conv("x", 7, 9)]))
    g = G("gmp", [2, 7, 5, 6]); g.save(d, g.op("GlobalMaxPool", ["x"]))
    g = G("reducemean_hw_keep", [2, 6, 5, 7]); g.save(d, g.op("ReduceMean", [g.conv("x", 6, 8)], axes=[2, 3], keepdims=1))
    g = G("reducemean_hw_nokeep", [2, 6, 5, 7]); g.save(d, g.op("ReduceMean", [g.conv("x", 6, 8)], axes=[-1, -2], keepdims=0))
    # ---- shape ops on blocked layouts (after a conv)
    g = G("flatten_axis1", [2, 3, 4, 5]); g.save(d, g.op("Flatten", [g.conv("x", 3, 5, pads=[1, 1, 1, 1])], axis=1))
    g = G("flatten_axis2_reshape", [2, 3, 4, 5])  # Flatten(axis=2) mixes the batch into rows; Reshape restores it
    g.save(d, g.op("Reshape", [g.op("Flatten", [g.conv("x", 3, 5)], axis=2), g.const(np.array([-1, 30], np.int64))]))
    g = G("reshape_0_minus1", [2, 3, 4, 5]); g.save(d, g.op("Reshape", [g.conv("x", 3, 6), g.const(np.array([0, -1, 4], np.int64))]))
    g = G("squeeze_unsqueeze", [2, 6, 4, 4])
    s = g.op("Squeeze", [g.op("GlobalAveragePool", [g.conv("x", 6, 8)]), g.const(np.array([2, 3], np.int64))])
    g.save(d, g.op("Unsqueeze", [s, g.const(np.array([1], np.int64))]))
    g = G("squeeze_opset11_attr", [2, 6, 4, 4], opset=11)
    g.save(d, g.op("Squeeze", [g.op("GlobalMaxPool", ["x"])], axes=[3, 2]))
    g = G("concat_channels_odd", [2, 4, 7, 6])
    g.save(d, g.op("Concat", [g.conv("x", 4, 5, pads=[1, 1, 1, 1]), g.conv("x", 4, 7, k=(1, 1)), "x"], axis=1))
    g = G("concat_axis2", [2, 3, 4, 5]); g.save(d, g.op("Concat", [g.conv("x", 3, 3, pads=[1, 1, 1, 1]), "x"], axis=2))
    # DenseNet-style: more inputs than one oneDNN concat takes (33: a chain of partial concats)
    g = G("concat_33_inputs", [2, 3, 5, 6])
    g.save(d, g.op("Concat", [g.conv("x", 3, 1 + k % 3, k=(1, 1)) for k in range(32)] + ["x"], axis=1))
    g = G("transpose_nhwc_input", [2, 9, 7, 3])  # a channels-last input adapter
    g.save(d, g.conv(g.op("Transpose", ["x"], perm=[0, 3, 1, 2]), 3, 8, pads=[1, 1, 1, 1]))
    g = G("transpose_to_nhwc", [2, 3, 5, 4]); g.save(d, g.op("Transpose", [g.conv("x", 3, 6)], perm=[0, 2, 3, 1]))
    g = G("pad_zero_folded", [2, 4, 8, 9])
    g.save(d, g.conv(g.op("Pad", ["x", g.const(np.array([0, 0, 1, 0, 0, 0, 2, 1], np.int64))]), 4, 6, strides=[2, 2]))
    g = G("pad_value", [2, 4, 5, 6])
    g.save(d, g.op("Pad", [g.conv("x", 4, 3), g.const(np.array([0, 0, 2, 1, 0, 1, 0, 3], np.int64)), g.const(np.float32(0.5))]))
    g = G("pad_negative_crop", [2, 3, 8, 8]); g.save(d, g.op("Pad", ["x", g.const(np.array([0, 0, -1, 2, 0, 0, 1, -2], np.int64))]))
    g = G("pad_empty", [2, 3, 6, 6])  # pads of nothing (Swin's to a window multiple): dropped, mid-graph and as the output
    none = np.zeros(8, np.int64)
    g.save(d, g.op("Pad", [g.op("Relu", [g.op("Pad", [g.conv("x", 3, 4), g.const(none)])]), g.const(none)]))
    g = G("identity_dropout", [2, 3, 6, 6])
    g.save(d, g.op("Dropout", [g.op("Identity", [g.conv("x", 3, 4)])]))
    # ---- shape arithmetic folded at load (what exporters write for a dynamic batch)
    g = G("fold_shape_reshape_slice", [2, 6, 4, 5])
    y = g.conv("x", 6, 6, pads=[1, 1, 1, 1])
    s = g.op("Shape", [y])
    n, c = g.op("Gather", [s, g.const(np.int64(0))], axis=0), g.op("Gather", [s, g.const(np.int64(1))], axis=0)
    hw = g.op("Mul", [g.op("Gather", [s, g.const(np.int64(2))], axis=0), g.op("Gather", [s, g.const(np.int64(3))], axis=0)])
    half = g.op("Div", [c, g.const(np.int64(2))])
    un = lambda v: g.op("Unsqueeze", [v, g.const(np.array([0], np.int64))])
    shape5 = g.op("Concat", [un(n), g.const(np.array([2], np.int64)), un(half), un(hw)], axis=0)
    shuffled = g.op("Transpose", [g.op("Reshape", [y, shape5])], perm=[0, 2, 1, 3])
    back = g.op("Reshape", [shuffled, g.op("Shape", [y])])
    tail = g.op("Slice", [back, un(half), g.const(np.array([2**62], np.int64)), g.const(np.array([1], np.int64))])
    g.save(d, g.op("Concat", [tail, g.op("Slice", [back, g.const(np.array([0], np.int64)), un(half),
                                                       g.const(np.array([1], np.int64))])], axis=1),
           out_shape=["N", 6, 4, 5])
    g = G("fold_mask_from_range", [2, 3, 4, 5])
    r = g.op("Range", [g.const(np.int64(0)), g.const(np.int64(5)), g.const(np.int64(1))])
    odd = g.op("Not", [g.op("Equal", [g.op("Mod", [r, g.const(np.int64(2))]), g.const(np.int64(0))])])
    w = g.op("Where", [odd, g.const(np.float32(-1.0)), g.op("Cast", [r], to=TensorProto.FLOAT)])
    base = g.op("ConstantOfShape", [g.const(np.array([1, 1, 1, 5], np.int64))],
                value=numpy_helper.from_array(np.array([0.5], np.float32)))
    mask = g.op("Expand", [g.op("Add", [base, g.op("Reshape", [w, g.const(np.array([1, 1, 1, 5], np.int64))])]),
                           g.const(np.array([1, 3, 1, 5], np.int64))])
    g.save(d, g.op("Add", [g.conv("x", 3, 3, pads=[1, 1, 1, 1]), mask]))
    # ---- transformer ops
    g = G("layernorm_decomposed_gelu", [2, 3, 8, 8])
    t = g.op("Transpose", [g.op("Reshape", [g.conv("x", 3, 16, k=(4, 4), strides=[4, 4]),
                                             g.const(np.array([0, 16, 4], np.int64))])], perm=[0, 2, 1])  # [N,4,16]
    mu = g.op("ReduceMean", [t], axes=[-1])
    dev = g.op("Sub", [t, mu])
    var = g.op("ReduceMean", [g.op("Pow", [dev, g.const(np.float32(2.0))])], axes=[-1])
    ln = g.op("Add", [g.op("Mul", [g.op("Div", [dev, g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(1e-6))])])]),
                                   g.const(RNG.uniform(0.5, 1.5, 16).astype(np.float32))]), g.const(rand(16, scale=0.1))])
    h = g.op("MatMul", [ln, g.const(rand(16, 24, scale=0.25))])
    gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [g.op("Erf", [g.op("Div", [h, g.const(np.float32(1.4142135381698608))])]),
                                                     g.const(np.float32(1.0))])]), g.const(np.float32(0.5))])
    g.save(d, gelu)
    # GELU's tanh approximation as torch.onnx decomposes nn.GELU(approximate="tanh") at opset 13 (the optimiser
    # fuses it into one gelu_tanh; ONNX's own Gelu op needs opset 20)
    g = G("gelu_tanh_decomposed", [2, 4, 5, 5])
    h = g.conv("x", 4, 6, pads=[1, 1, 1, 1])
    cube = g.op("Mul", [h, g.op("Mul", [h, h])])
    inner = g.op("Mul", [g.const(np.float32(0.7978845834732056)), g.op("Add", [h, g.op("Mul", [g.const(np.float32(0.044715)), cube])])])
    g.save(d, g.op("Mul", [g.const(np.float32(0.5)), g.op("Mul", [h, g.op("Add", [g.const(np.float32(1.0)), g.op("Tanh", [inner])])])]))
    g = G("attention_batch_moved", [2, 3, 8, 8])
    tok = g.op("Reshape", [g.conv("x", 3, 8, k=(2, 2), strides=[2, 2]), g.const(np.array([0, 8, 16], np.int64))])
    tok = g.op("Transpose", [tok], perm=[2, 0, 1])  # [16, N, 8]: the batch axis moved, as torch's attention does
    q = g.op("Reshape", [g.op("MatMul", [tok, g.const(rand(8, 8, scale=0.3))]), g.const(np.array([16, -1, 4], np.int64))])
    k = g.op("Reshape", [g.op("MatMul", [tok, g.const(rand(8, 8, scale=0.3))]), g.const(np.array([16, -1, 4], np.int64))])
    v = g.op("Reshape", [g.op("MatMul", [tok, g.const(rand(8, 8, scale=0.3))]), g.const(np.array([16, -1, 4], np.int64))])
    qh, kh, vh = (g.op("Transpose", [t], perm=[1, 0, 2]) for t in (q, k, v))  # [N*2, 16, 4]
    scores = g.op("Softmax", [g.op("Div", [g.op("MatMul", [qh, g.op("Transpose", [kh], perm=[0, 2, 1])]),
                                           g.const(np.float32(2.0))])], axis=-1)
    ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [scores, vh])], perm=[1, 0, 2]),
                           g.const(np.array([16, -1, 8], np.int64))])
    g.save(d, g.op("Transpose", [ctx], perm=[1, 0, 2]))
    # Swin's window layout, [N x 16 windows, 16 tokens, C], around a wide layer: with a small cache budget the
    # wide products run 2 images (32 windows) at a time and the rest 8, the boundary cutting windowed tensors
    # (tests/unit/test_nn_torchvision.c); the Transpose moving the batch axis after them keeps the size up to
    # the Add that brings the images back outermost
    g = G("windows_micro_batches", [8, 4, 16, 16])
    t = g.op("Transpose", [g.conv("x", 4, 8, pads=[1, 1, 1, 1])], perm=[0, 2, 3, 1])  # [N,16,16,8]
    win = g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [t, g.const(np.array([-1, 4, 4, 4, 4, 8], np.int64))])],
                                perm=[0, 1, 3, 2, 4, 5]), g.const(np.array([-1, 16, 8], np.int64))])  # [N*16,16,8]
    wide = g.op("Relu", [g.op("MatMul", [win, g.const(rand(8, 256, scale=0.3))])])
    moved = g.op("Transpose", [g.op("MatMul", [wide, g.const(rand(256, 8, scale=0.06))])], perm=[1, 0, 2])  # [16,N*16,8]
    back = g.op("Add", [g.op("Transpose", [g.op("Softmax", [moved], axis=-1)], perm=[1, 0, 2]), win])
    back = g.op("Mul", [back, g.const(rand(16, 8))])
    img = g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [back, g.const(np.array([-1, 4, 4, 4, 4, 8], np.int64))])],
                                perm=[0, 1, 3, 2, 4, 5]), g.const(np.array([-1, 16, 16, 8], np.int64))])
    g.save(d, g.op("ReduceMean", [img], axes=[1, 2], keepdims=0))
    # Swin's shifted windows: torch.roll as Slice + Concat per axis, the window partition (Reshape, Transpose,
    # Reshape), a product per token, then back and the residual; ftl copies each direction once (cpu_movement_fusion.c)
    g = G("roll_window_partition", [2, 6, 8, 8])
    x = g.op("Transpose", [g.conv("x", 6, 16, pads=[1, 1, 1, 1])], perm=[0, 2, 3, 1])  # [N,8,8,16]

    def roll(t, shift):
        for axis in (1, 2):
            a = g.op("Slice", [t, g.const(np.array([shift % 8], np.int64)), g.const(np.array([8], np.int64)),
                               g.const(np.array([axis], np.int64))])
            b = g.op("Slice", [t, g.const(np.array([0], np.int64)), g.const(np.array([shift % 8], np.int64)),
                               g.const(np.array([axis], np.int64))])
            t = g.op("Concat", [a, b], axis=axis)
        return t

    def windows(t, shape, out):  # [N,2,4,2,4,16] <-> windows
        return g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [t, g.const(np.array(shape, np.int64))])],
                                     perm=[0, 1, 3, 2, 4, 5]), g.const(np.array(out, np.int64))])
    win = windows(roll(x, 2), [-1, 2, 4, 2, 4, 16], [-1, 16, 16])  # [N*4, 16 tokens, 16]
    y = g.op("MatMul", [win, g.const(rand(16, 16, scale=0.25))])
    back = roll(windows(y, [-1, 2, 2, 4, 4, 16], [-1, 8, 8, 16]), -2)
    g.save(d, g.op("ReduceMean", [g.op("Add", [back, x])], axes=[1, 2], keepdims=0))
    # Swin's patch merging: the 2 x 2 neighbours of each pixel side by side on the channels, as torchvision
    # exports it (rows every second from 0 and 1, then columns, four Slices with step 2 into one Concat), then
    # its product; ftl copies the Slices and the Concat at once (cpu_movement_fusion.c)
    g = G("patch_merging", [2, 6, 8, 8])
    x = g.op("MatMul", [g.op("Transpose", [g.conv("x", 6, 16, pads=[1, 1, 1, 1])], perm=[0, 2, 3, 1]),
                        g.const(rand(16, 16, scale=0.25))])  # [N,8,8,16] channels last, as Swin's layer norm writes

    def every_second(t, start, axis):
        return g.op("Slice", [t, g.const(np.array([start], np.int64)), g.const(np.array([8], np.int64)),
                              g.const(np.array([axis], np.int64)), g.const(np.array([2], np.int64))])
    rows = [every_second(x, s, 1) for s in (0, 1)]
    parts = [every_second(rows[r], c, 2) for r, c in ((0, 0), (1, 0), (0, 1), (1, 1))]
    merged = g.op("Concat", parts, axis=-1)  # [N,4,4,64]
    g.save(d, g.op("ReduceMean", [g.op("MatMul", [merged, g.const(rand(64, 32, scale=0.2))])], axes=[1, 2], keepdims=0))
    g = G("class_token_concat_gather", [2, 3, 8, 8])
    tok = g.op("Transpose", [g.op("Reshape", [g.conv("x", 3, 6, k=(4, 4), strides=[4, 4]),
                                               g.const(np.array([0, 6, 4], np.int64))])], perm=[0, 2, 1])  # [N,4,6]
    n = g.op("Gather", [g.op("Shape", ["x"]), g.const(np.int64(0))], axis=0)
    shape = g.op("Concat", [g.op("Unsqueeze", [n, g.const(np.array([0], np.int64))]), g.const(np.array([1, 6], np.int64))], axis=0)
    cls = g.op("Expand", [g.const(rand(1, 1, 6)), shape])
    seq = g.op("Add", [g.op("Concat", [cls, tok], axis=1), g.const(rand(1, 5, 6, scale=0.1))])
    g.save(d, g.op("Softmax", [g.op("Gather", [seq, g.const(np.int64(0))], axis=1)], axis=1))
    g = G("matmul_broadcast_batch", [2, 4, 6, 5])
    a = g.op("Relu", [g.conv("x", 4, 4, pads=[1, 1, 1, 1])])  # [N,4,6,5]
    b = g.op("Sigmoid", [g.op("Transpose", [g.op("ReduceMean", [a], axes=[1], keepdims=1)], perm=[0, 1, 3, 2])])  # [N,1,5,6]
    g.save(d, g.op("MatMul", [a, b]))
    # ---- Split (sizes as an input at opset 13; equal parts, and sizes as an attribute, at opset 11) and Einsum
    # in the batched-matmul forms MaxViT's attention uses (B transposed; batch letters reordered)
    for name, opset, attrs, extra in (("split_sizes_input", 13, {"axis": 1}, [np.array([1, 2, 3], np.int64)]),
                                      ("split_equal_opset11", 11, {"axis": 1}, []),
                                      ("split_attribute_opset11", 11, {"axis": 3, "split": [3, 3, 1]}, [])):
        g = G(name, [2, 6, 5, 7], opset=opset)
        c = g.op("Relu", [g.conv("x", 6, 6, pads=[1, 1, 1, 1])])
        parts = [g.t("part") for _ in range(3)]
        g.nodes.append(helper.make_node("Split", [c] + [g.const(e) for e in extra], parts, name=f"Split_{g.k}", **attrs))
        axis = attrs["axis"]
        g.save(d, g.op("Concat", [g.op("Sigmoid", [parts[2]]), parts[0], g.op("Relu", [parts[1]])],
                       axis=axis))
    g = G("einsum_key_transposed", [2, 8, 4, 5])
    q = g.op("Reshape", [g.conv("x", 8, 8, pads=[1, 1, 1, 1]), g.const(np.array([0, 2, 4, 20], np.int64))])  # [N,2,4,20]
    k = g.op("Reshape", [g.op("Tanh", [g.conv("x", 8, 8, pads=[1, 1, 1, 1])]), g.const(np.array([0, 2, 4, 20], np.int64))])
    att = g.op("Softmax", [g.op("Einsum", [q, k], equation="bhdi,bhdj->bhij")], axis=-1)  # [N,2,20,20]
    g.save(d, g.op("Einsum", [att, g.op("Transpose", [k], perm=[0, 1, 3, 2])], equation="b h i j, b h j d -> b h i d"))
    g = G("einsum_batch_letters_reordered", [2, 6, 4, 5])
    a = g.op("Reshape", [g.conv("x", 6, 6, pads=[1, 1, 1, 1]), g.const(np.array([0, 2, 3, 4, 5], np.int64))])  # [N,2,3,4,5]
    b = g.op("Reshape", [g.op("Sigmoid", ["x"]), g.const(np.array([0, 3, 2, 4, 5], np.int64))])  # [N,3,2,4,5]
    g.save(d, g.op("Einsum", [a, b], equation="bghik,bhgjk->bghij"))
    # ---- Gemm / MatMul heads
    g = G("gemm_transb_alpha_beta", [3, 8, 5, 5])
    f = g.op("Flatten", [g.op("GlobalAveragePool", [g.conv("x", 8, 12)])], axis=1)
    g.save(d, g.op("Gemm", [f, g.const(rand(10, 12)), g.const(rand(10))], transB=1, alpha=0.5, beta=2.0))
    g = G("gemm_nontrans_scalar_c_relu", [3, 6, 4, 4])
    f = g.op("Flatten", [g.op("GlobalAveragePool", ["x"])])
    g.save(d, g.op("Relu", [g.op("Gemm", [f, g.const(rand(6, 9)), g.const(np.array([0.25], np.float32))])]))
    g = G("matmul_2d", [3, 16, 1, 1]); g.save(d, g.op("MatMul", [g.op("Flatten", ["x"]), g.const(rand(16, 7))]))
    g = G("matmul_3d", [2, 5, 3, 4])
    g.save(d, g.op("MatMul", [g.op("Reshape", ["x", g.const(np.array([0, 15, 4], np.int64))]), g.const(rand(4, 6))]))
    # a transformer's linear layer: many token rows (oneDNN's matmul), bias Add and activation fused
    g = G("matmul_tokens_bias_relu", [2, 40, 4, 6])
    t = g.op("Reshape", ["x", g.const(np.array([0, 40, 24], np.int64))])
    g.save(d, g.op("Relu", [g.op("Add", [g.op("MatMul", [t, g.const(rand(24, 10))]), g.const(rand(10))])]))


def bad_models(d):
    """Malformed models: each must give a clear error, never a crash."""
    os.makedirs(d, exist_ok=True)

    def model(nodes, inits, outputs=("y",), inputs=(("x", [1, 3, 8, 8]),), opset=13):
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        g = helper.make_graph(nodes, "bad", ins, outs, initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m

    w = init("W", rand(4, 3, 3, 3))
    conv = helper.make_node("Conv", ["x", "W"], ["y"], name="conv1", kernel_shape=[3, 3])
    onnx.save(model([conv], []), f"{d}/missing_initializer.onnx")
    onnx.save(model([conv], [init("W", rand(4, 5, 3, 3))]), f"{d}/wrong_shapes.onnx")
    onnx.save(model([helper.make_node("FooBar", ["x"], ["y"], name="mystery")], []), f"{d}/unknown_op.onnx")
    onnx.save(model([helper.make_node("Conv", ["x", "W"], ["y"], name="conv1", kernel_shape=[3, 3], foo=1)], [w]),
              f"{d}/unknown_attribute.onnx")
    onnx.save(model([helper.make_node("MaxPool", ["x"], ["y"], name="pool1", kernel_shape=[2, 2], storage_order=1)], []),
              f"{d}/unsupported_attribute_value.onnx")
    cyc = [helper.make_node("Relu", ["x2"], ["x1"], name="a"), helper.make_node("Relu", ["x1"], ["x2"], name="b"),
           helper.make_node("Add", ["x", "x2"], ["y"], name="c")]
    onnx.save(model(cyc, []), f"{d}/cycle.onnx")
    onnx.save(model([helper.make_node("Relu", ["x"], ["x"], name="self")], [], outputs=("x",)), f"{d}/self_loop.onnx")
    onnx.save(model([helper.make_node("Add", ["x", "z"], ["y"], name="add")], [], inputs=(("x", [1, 3, 8, 8]), ("z", [1, 3, 8, 8]))),
              f"{d}/two_inputs.onnx")
    onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="r1"), helper.make_node("Relu", ["x"], ["y"], name="r2")], []),
              f"{d}/duplicate_output.onnx")

    def external(name, location, offset, length, data_bytes=None):
        t = init("W", rand(4, 3, 3, 3))
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        onnx.save(model([conv], [t]), f"{d}/{name}.onnx")
        if data_bytes is not None:
            with open(f"{d}/{name}.bin", "wb") as f:
                f.write(data_bytes)

    external("missing_external_file", "missing_external_file.bin", 0, 432)
    external("offset_past_end", "offset_past_end.bin", 4096, 432, b"\0" * 1000)
    external("length_past_end", "length_past_end.bin", 640, 432, b"\0" * 1000)
    external("external_escapes_folder", "../offset_past_end.bin", 0, 432)
    external("external_wrong_length", "external_wrong_length.bin", 0, 400, b"\0" * 1000)
    t = init("W", rand(4, 3, 3, 3))
    t.raw_data = t.raw_data[:100]
    onnx.save(model([conv], [t]), f"{d}/raw_data_short.onnx")
    onnx.save(model([helper.make_node("Relu", ["x"], ["y"], name="r")], [], opset=3), f"{d}/old_opset.onnx")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "dyn", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{d}/dynamic_hw.onnx")
    flat = helper.make_node("Flatten", ["x"], ["y"], name="flat2", axis=2)
    onnx.save(model([flat], []), f"{d}/batch_mixed_output.onnx")
    # a shape that does not fold: computed from the activation's values, not its shape
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
             helper.make_node("Slice", ["f", "s0", "s2", "ax1"], ["head"], name="first_two"),
             helper.make_node("Cast", ["head"], ["shape"], name="to_shape", to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_by_values")]
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s0", [0]), ("s2", [2]), ("ax1", [1]))]
    onnx.save(model(nodes, consts), f"{d}/shape_from_values.onnx")
    gather = helper.make_node("Gather", ["x", "idx"], ["y"], name="pick_channel", axis=1)
    onnx.save(model([gather], [numpy_helper.from_array(np.array([0, 2], np.int64), "idx")]), f"{d}/gather_on_activation.onnx")
    # Split sizes that do not add up to the axis (3 channels into 2 + 2)
    split = helper.make_node("Split", ["x", "sizes"], ["y", "z"], name="halves", axis=1)
    onnx.save(model([split], [numpy_helper.from_array(np.array([2, 2], np.int64), "sizes")], outputs=("y", "z")),
              f"{d}/split_sizes_mismatch.onnx")
    # Einsum forms ftl does not run: an ellipsis, a sum over an axis, a product that drops the batch axis
    for name, eq in (("einsum_ellipsis", "...ij,...jk->...ik"), ("einsum_reduces", "bcij,bcjk->bci"),
                     ("einsum_batch_moved", "bcij,bcjk->cbik")):
        e = helper.make_node("Einsum", ["x", "x"], ["y"], name="mix", equation=eq)
        onnx.save(model([e], [], inputs=(("x", [1, 3, 8, 8]),), opset=13), f"{d}/{name}.onnx")

    # crafted files that once crashed the loader (each must be a clear error naming the node or tensor):
    # a Constant whose output has no name
    onnx.save(model([helper.make_node("Constant", [], [""], name="nameless", value_int=1),
                     helper.make_node("Relu", ["x"], ["y"], name="r")], []), f"{d}/constant_without_output.onnx")
    # an initializer whose dimensions multiply past what a tensor may hold (checked before each product)
    big = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2 ** 20, 2 ** 20, 2 ** 20])
    onnx.save(model([helper.make_node("Add", ["x", "W"], ["y"], name="add_big")], [big]), f"{d}/dims_overflow.onnx")
    # INT64_MIN / -1 in folded shape arithmetic (a hardware trap in C)
    nodes = [helper.make_node("Div", ["a", "b"], ["shape"], name="div_min"),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_div")]
    consts = [numpy_helper.from_array(np.array([-2 ** 63], np.int64), "a"), numpy_helper.from_array(np.array([-1], np.int64), "b")]
    onnx.save(model(nodes, consts), f"{d}/div_int64_min.onnx")
    # a convolution with no output channels (later stages divide by the channel count)
    onnx.save(model([helper.make_node("Conv", ["x", "W"], ["y"], name="conv_empty", kernel_shape=[3, 3])],
                    [init("W", rand(0, 3, 3, 3))]), f"{d}/conv_zero_channels.onnx")
    # an axis beyond any rank that narrows to a valid one in 32 bits
    onnx.save(model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=2 ** 32 + 1)], []),
              f"{d}/concat_axis_huge.onnx")
    # external data that the unit test makes a FIFO next to a copy (reading it would block forever)
    external("external_fifo", "external_fifo.bin", 0, 432)


def resize_refs(d):
    """Pillow Image.resize(BILINEAR) of random RGB images: the reference for ftl's input resize."""
    from PIL import Image
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        for sw, sh, dw, dh in ((299, 299, 224, 224), (256, 256, 224, 224), (128, 128, 224, 224), (224, 224, 299, 299),
                               (97, 61, 13, 40), (50, 50, 50, 31), (33, 20, 7, 20)):
            src = RNG.integers(0, 256, (sh, sw, 3), dtype=np.uint8)
            dst = np.asarray(Image.fromarray(src).resize((dw, dh), Image.BILINEAR))
            name = f"{sw}x{sh}_to_{dw}x{dh}"
            src.tofile(os.path.join(d, f"{name}.src.rgb"))
            dst.tofile(os.path.join(d, f"{name}.dst.rgb"))
            f.write(f"{name} {sw} {sh} {dw} {dh}\n")


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    build_cases(outdir)
    bad_models(os.path.join(outdir, "bad"))
    resize_refs(os.path.join(outdir, "resize"))
    with open(os.path.join(outdir, "manifest.txt"), "w") as f:
        for name, tol in CASES:
            f.write(f"{name} {name}.onnx {name}.in.npy {name}.out.npy {tol}\n")
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
