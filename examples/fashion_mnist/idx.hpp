// IDX files (the MNIST format: http://yann.lecun.com/exdb/mnist/), plain or gzip-compressed:
//   bytes 0-1 zero, byte 2 the element type (0x08: unsigned byte), byte 3 the rank; then one
//   big-endian u32 size per axis; then the elements, row-major.
// Fashion-MNIST ships images as rank-3 files [count, rows, cols] and labels as rank-1 [count].
// Every check names the file, what was found and what was expected (IdxError).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Images {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
};

Images read_idx_images(const std::string& path);
// Labels, each checked to be below `classes`.
std::vector<uint8_t> read_idx_labels(const std::string& path, int classes);

struct Split {
  Images images;
  std::vector<uint8_t> labels;
};
// `dir`/`prefix`-images-idx3-ubyte.gz and `dir`/`prefix`-labels-idx1-ubyte.gz (prefix "train" or
// "t10k", as the dataset names them); the two must hold the same number of examples.
Split load_split(const std::string& dir, const std::string& prefix, int classes);

// Writers, gzip-compressed (for tests and synthetic data sets).
void write_idx_images(const std::string& path, const Images& images);
void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels);

}  // namespace fashion_mnist
