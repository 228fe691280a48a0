#!/usr/bin/python3
"""DLPack and .npz against real peers: PyTorch (torch.utils.dlpack, unversioned "dltensor"
capsules, as torch 1.13 speaks) and NumPy (np.from_dlpack, np.load).

    /usr/bin/python3 torch_peer.py path/to/libravel_dlpack_peer.so

The library (peer.cpp) is loaded with ctypes; its DLManagedTensor pointers are wrapped in
capsules with PyCapsule_New, and PyTorch's capsules are opened with PyCapsule_GetPointer. Every
expectation is computed here by torch or numpy. Exits 77 (CTest: skipped) with a message when
torch or numpy cannot be imported.
"""
import ctypes
import gc
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.utils.dlpack
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: the DLPack peer test needs torch and numpy in {sys.executable}: {e}")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
lib.peer_export.restype = ctypes.c_void_p
lib.peer_export.argtypes = [ctypes.c_int]
lib.peer_import.argtypes = [ctypes.c_void_p]
lib.peer_read.restype = ctypes.c_int64
lib.peer_read.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int64]
lib.peer_save_npz.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
lib.peer_dtype.restype = ctypes.c_char_p

capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

# A capsule no consumer took still owns its tensor: its destructor (peer.cpp) calls the deleter.
DESTRUCTOR = ctypes.cast(lib.peer_capsule_destructor, ctypes.c_void_p)

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def ravel_capsule(which):
    ptr = lib.peer_export(which)
    assert ptr, f"peer_export({which}) failed"
    return capsule_new(ptr, b"dltensor", DESTRUCTOR)


class Holder:
    """What np.from_dlpack wants: an object with __dlpack__ and __dlpack_device__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
expected = {0: x, 1: x.t(), 2: x[:, 1:4:2], 3: x.long() * 3, 4: x > 4.5, 5: x.flip(1)}
strides = {0: (4, 1), 1: (1, 4), 2: (4, 2), 3: (4, 1), 4: (4, 1)}

# Ravel -> PyTorch: values, dtype and strides as Ravel laid them out (a copy would be compact).
TORCH_HAS_BOOL = int(torch.__version__.split(".")[0]) >= 2  # DLPack bool (kDLBool) came with torch 2
for which in range(5):
    if which == 4 and not TORCH_HAS_BOOL:
        try:
            torch.utils.dlpack.from_dlpack(ravel_capsule(which))
            check(False, "torch 1.x was expected to refuse kDLBool")
        except RuntimeError as e:  # the unused capsule's destructor gives the tensor back
            print(f"note  torch {torch.__version__} has no DLPack bool ({e}); numpy checks bool below")
        continue
    t = torch.utils.dlpack.from_dlpack(ravel_capsule(which))
    want = expected[which]
    check(t.dtype == want.dtype and t.shape == want.shape and torch.equal(t, want),
          f"torch reads Ravel tensor {which}: {t.dtype} {tuple(t.shape)}")
    check(t.stride() == strides[which], f"torch sees strides {t.stride()}, expected {strides[which]}")
    del t
gc.collect()
check(lib.peer_deleted() == 5, f"torch called each deleter once ({lib.peer_deleted()} of 5)")

# A negative stride: PyTorch has none, so it is NumPy's to read.
NUMPY_HAS_BOOL = tuple(int(v) for v in np.__version__.split(".")[:2]) >= (1, 25)
for which in (1, 2, 4, 5):
    if which == 4 and not NUMPY_HAS_BOOL:
        try:
            np.from_dlpack(Holder(ravel_capsule(which)))
            check(False, "numpy < 1.25 was expected to refuse kDLBool")
        except Exception as e:  # noqa: BLE001 - whatever numpy raises; the capsule gives the tensor back
            print(f"note  numpy {np.__version__} has no DLPack bool either ({type(e).__name__}: {e})")
        continue
    a = np.from_dlpack(Holder(ravel_capsule(which)))
    check(np.array_equal(a, expected[which].numpy()), f"numpy reads Ravel tensor {which} with strides {a.strides}")
    del a
gc.collect()
check(lib.peer_deleted() == 9, f"numpy called each deleter once ({lib.peer_deleted()} of 9)")

# PyTorch -> Ravel: a strided view with an offset, shared: an in-place change by PyTorch shows.
for src in (torch.arange(20, dtype=torch.float64).reshape(4, 5)[:, 1::2],
            torch.arange(6, dtype=torch.int64).reshape(2, 3).t(),
            torch.tensor([[True, False], [False, True]]),
            torch.arange(5, dtype=torch.int32),
            torch.arange(4, dtype=torch.uint8)):
    if src.dtype == torch.bool and not TORCH_HAS_BOOL:
        print(f"note  torch {torch.__version__} cannot export bool through DLPack; skipped")
        continue
    cap = torch.utils.dlpack.to_dlpack(src)
    ok = lib.peer_import(capsule_pointer(cap, b"dltensor")) == 0
    if ok:
        capsule_set_name(cap, b"used_dltensor")  # the protocol: the consumer owns it now
    check(ok, f"Ravel imports torch {src.dtype} {tuple(src.shape)} strides {src.stride()}")
    if not ok:
        continue
    out = (ctypes.c_double * src.numel())()
    n = lib.peer_read(out, src.numel())
    want = src.to(torch.float64).flatten().tolist()
    check(n == src.numel() and list(out) == want, f"  values {list(out)}")
    if src.dtype == torch.float64:
        src.add_(100)
        lib.peer_read(out, src.numel())
        check(list(out) == [v + 100 for v in want], "  shared, not copied: torch's in-place add shows in Ravel")
    lib.peer_drop()
    del cap

# The ABI 1.7 dtypes through real peers: the DLPack codes (kDLFloat 16, kDLBfloat 16, kDLInt 8/16,
# kDLUInt 16/32/64) and the values. torch 1.13 has f16, bf16, i8, i16; NumPy 1.24 every one but
# bf16 (u16/u32/u64 are NumPy's alone). Expectations are built here by torch and numpy.
half_src = x * 0.25 - 1.5
narrow = {6: half_src.half(), 7: half_src.bfloat16(), 8: (x - 6).to(torch.int8), 9: (x * 1000 - 6000).to(torch.int16)}
for which, want in narrow.items():
    t = torch.utils.dlpack.from_dlpack(ravel_capsule(which))
    check(t.dtype == want.dtype and torch.equal(t, want), f"torch reads Ravel tensor {which} as {t.dtype}")
    del t
wide = {6: half_src.numpy().astype(np.float16), 8: (x - 6).numpy().astype(np.int8),
        9: (x * 1000 - 6000).numpy().astype(np.int16), 10: (x.numpy() * 5000).astype(np.uint16),
        11: (x.numpy().astype(np.uint64) * 300000000).astype(np.uint32),
        12: np.array([[2**64 - 1, 0], [2**63 + 5, 7]], dtype=np.uint64)}
for which, want in wide.items():
    a = np.from_dlpack(Holder(ravel_capsule(which)))
    check(a.dtype == want.dtype and np.array_equal(a, want), f"numpy reads Ravel tensor {which} as {a.dtype}")
    del a
gc.collect()
check(lib.peer_deleted() == 9 + len(narrow) + len(wide), f"each deleter called once ({lib.peer_deleted()})")
for src, name in ((half_src.half().t(), "f16"), (half_src.bfloat16(), "bf16"), ((x - 6).to(torch.int8), "i8"),
                  ((x * 1000 - 6000).to(torch.int16)[1:], "i16")):
    cap = torch.utils.dlpack.to_dlpack(src)
    ok = lib.peer_import(capsule_pointer(cap, b"dltensor")) == 0
    if ok:
        capsule_set_name(cap, b"used_dltensor")
    check(ok and lib.peer_dtype().decode() == name, f"Ravel imports torch {src.dtype} as {lib.peer_dtype().decode() if ok else '-'}")
    if ok:
        out = (ctypes.c_double * src.numel())()
        n = lib.peer_read(out, src.numel())
        check(n == src.numel() and list(out) == src.to(torch.float64).flatten().tolist(), f"  values of {name}")
        lib.peer_drop()
    del cap

# .npz written by Ravel, read by np.load.
with tempfile.TemporaryDirectory() as d:
    path, params = os.path.join(d, "arrays.npz"), os.path.join(d, "mlp.npz")
    check(lib.peer_save_npz(path.encode(), params.encode()) == 0, "Ravel writes .npz files")
    with np.load(path) as z:
        check(list(z.keys()) == ["x", "i", "b"], f"np.load keys {list(z.keys())}")
        for k, which in (("x", 0), ("i", 3), ("b", 4)):
            check(np.array_equal(z[k], expected[which].numpy()) and z[k].dtype == expected[which].numpy().dtype,
                  f"np.load {k}: {z[k].dtype} {z[k].shape}")
    with np.load(params) as z:
        shapes = {k: z[k].shape for k in z.keys()}
        check(shapes == {"layers.0.weight": (4, 8), "layers.0.bias": (8,), "layers.1.weight": (8, 3),
                         "layers.1.bias": (3,)}, f"np.load parameter file: {shapes}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all peer checks passed")
