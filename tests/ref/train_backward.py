#!/usr/bin/python3
"""Reference gradients for the fine-tuning training plan: small ONNX graphs covering every op the plan
differentiates, run in PyTorch (its own functional ops, an evaluator independent of ftl) with autograd.
All nodes are unfrozen (the cut is the graph input); trained parameters follow the fine-tuning rules (float
initializers of more than one value, BatchNormalization's scale and shift but not its mean and variance).

usage: train_backward.py OUTDIR
Per case C: C.onnx, C.x.npy (input), C.r.npy (d loss / d output: loss = sum(output * r)), C.y.npy (output),
C.dx.npy, and C.grad.<k>.npy for each trained parameter, named in C.params.txt (one `k NAME` per line);
cases.txt lists the case names.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


class G:
    def __init__(self, name, in_shape):
        self.name, self.in_shape, self.nodes, self.inits, self.k = name, list(in_shape), [], [], 0

    def t(self, p="t"):
        self.k += 1
        return f"{p}{self.k}"

    def const(self, arr, p="w"):
        n = self.t(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, op_type, inputs, **attrs):
        out = self.t(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.k}", **attrs))
        return out

    def conv(self, x, cin, cout, k=3, group=1, **attrs):
        w = self.const(rand(cout, cin // group, k, k, scale=1.0 / np.sqrt(cin // group * k * k)))
        return self.op("Conv", [x, w, self.const(rand(cout, scale=0.1))], kernel_shape=[k, k], group=group, **attrs)

    def bn(self, x, c):
        ins = [x, self.const(RNG.uniform(0.5, 1.5, c).astype(np.float32)), self.const(rand(c, scale=0.1)),
               self.const(rand(c, scale=0.1)), self.const(RNG.uniform(0.5, 1.5, c).astype(np.float32))]
        return self.op("BatchNormalization", ins, epsilon=1e-3)

    def model(self, out, out_shape):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + self.in_shape[1:])
        g = helper.make_graph(self.nodes, self.name, [x], [], initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], producer_name="train_backward.py")
        m.ir_version = 8
        m.graph.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N"] + out_shape))
        return m


def attrs(n):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


def run_torch(model, x, trained, start="x", dtype=torch.float64):
    """The graph evaluated with torch.nn.functional from tensor `start` = x; `trained`: initializer name -> leaf
    tensor with grad. Constants in `dtype` (float64 for the gradient cases: the reference's rounding is negligible)."""
    env = {start: x}
    consts = {}
    for t in model.graph.initializer:
        arr = numpy_helper.to_array(t).copy()
        consts[t.name] = torch.from_numpy(arr).to(dtype) if arr.dtype == np.float32 else torch.from_numpy(arr)
    get = lambda n: env[n] if n in env else trained.get(n, consts.get(n))
    for n in model.graph.node:
        a, i, op = attrs(n), list(n.input), n.op_type
        if op == "Conv":
            p = a.get("pads", [0, 0, 0, 0])
            xin = F.pad(get(i[0]), (p[1], p[3], p[0], p[2]))
            y = F.conv2d(xin, get(i[1]), get(i[2]) if len(i) > 2 else None, stride=a.get("strides", [1, 1]),
                         dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))
        elif op == "BatchNormalization":
            y = F.batch_norm(get(i[0]), get(i[3]), get(i[4]), get(i[1]), get(i[2]), False, 0.0, a.get("epsilon", 1e-5))
        elif op == "Relu":
            y = F.relu(get(i[0]))
        elif op == "LeakyRelu":
            y = F.leaky_relu(get(i[0]), a.get("alpha", 0.01))
        elif op == "Clip":
            y = torch.clamp(get(i[0]), get(i[1]).item(), get(i[2]).item())
        elif op == "Sigmoid":
            y = torch.sigmoid(get(i[0]))
        elif op == "HardSwish":
            y = F.hardswish(get(i[0]))
        elif op == "Tanh":
            y = torch.tanh(get(i[0]))
        elif op == "Add":
            y = get(i[0]) + get(i[1])
        elif op == "Mul":
            y = get(i[0]) * get(i[1])
        elif op == "MaxPool":
            p = a.get("pads", [0, 0, 0, 0])
            assert p[0] == p[2] and p[1] == p[3]
            y = F.max_pool2d(get(i[0]), a["kernel_shape"], a.get("strides", [1, 1]), (p[0], p[1]))
        elif op == "AveragePool":
            p = a.get("pads", [0, 0, 0, 0])
            assert p[0] == p[2] and p[1] == p[3]
            y = F.avg_pool2d(get(i[0]), a["kernel_shape"], a.get("strides", [1, 1]), (p[0], p[1]),
                             count_include_pad=bool(a.get("count_include_pad", 0)))
        elif op == "GlobalAveragePool":
            y = get(i[0]).mean(dim=(2, 3), keepdim=True)
        elif op == "Flatten":
            y = torch.flatten(get(i[0]), a.get("axis", 1))
        elif op == "Reshape":
            shape = [int(s) for s in get(i[1])]
            src = get(i[0])
            y = src.reshape([src.shape[k] if s == 0 else s for k, s in enumerate(shape)])
        elif op == "Concat":
            y = torch.cat([get(k) for k in i], a["axis"])
        elif op == "Gemm":
            b = get(i[1])
            y = get(i[0]) @ (b.t() if a.get("transB", 0) else b)
            if len(i) > 2:
                y = y + get(i[2])
        elif op == "MatMul":
            y = get(i[0]) @ get(i[1])
        else:
            raise SystemExit(f"no torch op for {op}")
        env[n.output[0]] = y
    return env[model.graph.output[0].name]


def cases():
    g = G("conv_depthwise_strided_asymmetric", [2, 4, 9, 9])  # depthwise, strided, asymmetric pads, dilation, Clip
    h = g.op("Clip", [g.conv("x", 4, 8, k=3, pads=[1, 1, 1, 1]), g.const(np.float32(0)), g.const(np.float32(6))])
    h = g.conv(h, 8, 8, k=3, group=8, strides=[2, 2], pads=[0, 0, 1, 1])
    h = g.op("Relu", [g.conv(h, 8, 6, k=3, group=2, dilations=[2, 2], pads=[2, 2, 2, 2])])
    yield g, g.op("Flatten", [h]), [6 * 5 * 5]
    g = G("bn_residual_layer_scale_gemm", [3, 6, 5, 5])  # BN (fixed stats), skip Add, broadcast param Add/Mul, GAP
    c = g.conv("x", 6, 6, k=1)
    h = g.op("Relu", [g.bn(g.conv(c, 6, 6, k=3, pads=[1, 1, 1, 1]), 6)])
    h = g.op("Add", [h, c])
    h = g.op("Mul", [g.op("Add", [h, g.const(rand(6, 1, 1, scale=0.1))]), g.const(rand(1, 6, 1, 1, scale=0.5))])
    f = g.op("Flatten", [g.op("GlobalAveragePool", [g.bn(h, 6)])])
    yield g, g.op("Gemm", [f, g.const(rand(5, 6, scale=0.4)), g.const(rand(5, scale=0.1))], transB=1), [5]
    g = G("pools_concat_activations", [2, 4, 8, 8])  # MaxPool, AveragePool, Concat, other activations, Gemm
    a = g.op("MaxPool", [g.op("HardSwish", [g.conv("x", 4, 4, k=3, pads=[1, 1, 1, 1])])], kernel_shape=[3, 3],
             strides=[2, 2], pads=[1, 1, 1, 1])
    b = g.op("AveragePool", [g.op("Sigmoid", [g.conv("x", 4, 3, k=1)])], kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], count_include_pad=0)
    h = g.op("Concat", [a, g.op("LeakyRelu", [b], alpha=0.2), g.op("Tanh", [g.conv("x", 4, 2, k=2, strides=[2, 2])])],
             axis=1)
    f = g.op("Flatten", [g.op("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])])
    yield g, g.op("Gemm", [f, g.const(rand(36, 7, scale=0.2)), g.const(rand(7, scale=0.1))]), [7]
    g = G("silu_squeeze_excite", [2, 4, 7, 7])  # SiLU (x * Sigmoid(x), fused into the conv) and an SE gate
    c = g.conv("x", 4, 8, k=3, pads=[1, 1, 1, 1])
    h = g.op("Mul", [c, g.op("Sigmoid", [c])])
    e = g.conv(g.op("GlobalAveragePool", [h]), 8, 2, k=1)
    gate = g.op("Sigmoid", [g.conv(g.op("Mul", [g.op("Sigmoid", [e]), e]), 2, 8, k=1)])
    yield g, g.op("Flatten", [g.op("Mul", [h, gate])]), [8 * 7 * 7]
    g = G("binary_both_broadcast", [2, 4, 3, 3])  # Add/Mul where neither operand has the output's shape
    s = g.op("GlobalAveragePool", [g.conv("x", 4, 4, k=1)])  # [N, C, 1, 1]
    a = g.op("Add", [s, g.const(rand(1, 4, 3, 3, scale=0.5))])  # + [1, C, H, W]: both broadcast
    m = g.op("Mul", [g.const(rand(4, 1, 1, scale=0.5)), g.op("Mul", [s, g.const(rand(1, 1, 3, 3, scale=0.5))])])
    h = g.op("Add", [g.op("Add", [a, m]), g.op("Relu", [g.conv("x", 4, 4, k=1)])])
    yield g, g.op("Flatten", [h]), [36]
    g = G("tokens_matmul", [2, 6, 4, 4])  # a [N, tokens, channels] MatMul with a constant weight
    t = g.op("Reshape", [g.conv("x", 6, 8, k=1), g.const(np.array([0, 8, 16], np.int64), "s")])
    t = g.op("MatMul", [t, g.const(rand(16, 5, scale=0.3))])
    yield g, g.op("Flatten", [g.op("Relu", [g.op("Add", [t, g.const(rand(5, scale=0.1))])])]), [40]


def ten_steps(out):
    """A small CNN fine-tuned for 10 SGD steps with --fine-tune-last 2: conv1 frozen, conv2 + BN + conv3 + the
    Gemm logits trained on softmax cross-entropy (mean over the batch), float32 like ftl. Writes ten_steps.onnx,
    .boundary.npy (relu(conv1(x)), the plan's input), .labels.txt, .losses.txt (the loss before each step),
    and .final.<k>.npy per trained parameter named in .params.txt."""
    g = G("ten_steps", [4, 3, 8, 8])
    b = g.op("Relu", [g.conv("x", 3, 6, k=3, pads=[1, 1, 1, 1])])
    h = g.op("Relu", [g.bn(g.conv(b, 6, 8, k=3, strides=[2, 2], pads=[1, 1, 1, 1]), 8)])
    h = g.op("Relu", [g.conv(h, 8, 8, k=3, pads=[1, 1, 1, 1])])
    f = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    y = g.op("Gemm", [f, g.const(rand(4, 8, scale=0.5)), g.const(rand(4, scale=0.1))], transB=1)
    m = g.model(y, [4])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "ten_steps.onnx"))
    base = os.path.join(out, "ten_steps")
    x = torch.from_numpy(rand(4, 3, 8, 8))
    labels = torch.tensor([0, 3, 1, 3])
    inits = {t.name: numpy_helper.to_array(t).copy() for t in m.graph.initializer}
    conv1 = m.graph.node[0]
    boundary = F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1)), torch.from_numpy(inits[conv1.input[1]]),
                               torch.from_numpy(inits[conv1.input[2]])))
    np.save(base + ".boundary.npy", boundary.numpy())
    trained = {}
    for n in m.graph.node[2:]:  # everything after conv1 and its ReLU
        for k, i in enumerate(n.input):
            if i in inits and inits[i].dtype == np.float32 and inits[i].size > 1 and not (
                    n.op_type == "BatchNormalization" and k >= 3):
                trained[i] = torch.from_numpy(inits[i].copy()).requires_grad_(True)
    opt = torch.optim.SGD(list(trained.values()), lr=0.05, momentum=0.9)
    top = helper.make_graph(m.graph.node[2:], "top", [helper.make_tensor_value_info(b, TensorProto.FLOAT, None)],
                            m.graph.output, initializer=m.graph.initializer)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        logits = run_torch(helper.make_model(top), boundary, trained, start=b, dtype=torch.float32)
        loss = F.cross_entropy(logits, labels)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    with open(base + ".labels.txt", "w") as f:
        f.write(" ".join(str(int(v)) for v in labels) + "\n")
    with open(base + ".losses.txt", "w") as f:
        f.write("\n".join(repr(v) for v in losses) + "\n")
    with open(base + ".params.txt", "w") as f:
        for k, (name, t) in enumerate(trained.items()):
            np.save(f"{base}.final.{k}.npy", t.detach().numpy())
            f.write(f"{k} {name}\n")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    names = []
    for g, y, y_shape in cases():
        m = g.model(y, y_shape)
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, f"{g.name}.onnx"))
        x = torch.from_numpy(rand(*g.in_shape)).double().requires_grad_(True)
        trained = {}
        consumers = {}
        for n in m.graph.node:
            for k, i in enumerate(n.input):
                consumers.setdefault(i, []).append((n.op_type, k))
        for t in m.graph.initializer:
            arr = numpy_helper.to_array(t)
            bn_stat = any(op == "BatchNormalization" and k >= 3 for op, k in consumers.get(t.name, []))
            if arr.dtype == np.float32 and arr.size > 1 and not bn_stat:
                trained[t.name] = torch.from_numpy(arr.copy()).double().requires_grad_(True)
        yv = run_torch(m, x, trained)
        r = torch.from_numpy(rand(*yv.shape)).double()
        (yv * r).sum().backward()
        base = os.path.join(out, g.name)
        np.save(base + ".x.npy", x.detach().float().numpy())
        np.save(base + ".r.npy", r.float().numpy())
        np.save(base + ".y.npy", yv.detach().float().numpy())
        np.save(base + ".dx.npy", x.grad.float().numpy())
        with open(base + ".params.txt", "w") as f:
            for k, (name, tns) in enumerate(trained.items()):
                np.save(f"{base}.grad.{k}.npy", tns.grad.float().numpy())
                f.write(f"{k} {name}\n")
        names.append(g.name)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    ten_steps(out)


if __name__ == "__main__":
    main()
