// NumPy files: .npy (one array) and .npz (a ZIP of .npy files, as np.savez writes), for every
// Ravel dtype. docs/interop.md has the conventions; in short:
//  - dtypes map both ways: bool '|b1', u8 '|u1', i32 '<i4', i64 '<i8', f32 '<f4', f64 '<f8'.
//    Reading also accepts '=' (native) and big-endian '>' (byte-swapped while reading). Any other
//    dtype (float16, complex, int8/16, uint16/32/64, strings, objects, structured) is a
//    DTypeError naming the descr: nothing is converted silently.
//  - fortran_order: True is read (the values come out as NumPy shows them); writing is always
//    C order, with the tensor's values in row-major order whatever its strides.
//  - .npz: written uncompressed, like np.savez; read stored members, and deflated ones
//    (np.savez_compressed) when the build has zlib. Keys are member names without ".npy".
//  - A malformed file (bad magic, truncated or corrupt header or data, bad CRC) is a ValueError
//    naming the file and what was wrong; nothing crashes on bad input.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ravel/tensor.hpp"

namespace ravel {

// Named arrays, in file order (np.savez keeps the order its keyword arguments were given in).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// np.save / np.load for one array. `device` defaults to the default device.
void save_npy(const std::string& path, const Tensor& t);
Tensor load_npy(const std::string& path, std::optional<Device> device = {});

// The same as bytes in memory (a .npy file's exact contents); `what` names the source in errors.
std::vector<char> to_npy_bytes(const Tensor& t);
Tensor from_npy_bytes(const std::vector<char>& bytes, const std::string& what = "npy data",
                      std::optional<Device> device = {});

// np.savez / np.load for several named arrays. Names must be unique and non-empty; a name
// becomes the member "name.npy".
void save_npz(const std::string& path, const NamedTensors& arrays);
NamedTensors load_npz(const std::string& path, std::optional<Device> device = {});

}  // namespace ravel
