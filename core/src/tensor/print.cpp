// NumPy-style printing: nested brackets, right-aligned columns, "1." for integral floats,
// and "..." summarisation of large tensors (more than 1000 elements, 3 edge items per axis).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <sstream>

#include "tensor/internal.hpp"

namespace ravel {

using namespace detail;

namespace {

constexpr int64_t kThreshold = 1000, kEdgeItems = 3;

// Note [Shortest digits in the tensor's dtype]
// A float prints with the fewest significant digits, at most `precision`, that read back as the
// same value once rounded to the tensor's own dtype: NumPy's unique repr. An f16 0.1 is stored
// as 0.0999755859375; "%.8g" would print 0.099975586, NumPy prints 0.1, and 0.1 is what a user
// typed and what rounds back to those bits. Likewise f32 0.3 prints 0.3, not 0.30000001. f64
// keeps "%.*g": 8 digits read back as the same double only where fewer would too.
bool reads_back(const char* text, double v, DType dtype) {
  const double r = std::strtod(text, nullptr);
  switch (dtype) {
    case DType::F16: return rvl::f16_bits_from(r) == rvl::f16_bits_from(v);
    case DType::BF16: return rvl::bf16_bits_from(r) == rvl::bf16_bits_from(v);
    case DType::F32: return static_cast<float>(r) == static_cast<float>(v);
    default: return true;
  }
}

std::string format_float(double v, int precision, bool all_integral, DType dtype) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (all_integral && std::fabs(v) < 1e16) {
    std::snprintf(buf, sizeof buf, "%.0f.", v);
    return buf;
  }
  int digits = dtype == DType::F64 ? precision : 1;
  for (;; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (digits >= precision || reads_back(buf, v, dtype)) break;
  }
  // Fewer digits than the integer part has would switch "%g" to an exponent (bf16 100 as
  // 1e+02); where `precision` digits print positionally, so do fewer.
  const double mag = std::fabs(v);
  while (std::strchr(buf, 'e') && digits < precision && mag >= 1e-4 && mag < std::pow(10.0, precision))
    std::snprintf(buf, sizeof buf, "%.*g", ++digits, v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".";
  return s;
}

struct Printer {
  const std::vector<std::string>& cells;
  const Shape& shape;
  size_t width;
  bool summarize;
  std::ostringstream out;

  // Indices shown along an axis of size n (all, or the edges around a "..." marker = -1).
  std::vector<int64_t> shown(int64_t n) const {
    std::vector<int64_t> idx;
    if (!summarize || n <= 2 * kEdgeItems) {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  void print(size_t depth, int64_t flat) {
    if (depth == shape.size()) {
      std::string c = cells[flat];
      out << std::string(width > c.size() ? width - c.size() : 0, ' ') << c;
      return;
    }
    out << "[";
    int64_t inner = 1;
    for (size_t d = depth + 1; d < shape.size(); ++d) inner *= shape[d];
    auto idx = shown(shape[depth]);
    for (size_t j = 0; j < idx.size(); ++j) {
      if (j > 0) {
        if (depth + 1 == shape.size()) out << " ";
        else out << std::string(shape.size() - depth - 1, '\n') << std::string(depth + 1, ' ');
      }
      if (idx[j] < 0) out << "...";
      else print(depth + 1, flat + idx[j] * inner);
    }
    out << "]";
  }
};

}  // namespace

std::string Tensor::to_string(PrintOptions opts) const {
  if (!defined()) return "Tensor(undefined)";
  const int64_t n = numel();
  const bool summarize = n > kThreshold;
  std::vector<std::string> cells(static_cast<size_t>(n));
  // Read once; summarised output still reads everything (simple, and printing is not a hot path).
  if (is_float(dtype())) {
    auto v = to_vector<double>();
    bool integral = true;
    for (double x : v)
      if (std::isfinite(x) && x != std::trunc(x)) integral = false;
    for (int64_t i = 0; i < n; ++i) cells[i] = format_float(v[i], opts.precision, integral, dtype());
  } else if (dtype() == DType::Bool) {
    auto v = to_vector<uint8_t>();
    for (int64_t i = 0; i < n; ++i) cells[i] = v[i] ? "True" : "False";
  } else if (dtype() == DType::U64) {  // beyond 2^63: not an i64
    auto v = to_vector<uint64_t>();
    for (int64_t i = 0; i < n; ++i) cells[i] = std::to_string(v[i]);
  } else {
    auto v = to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) cells[i] = std::to_string(v[i]);
  }
  // Like NumPy, line decimal points up: pad integer parts on the left, fractions on the right.
  bool fixed = is_float(dtype());
  for (const auto& c : cells) fixed = fixed && c.find('e') == std::string::npos && c.find('n') == std::string::npos;
  if (fixed) {
    size_t frac = 0;
    for (const auto& c : cells) frac = std::max(frac, c.size() - c.find('.') - 1);
    for (auto& c : cells) c += std::string(frac - (c.size() - c.find('.') - 1), ' ');
  }
  size_t width = 0;
  for (const auto& c : cells) width = std::max(width, c.size());
  Printer p{cells, shape(), width, summarize, {}};
  if (n == 0) p.out << "[]";
  else p.print(0, 0);
  if (opts.show_meta)
    p.out << "\nshape=" << shape_str(shape()) << " dtype=" << dtype_name(dtype()) << " device="
          << (sharding() ? sharding()->str() : device().str());
  return p.out.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace ravel
