#!/usr/bin/env python3
"""Checks an ONNX model of `purine export --onnx` and, optionally, evaluates it.

  onnx_check.py MODEL.onnx                       # check it, print its outputs' shapes
  onnx_check.py MODEL.onnx --input=X.f32 --batch=N [--evaluator=auto|numpy|onnxruntime]

Checking: onnx.checker.check_model(full_check=True) and strict shape inference; then one line per
graph output, "output NAME [batch, 10]". With --input (N images of the model's input shape,
float32 little-endian, as the model takes them), the outputs are computed by ONNX Runtime when
it is importable (auto), else by the small NumPy evaluator below (the ops purine exports, opset
13, float32), and printed one row per line: "row 0: 0.1234567 ...". The evaluator used is said
first ("evaluator: numpy"). Exit status 1 and "error: ..." on any failure.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _windows(x, kh, kw, sh, sw, pads, value):
    """x [N, C, H, W] padded -> [N, C, Ho, Wo, kh, kw] (views)."""
    ph0, pw0, ph1, pw1 = pads
    x = np.pad(x, ((0, 0), (0, 0), (ph0, ph1), (pw0, pw1)), constant_values=value)
    n, c, h, w = x.shape
    ho, wo = (h - kh) // sh + 1, (w - kw) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, ho, wo, kh, kw), (s[0], s[1], s[2] * sh, s[3] * sw, s[2], s[3]))


def _conv(x, w, a):
    sh, sw = a.get("strides", [1, 1])
    win = _windows(x, w.shape[2], w.shape[3], sh, sw, a.get("pads", [0, 0, 0, 0]), 0.0)
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True)


def _pool(x, a, mode):
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    pads = a.get("pads", [0, 0, 0, 0])
    if a.get("ceil_mode", 0) != 0:
        raise ValueError("ceil_mode 1 is not evaluated")
    if mode == "max":
        return _windows(x, kh, kw, sh, sw, pads, -np.inf).max(axis=(4, 5))
    if a.get("count_include_pad", 0) != 1:
        raise ValueError("count_include_pad 0 is not evaluated")
    return _windows(x, kh, kw, sh, sw, pads, 0.0).sum(axis=(4, 5)) / (kh * kw)


def _lrn(x, a):
    size, alpha, beta, bias = a["size"], a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    sq = x * x
    c = x.shape[1]
    total = np.zeros_like(x)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    for i in range(c):
        total[:, i] = sq[:, max(0, i - lo):min(c, i + hi + 1)].sum(axis=1)
    return x / (bias + alpha / size * total) ** beta


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def evaluate_numpy(model, feeds):
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values.update(feeds)
    for node in model.graph.node:
        a = _attrs(node)
        x = [values[name] for name in node.input]
        t = node.op_type
        if t == "Conv":
            y = _conv(x[0], x[1], a)
        elif t in ("Add", "Sum"):
            y = x[0]
            for other in x[1:]:
                y = y + other
        elif t == "Mul":
            y = x[0] * x[1]
        elif t == "Gemm":
            b = x[1].T if a.get("transB", 0) else x[1]
            y = x[0] @ b + (x[2] if len(x) > 2 else 0)
        elif t == "Flatten":
            y = x[0].reshape(int(np.prod(x[0].shape[:a.get("axis", 1)])), -1)
        elif t == "Relu":
            y = np.maximum(x[0], 0)
        elif t == "Sigmoid":
            y = 1 / (1 + np.exp(-x[0]))
        elif t == "Tanh":
            y = np.tanh(x[0])
        elif t in ("MaxPool", "AveragePool"):
            y = _pool(x[0], a, "max" if t == "MaxPool" else "avg")
        elif t == "LRN":
            y = _lrn(x[0], a)
        elif t == "BatchNormalization":
            shape = (1, -1) + (1,) * (x[0].ndim - 2)
            scale, bias, mean, var = (v.reshape(shape) for v in x[1:5])
            y = (x[0] - mean) / np.sqrt(var + a.get("epsilon", 1e-5)) * scale + bias
        elif t == "Identity":
            y = x[0]
        elif t == "Softmax":
            y = _softmax(x[0], a.get("axis", -1))
        elif t == "Concat":
            y = np.concatenate(x, axis=a["axis"])
        elif t == "Reshape":
            shape = [x[0].shape[i] if d == 0 else d for i, d in enumerate(x[1].tolist())]
            y = x[0].reshape(shape)
        else:
            raise ValueError(f"node {node.name} of type {t}: not in the NumPy evaluator")
        values[node.output[0]] = y.astype(np.float32)
    return [values[o.name] for o in model.graph.output]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--input")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--evaluator", default="auto", choices=["auto", "numpy", "onnxruntime"])
    args = parser.parse_args()

    model = onnx.load(args.model)
    onnx.checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    for out in inferred.graph.output:
        dims = [d.dim_param or str(d.dim_value) for d in out.type.tensor_type.shape.dim]
        print(f"output {out.name} [{', '.join(dims)}]")
    if not args.input:
        return
    inp = model.graph.input[0]
    dims = [d.dim_value for d in inp.type.tensor_type.shape.dim][1:]
    x = np.fromfile(args.input, dtype="<f4").reshape([args.batch] + dims)
    evaluator = args.evaluator
    if evaluator == "auto":
        try:
            import onnxruntime  # noqa: F401
            evaluator = "onnxruntime"
        except ImportError:
            evaluator = "numpy"
    print(f"evaluator: {evaluator}")
    if evaluator == "onnxruntime":
        import onnxruntime
        session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        outputs = session.run(None, {inp.name: x})
    else:
        outputs = evaluate_numpy(model, {inp.name: x})
    for i, row in enumerate(outputs[0].reshape(args.batch, -1)):
        print(f"row {i}: " + " ".join(f"{v:.7g}" for v in row))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 (any failure is the check's verdict)
        print(f"error: {type(e).__name__}: {e}")
        sys.exit(1)
