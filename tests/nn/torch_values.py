#!/usr/bin/python3
# Writes tests/nn/torch_values.hpp: inputs and PyTorch's results (values and gradients, float64,
# CPU) for the convolution, pooling, indexing and activation operators whose semantics have
# corners a re-implementation could share with the code it checks: pooling's ceil_mode /
# count_include_pad / dilation and max pooling's routing of ties and NaN, adaptive pooling,
# interpolate with align_corners both ways and with scale factors, transposed and 'same'
# convolutions, scatter_reduce's gradients with ties, sort/topk with NaN and ties, BatchNorm2d's
# running statistics, the activations' derivatives at their kinks. tests/nn/test_against_torch.cpp
# compares Ravel with these numbers.
#
# Recorded with Debian's python3-torch 1.13 (torch.__version__ is written into the header).
# Regenerate: /usr/bin/python3 tests/nn/torch_values.py > tests/nn/torch_values.hpp
import math

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rows = []  # (name, shape, values)


def put(name, t):
    t = t.detach().to(torch.float64).contiguous()
    rows.append((name, list(t.shape), t.reshape(-1).tolist()))


def ties(shape, salt, nan_at=(), ninf_at=()):
    """Small integers (many ties), with NaN / -inf at the given flat positions."""
    n = math.prod(shape)
    v = [float(((i * 37 + salt) % 9) // 2) - 1.0 for i in range(n)]
    for i in nan_at:
        v[i] = float("nan")
    for i in ninf_at:
        v[i] = float("-inf")
    return torch.tensor(v).reshape(shape)


def smooth(shape, salt):
    """Distinct values in (-1, 1) (no ties), deterministic."""
    n = math.prod(shape)
    return torch.tensor([math.sin(0.7 * i + salt) for i in range(n)]).reshape(shape)


def cot_like(y):
    return (torch.arange(y.numel(), dtype=torch.float64) * 0.25 + 1.0).reshape(y.shape)


def with_grad(name, f, *inputs):
    """Records f(inputs) and the gradients of sum(f(inputs) * cot) for each input."""
    xs = [x.clone().requires_grad_(True) for x in inputs]
    y = f(*xs)
    put(name + ".y", y)
    cot = cot_like(y)
    # NaN outputs (max pooling of a window with NaN) times the cotangent: torch's gradient is
    # the routing itself, so NaN never enters the gradients below.
    gs = torch.autograd.grad(y, xs, grad_outputs=cot)
    for k, g in enumerate(gs):
        put(f"{name}.g{k}", g)


# ---- pooling ------------------------------------------------------------------------------
x = ties((1, 2, 7, 8), 3, nan_at=(9, 60), ninf_at=(17,))
put("pool2d.x", x)
with_grad("max_pool2d_k3s2p1_ceil", lambda v: F.max_pool2d(v, 3, 2, 1, ceil_mode=True), x)
with_grad("max_pool2d_k2s2p1d2", lambda v: F.max_pool2d(v, 2, 2, 1, dilation=2), x)
with_grad("max_pool2d_k3s1p1", lambda v: F.max_pool2d(v, 3, 1, 1), x)
xa = ties((1, 2, 7, 8), 5)
put("avg2d.x", xa)
for cip in (True, False):
    with_grad(f"avg_pool2d_k3s2p1_ceil_cip{int(cip)}",
              lambda v: F.avg_pool2d(v, 3, 2, 1, ceil_mode=True, count_include_pad=cip), xa)
x1 = ties((1, 2, 11), 1, nan_at=(14,))
put("pool1d.x", x1)
with_grad("max_pool1d_k4s3p2_ceil", lambda v: F.max_pool1d(v, 4, 3, 2, ceil_mode=True), x1)
x1a = ties((1, 2, 10), 2)
put("avg1d.x", x1a)
for cip in (True, False):
    with_grad(f"avg_pool1d_k4s3p2_ceil_cip{int(cip)}",
              lambda v: F.avg_pool1d(v, 4, 3, 2, ceil_mode=True, count_include_pad=cip), x1a)
x3 = ties((1, 1, 4, 5, 5), 4)
put("pool3d.x", x3)
with_grad("max_pool3d_k2s2p1_ceil", lambda v: F.max_pool3d(v, 2, 2, 1, ceil_mode=True), x3)
with_grad("avg_pool3d_k3s2p1_cip0", lambda v: F.avg_pool3d(v, 3, 2, 1, count_include_pad=False), x3)
xd = ties((1, 2, 7, 5), 6)
put("adaptive.x", xd)
with_grad("adaptive_avg_pool2d_3x2", lambda v: F.adaptive_avg_pool2d(v, (3, 2)), xd)
with_grad("adaptive_max_pool2d_3x2", lambda v: F.adaptive_max_pool2d(v, (3, 2)), xd)
with_grad("adaptive_max_pool2d_4x4", lambda v: F.adaptive_max_pool2d(v, (4, 4)), xd)
xd3 = ties((1, 2, 5, 4, 6), 7)
put("adaptive3d.x", xd3)
with_grad("adaptive_avg_pool3d_3x2x4", lambda v: F.adaptive_avg_pool3d(v, (3, 2, 4)), xd3)
with_grad("adaptive_max_pool3d_3x2x4", lambda v: F.adaptive_max_pool3d(v, (3, 2, 4)), xd3)
with_grad("adaptive_avg_pool3d_1", lambda v: F.adaptive_avg_pool3d(v, 1), xd3)
with_grad("adaptive_max_pool3d_5x2x3", lambda v: F.adaptive_max_pool3d(v, (5, 2, 3)), xd3)

# ---- interpolate --------------------------------------------------------------------------
xi = smooth((1, 2, 3, 4), 0.3)
put("interp.x", xi)
for ac in (False, True):
    with_grad(f"bilinear_5x7_ac{int(ac)}", lambda v: F.interpolate(v, size=(5, 7), mode="bilinear", align_corners=ac), xi)
    with_grad(f"bilinear_2x3_ac{int(ac)}", lambda v: F.interpolate(v, size=(2, 3), mode="bilinear", align_corners=ac), xi)
with_grad("bilinear_scale_1.7x2.3", lambda v: F.interpolate(v, scale_factor=(1.7, 2.3), mode="bilinear"), xi)
with_grad("nearest_5x7", lambda v: F.interpolate(v, size=(5, 7), mode="nearest"), xi)
with_grad("nearest_exact_5x3", lambda v: F.interpolate(v, size=(5, 3), mode="nearest-exact"), xi)
xl = smooth((1, 2, 5), 1.1)
put("interp1d.x", xl)
with_grad("linear_scale_1.3", lambda v: F.interpolate(v, scale_factor=1.3, mode="linear"), xl)
with_grad("linear_9_ac1", lambda v: F.interpolate(v, size=9, mode="linear", align_corners=True), xl)
xt = smooth((1, 1, 2, 3, 2), 0.9)
put("interp3d.x", xt)
with_grad("trilinear_3x4x5_ac0", lambda v: F.interpolate(v, size=(3, 4, 5), mode="trilinear"), xt)

# ---- convolutions ---------------------------------------------------------------------------
xc = smooth((2, 4, 3, 4), 0.1)
wc = smooth((4, 3, 3, 2), 0.2)  # conv_transpose: [C, O / groups, kh, kw]
bc = smooth((6,), 0.4)
for n, t in (("convT.x", xc), ("convT.w", wc), ("convT.b", bc)):
    put(n, t)
with_grad("conv_transpose2d_g2",
          lambda v, w, b: F.conv_transpose2d(v, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
                                             dilation=(1, 2)), xc, wc, bc)
xs = smooth((1, 2, 5, 6), 0.5)
ws = smooth((4, 1, 2, 4), 0.6)
bs = smooth((4,), 0.7)
for n, t in (("same.x", xs), ("same.w", ws), ("same.b", bs)):
    put(n, t)
with_grad("conv2d_same_g2_d21", lambda v, w, b: F.conv2d(v, w, b, padding="same", dilation=(2, 1), groups=2), xs, ws, bs)
x3c = smooth((1, 2, 4, 5, 4), 0.8)
w3c = smooth((3, 2, 2, 3, 2), 0.9)
for n, t in (("conv3d.x", x3c), ("conv3d.w", w3c)):
    put(n, t)
with_grad("conv3d_s2p1", lambda v, w: F.conv3d(v, w, None, stride=2, padding=1), x3c, w3c)
x3t = smooth((1, 2, 2, 3, 2), 1.0)
w3t = smooth((2, 2, 2, 2, 3), 1.2)
for n, t in (("convT3d.x", x3t), ("convT3d.w", w3t)):
    put(n, t)
with_grad("conv_transpose3d_s2_op1", lambda v, w: F.conv_transpose3d(v, w, None, stride=2, padding=1, output_padding=1),
          x3t, w3t)

# ---- scatter_reduce with ties, sort and topk ----------------------------------------------
self_ = torch.tensor([[2.0, 0.0, 1.0], [3.0, 3.0, -1.0], [0.5, 2.0, 2.0], [1.0, 1.0, 1.0]])
src = torch.tensor([[3.0, 1.0, 2.0], [3.0, 2.0, -1.0], [1.0, 3.0, 0.0], [2.0, 2.0, 2.0], [0.5, 0.0, 4.0]])
index = torch.tensor([[0, 1, 2], [0, 2, 2], [2, 1, 0], [1, 1, 2], [2, 2, 0]])
put("scatter.self", self_)
put("scatter.src", src)
put("scatter.index", index.to(torch.float64))
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        with_grad(f"scatter_reduce_{red}_self{int(inc)}",
                  lambda s, c: s.scatter_reduce(0, index, c, red, include_self=inc), self_, src)

nan = float("nan")
sv = torch.tensor([[1.0, nan, 3.0, 3.0, -math.inf, 2.0, 1.0, nan, 0.0],
                   [2.0, 2.0, math.inf, -1.0, 2.0, -0.0, 0.0, 5.0, -1.0]])
put("sort.x", sv)
for desc in (False, True):
    v, i = torch.sort(sv, dim=1, descending=desc, stable=True)
    put(f"sort_desc{int(desc)}.values", v)
    put(f"sort_desc{int(desc)}.indices", i.to(torch.float64))
tv = torch.tensor([[1.0, nan, 3.0, 7.0, -math.inf, 2.0, 4.0, 0.5, 0.0],
                   [2.5, 9.0, math.inf, -1.0, 6.0, -3.0, 0.25, 5.0, -2.0]])
put("topk.x", tv)
for largest in (True, False):
    v, i = torch.topk(tv, 4, dim=1, largest=largest, sorted=True)
    put(f"topk_largest{int(largest)}.values", v)
    put(f"topk_largest{int(largest)}.indices", i.to(torch.float64))

# ---- BatchNorm2d: one training step's output, gradients and running statistics ------------
xb = smooth((3, 2, 2, 3), 1.3) * 2.0 + 0.5
put("bn.x", xb)
bn = torch.nn.BatchNorm2d(2, momentum=0.1)
with torch.no_grad():
    bn.weight.copy_(torch.tensor([1.5, -0.5]))
    bn.bias.copy_(torch.tensor([0.25, 1.0]))
xg = xb.clone().requires_grad_(True)
yb = bn(xg)
put("bn_train.y", yb)
gx, gw, gb = torch.autograd.grad(yb, [xg, bn.weight, bn.bias], grad_outputs=cot_like(yb))
put("bn_train.gx", gx)
put("bn_train.gw", gw)
put("bn_train.gb", gb)
put("bn.running_mean", bn.running_mean)
put("bn.running_var", bn.running_var)
bn.eval()
put("bn_eval.y", bn(xb))

# ---- activations: derivatives at the kinks and around them ---------------------------------
ka = torch.tensor([-3.0, -2.5, -0.0, 0.0, 1.0, 3.0, 4.0, 19.99, 20.0, 20.01])
put("act.x", ka)
acts = {
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "silu": F.silu, "elu": lambda v: F.elu(v, 0.7),
    "leaky_relu": lambda v: F.leaky_relu(v, 0.1), "softplus": F.softplus, "relu": F.relu,
}
for n, f in acts.items():
    a = ka.clone().requires_grad_(True)
    y = f(a)
    put(f"act_{n}.y", y)
    put(f"act_{n}.g", torch.autograd.grad(y.sum(), [a])[0])


def c_value(v):
    if math.isnan(v):
        return "kNaN"
    if math.isinf(v):
        return "kInf" if v > 0 else "-kInf"
    return repr(float(v))


print("// Generated by tests/nn/torch_values.py from PyTorch " + torch.__version__ + " (float64, CPU);")
print("// do not edit. Each row: a name, its shape, its values in row-major order.")
print("#pragma once\n\n#include <cstdint>\n#include <limits>\n#include <string>\n#include <vector>\n")
print("namespace torch_values {\n")
print("inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();")
print("inline constexpr double kInf = std::numeric_limits<double>::infinity();\n")
print("struct Row {\n  std::string name;\n  std::vector<int64_t> shape;\n  std::vector<double> values;\n};\n")
print("inline const std::vector<Row>& rows() {\n  static const std::vector<Row> r = {")
for name, shape, vals in rows:
    cells = [c_value(v) for v in vals]
    lines = [", ".join(cells[k:k + 5]) for k in range(0, len(cells), 5)]
    body = ",\n        ".join(lines)
    print(f'      {{"{name}", {{{", ".join(str(s) for s in shape)}}}, {{\n        {body}}}}},')
print("  };\n  return r;\n}\n\n}  // namespace torch_values")
