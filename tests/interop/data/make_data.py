#!/usr/bin/python3
"""Writes the NumPy files that tests/interop/test_npy.cpp reads (committed; rerun to regenerate).

Run with Debian's Python (numpy 1.24 wrote the committed files):
    /usr/bin/python3 tests/interop/data/make_data.py
The values are simple formulas that the C++ test recomputes independently, so the expectations
come from NumPy's files, not from Ravel's writer. Each dtype gets a 2x3 array of
    v[i, j] = base + step * (3 * i + j)
with NumPy doing the arithmetic in that dtype (wrapping for uint8).
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def grid(dtype, base, step):
    idx = np.arange(6).reshape(2, 3)
    return (base + step * idx).astype(dtype)


def main():
    arrays = {
        "bool": np.array([[True, False, True], [False, False, True]]),
        "uint8": grid(np.uint8, 250, 1),             # 250..255
        "int32": grid(np.int32, -3, 1000000),         # -3, 999997, ...
        "int64": grid(np.int64, -(2**40), 2**33),
        "float32": grid(np.float32, -1.5, 0.25),
        "float64": grid(np.float64, 1e-300, 1e299),
    }
    for name, a in arrays.items():
        np.save(os.path.join(HERE, name + ".npy"), a)
    # Layout cases: big-endian data, Fortran order, 0-d, empty, 1-D, 4-D.
    np.save(os.path.join(HERE, "int32_big_endian.npy"), grid(np.dtype(">i4"), -3, 1000000))
    np.save(os.path.join(HERE, "float64_fortran.npy"), np.asfortranarray(grid(np.float64, 0.5, 1.0)))
    np.save(os.path.join(HERE, "scalar_f32.npy"), np.float32(3.5))
    np.save(os.path.join(HERE, "empty_i64.npy"), np.zeros((0, 4), dtype=np.int64))
    np.save(os.path.join(HERE, "vector_f64.npy"), np.arange(5, dtype=np.float64) / 4)
    np.save(os.path.join(HERE, "rank4_u8.npy"), np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5))
    # float16: read since ABI 1.7 added the half dtypes (it was the unsupported example before).
    np.save(os.path.join(HERE, "float16.npy"), np.ones(3, dtype=np.float16))
    # Unsupported dtypes: each must be a DTypeError, never a crash or a silent conversion.
    np.save(os.path.join(HERE, "complex64.npy"), np.ones(3, dtype=np.complex64))
    np.save(os.path.join(HERE, "structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
    # Archives: np.savez (stored) keeps argument order; savez_compressed deflates.
    np.savez(os.path.join(HERE, "all_dtypes.npz"), **arrays)
    np.savez_compressed(os.path.join(HERE, "compressed.npz"), a=grid(np.float32, -1.5, 0.25), b=grid(np.int64, 7, 3))


if __name__ == "__main__":
    main()
