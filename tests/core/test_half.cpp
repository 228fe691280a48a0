// The 1.7 dtypes (f16, bf16, i8, i16, u16, u32, u64): the conversions of <ravel/half.hpp> over
// every 16-bit pattern against a decoding and a nearest-value search written here (no bit tricks
// shared with the code under test), promotion against PyTorch's / NumPy's tables (quoted), and
// the new dtypes computed on tbb_cpu: integers against the types' own C++ arithmetic, halves
// against one rounding of the exact result. What a device without a dtype does (refuse kernels,
// convert reads on the host) is in tests/runtime/test_abi_versions.cpp, on a 1.0 plugin.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <ravel/backend.h>
#include <ravel/half.hpp>

#include "ravel/ravel.hpp"

using ravel::BFloat16;
using ravel::DType;
using ravel::Float16;
using ravel::Tensor;

namespace {

// The value of a 16-bit float with `mant` mantissa bits and exponent bias `bias` (f16: 10, 15;
// bf16: 7, 127), decoded from the IEEE definition in double: (-1)^s 2^(e-bias) (1 + m/2^mant),
// subnormals 2^(1-bias) m/2^mant, e all ones: inf or NaN.
double decode16(uint16_t h, int mant, int bias) {
  const int exp_bits = 15 - mant;
  const int e = (h >> mant) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << mant) - 1);
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m == 0 ? sign * INFINITY : std::nan("");
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), 1 - bias - mant);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mant), e - bias);
}

// Round-to-nearest-even by search: the finite non-negative values of the format sorted, the
// two neighbours of |x| found by binary search, the nearer taken (on a tie the one whose bit
// pattern is even); beyond the largest finite value by half its ulp or more: infinity.
struct Nearest {
  std::vector<std::pair<double, uint16_t>> values;  // finite, >= +0, ascending
  uint16_t inf_bits = 0;
  double overflow_at = 0;  // largest + ulp/2

  Nearest(int mant, int bias) {
    for (uint32_t h = 0; h < 0x8000; ++h) {
      const double v = decode16(static_cast<uint16_t>(h), mant, bias);
      if (std::isfinite(v)) values.emplace_back(v, static_cast<uint16_t>(h));
      else if (!std::isnan(v)) inf_bits = static_cast<uint16_t>(h);
    }
    std::sort(values.begin(), values.end());
    const double largest = values.back().first, below = values[values.size() - 2].first;
    overflow_at = largest + (largest - below) / 2;
  }

  uint16_t operator()(double x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    if (a >= overflow_at) return sign | inf_bits;
    auto hi = std::lower_bound(values.begin(), values.end(), std::make_pair(a, uint16_t{0}));
    if (hi == values.end()) return sign | values.back().second;  // above the largest, below overflow_at
    if (hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
};

const Nearest& nearest_f16() {
  static const Nearest n(10, 15);
  return n;
}
const Nearest& nearest_bf16() {
  static const Nearest n(7, 127);
  return n;
}

float next_up(float x) { return std::nextafter(x, INFINITY); }
float next_down(float x) { return std::nextafter(x, -INFINITY); }

// f32 test points around every value of a 16-bit format: the value, the midpoints to its
// upper neighbour, and one f32 ulp either side of each.
std::vector<float> neighbourhoods(const Nearest& n) {
  std::vector<float> xs;
  for (size_t i = 0; i < n.values.size(); ++i) {
    const double v = n.values[i].first;
    const double up = i + 1 < n.values.size() ? n.values[i + 1].first : n.overflow_at;
    const float mid = static_cast<float>((v + up) / 2);  // exact: needs at most mant + 2 bits
    for (float x : {static_cast<float>(v), mid, next_up(mid), next_down(mid), next_up(static_cast<float>(v))}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  return xs;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(half_conversions)

// Every one of the 65,536 f16 and bf16 patterns widens to the value its definition gives, and
// every non-NaN pattern comes back unchanged through f32 (and f64); NaNs stay NaN of their sign.
BOOST_AUTO_TEST_CASE(every_pattern_widens_exactly_and_round_trips) {
  int bad = 0;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto b = static_cast<uint16_t>(h);
    for (int fmt = 0; fmt < 2; ++fmt) {
      const double want = fmt == 0 ? decode16(b, 10, 15) : decode16(b, 7, 127);
      const float got = fmt == 0 ? rvl::f32_from_f16_bits(b) : rvl::f32_from_bf16_bits(b);
      const uint16_t back32 = fmt == 0 ? rvl::f16_bits_from(got) : rvl::bf16_bits_from(got);
      const uint16_t back64 =
          fmt == 0 ? rvl::f16_bits_from(static_cast<double>(got)) : rvl::bf16_bits_from(static_cast<double>(got));
      if (std::isnan(want)) {
        bad += !std::isnan(got) || std::signbit(got) != ((b & 0x8000) != 0);
        const double again = fmt == 0 ? decode16(back32, 10, 15) : decode16(back32, 7, 127);
        bad += !std::isnan(again) || (back32 & 0x8000) != (b & 0x8000) || back64 != back32;
      } else {
        bad += static_cast<double>(got) != want || std::signbit(got) != std::signbit(want);
        bad += back32 != b || back64 != b;
      }
    }
  }
  BOOST_TEST(bad == 0);
}

// f32 -> f16 and f32 -> bf16 against the search: every value, every midpoint (the ties) and
// their f32 neighbours, over the whole range including subnormals and the overflow edge; then
// a million random f32 bit patterns of every magnitude.
BOOST_AUTO_TEST_CASE(narrowing_from_f32_rounds_to_nearest_even) {
  for (int fmt = 0; fmt < 2; ++fmt) {
    const Nearest& n = fmt == 0 ? nearest_f16() : nearest_bf16();
    std::vector<float> xs = neighbourhoods(n);
    std::mt19937 rng(25);
    for (int i = 0; i < 1000000; ++i) {
      float f;
      const uint32_t u = static_cast<uint32_t>(rng());
      std::memcpy(&f, &u, 4);
      if (!std::isnan(f)) xs.push_back(f);
    }
    int bad = 0;
    for (float x : xs) {
      const uint16_t got = fmt == 0 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x);
      const uint16_t want = n(x);
      if (got != want && ++bad <= 5)
        BOOST_TEST_MESSAGE((fmt == 0 ? "f16" : "bf16") << " of f32 0x" << std::hex << bits(x) << ": got 0x" << got
                                                         << ", want 0x" << want);
    }
    BOOST_TEST(bad == 0, (fmt == 0 ? "f16" : "bf16") << ": " << bad << " of " << xs.size() << " wrong");
  }
}

// f64 -> half rounds once: a value just above a tie in f64 that f64 -> f32 would put exactly on
// the tie must still round up (1 + 2^-11 + 2^-40 -> 1 + 2^-10, where through f32 it would be 1).
BOOST_AUTO_TEST_CASE(narrowing_from_f64_rounds_once) {
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  BOOST_TEST(rvl::f16_bits_from(x) == 0x3C01);                        // 1 + 2^-10
  BOOST_TEST(rvl::f16_bits_from(static_cast<float>(x)) == 0x3C00);    // the f32 detour: 1
  const double y = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  BOOST_TEST(rvl::bf16_bits_from(y) == 0x3F81);                       // 1 + 2^-7
  BOOST_TEST(rvl::bf16_bits_from(static_cast<float>(y)) == 0x3F80);
  // and agrees with the search on f64 neighbourhoods of every f16 midpoint
  const Nearest& n = nearest_f16();
  int bad = 0;
  for (size_t i = 0; i + 1 < n.values.size(); ++i) {
    const double mid = (n.values[i].first + n.values[i + 1].first) / 2;
    for (double d : {mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY)})
      bad += rvl::f16_bits_from(d) != n(d) || rvl::f16_bits_from(-d) != n(-d);
  }
  BOOST_TEST(bad == 0);
}

// The special values, spelled out: the format's limits (IEEE-754 binary16: largest 65504,
// smallest subnormal 2^-24; bfloat16: largest (2 - 2^-7) 2^127), overflow to infinity, NaN kept
// quiet with its sign and the top of its payload.
BOOST_AUTO_TEST_CASE(special_values) {
  BOOST_TEST(rvl::f32_from_f16_bits(0x7BFF) == 65504.0f);
  BOOST_TEST(rvl::f32_from_f16_bits(0x0001) == std::ldexp(1.0f, -24));
  BOOST_TEST(rvl::f16_bits_from(65519.0f) == 0x7BFF);   // below 65504 + 16: rounds down
  BOOST_TEST(rvl::f16_bits_from(65520.0f) == 0x7C00);   // the tie goes to infinity (even)
  BOOST_TEST(rvl::f16_bits_from(-1e10f) == 0xFC00);
  BOOST_TEST(rvl::f16_bits_from(std::ldexp(1.0f, -25)) == 0x0000);  // tie with 0: even is 0
  BOOST_TEST(rvl::f16_bits_from(std::ldexp(1.5f, -25)) == 0x0001);
  BOOST_TEST(rvl::f16_bits_from(-0.0f) == 0x8000);
  BOOST_TEST(rvl::f16_bits_from(INFINITY) == 0x7C00);
  BOOST_TEST(rvl::bf16_bits_from(std::numeric_limits<float>::max()) == 0x7F80);  // rounds past the largest bf16
  BOOST_TEST(rvl::bf16_bits_from(-INFINITY) == 0xFF80);
  BOOST_TEST(rvl::f32_from_bf16_bits(0x7F7F) == std::ldexp(2.0f - std::ldexp(1.0f, -7), 127));
  // a negative signalling NaN (f32 payload bit 21 set, quiet bit 22 clear) becomes quiet (f16
  // bit 9, bf16 bit 6) and keeps the top of its payload (f16 bit 8, bf16 bit 5)
  float snan;
  const uint32_t s = 0xFF800000u | (0x1u << 21);
  std::memcpy(&snan, &s, 4);
  BOOST_TEST(rvl::f16_bits_from(snan) == 0xFF00);
  BOOST_TEST(rvl::bf16_bits_from(snan) == 0xFFE0);
  BOOST_TEST(std::isnan(static_cast<float>(Float16(std::nanf("")))));
  BOOST_TEST(static_cast<float>(BFloat16(3.0f)) == 3.0f);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(new_dtypes)

BOOST_AUTO_TEST_CASE(sizes_names_and_classes) {
  const struct {
    DType t;
    int size;
    const char* name;
    bool fp, integer, is_signed;
  } rows[] = {{DType::F16, 2, "f16", true, false, true},   {DType::BF16, 2, "bf16", true, false, true},
              {DType::I8, 1, "i8", false, true, true},     {DType::I16, 2, "i16", false, true, true},
              {DType::U16, 2, "u16", false, true, false},  {DType::U32, 4, "u32", false, true, false},
              {DType::U64, 8, "u64", false, true, false},  {DType::U8, 1, "u8", false, true, false},
              {DType::Bool, 1, "bool", false, false, false}};
  for (const auto& r : rows) {
    BOOST_TEST(ravel::dtype_size(r.t) == r.size);
    BOOST_TEST(std::string(ravel::dtype_name(r.t)) == r.name);
    BOOST_TEST(ravel::is_float(r.t) == r.fp);
    BOOST_TEST(ravel::is_integer(r.t) == r.integer);
    BOOST_TEST(ravel::is_signed(r.t) == r.is_signed);
  }
  // the ABI's values are appended after F64 and equal the C enum's
  BOOST_TEST(static_cast<int>(DType::F16) == RVL_DTYPE_F16);
  BOOST_TEST(static_cast<int>(DType::U64) == RVL_DTYPE_U64);
  BOOST_TEST(ravel::kDTypeCount == RVL_DTYPE_COUNT_);
}

// Expected results from torch.promote_types (PyTorch 2.x) where PyTorch defines them, and from
// numpy.promote_types where PyTorch refuses (its u16/u32/u64 with other types: "Promotion for
// uint16, uint32, uint64 types is not supported"); u64 with a signed type is NumPy's float64.
BOOST_AUTO_TEST_CASE(promotion_table) {
  using D = DType;
  const struct {
    D a, b, want;
  } rows[] = {
      {D::F16, D::BF16, D::F32}, {D::F16, D::F32, D::F32},  {D::BF16, D::F64, D::F64}, {D::I64, D::F16, D::F16},
      {D::U8, D::BF16, D::BF16}, {D::Bool, D::F16, D::F16}, {D::U8, D::I8, D::I16},    {D::I8, D::I16, D::I16},
      {D::U8, D::I32, D::I32},   {D::U16, D::I16, D::I32},  {D::U16, D::I8, D::I32},   {D::U16, D::I32, D::I32},
      {D::U32, D::I32, D::I64},  {D::U32, D::I8, D::I64},   {D::U32, D::I64, D::I64},  {D::U64, D::I64, D::F64},
      {D::U64, D::I8, D::F64},   {D::U8, D::U16, D::U16},   {D::U32, D::U64, D::U64},  {D::Bool, D::I8, D::I8},
      {D::I32, D::I64, D::I64},  {D::U64, D::F32, D::F32},  {D::Bool, D::U64, D::U64},
  };
  for (const auto& r : rows) {
    BOOST_TEST((ravel::promote(r.a, r.b) == r.want), ravel::dtype_name(r.a) << " with " << ravel::dtype_name(r.b));
    BOOST_TEST((ravel::promote(r.b, r.a) == r.want), ravel::dtype_name(r.b) << " with " << ravel::dtype_name(r.a));
  }
  for (int i = 0; i < ravel::kDTypeCount; ++i)
    BOOST_TEST((ravel::promote(static_cast<D>(i), static_cast<D>(i)) == static_cast<D>(i)));
}

// Weak C++ scalars (docs/dtypes.md): the tensor's dtype when it holds the value's kind, else f32.
// Where an integral scalar overflows the integer dtype PyTorch raises ("value cannot be
// converted to type int8_t without overflow"); Ravel promotes to f32, as it does for i32.
BOOST_AUTO_TEST_CASE(weak_scalars_keep_the_tensor_dtype_when_it_holds_them) {
  const struct {
    DType t;
    double value;
    DType want;
  } rows[] = {
      {DType::F16, 2.0, DType::F16},    {DType::BF16, 0.5, DType::BF16},   {DType::F16, 1e6, DType::F16},
      {DType::I8, 100.0, DType::I8},    {DType::I8, 128.0, DType::F32},    {DType::I8, -128.0, DType::I8},
      {DType::U16, -1.0, DType::U16},   {DType::U16, 65535.0, DType::U16}, {DType::U16, 65536.0, DType::F32},
      {DType::I16, 0.5, DType::F32},    {DType::U32, 4294967295.0, DType::U32}, {DType::U32, 5e9, DType::F32},
      {DType::U64, 18446744073709549568.0, DType::U64}, {DType::U64, 18446744073709551616.0, DType::F32},
  };
  for (const auto& r : rows) {
    const Tensor x = Tensor::full({2}, 1, r.t);
    BOOST_TEST(((x + r.value).dtype() == r.want), ravel::dtype_name(r.t) << " + " << r.value);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(integer_dtypes_on_tbb_cpu)

// Each op against the C++ arithmetic of the type itself, done here in uint64 and truncated
// (two's complement wrap-around), and against unsigned comparisons and division for u64 values
// above 2^63, where a signed implementation would go wrong.
template <class T>
void check_ops(const std::vector<T>& a, const std::vector<T>& b) {
  const int64_t n = static_cast<int64_t>(a.size());
  const Tensor x = Tensor::from_vector(a, {n}), y = Tensor::from_vector(b, {n});
  BOOST_TEST((x.dtype() == ravel::dtype_v<T>));
  const std::vector<T> add = x.add(y).template to_vector<T>(), mul = x.mul(y).template to_vector<T>();
  const std::vector<T> mx = x.maximum(y).template to_vector<T>(), q = x.idiv(y).template to_vector<T>();
  const std::vector<T> r = x.mod(y).template to_vector<T>();
  const std::vector<bool> lt = x.lt(y).template to_vector<bool>();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t ua = static_cast<uint64_t>(a[i]), ub = static_cast<uint64_t>(b[i]);
    BOOST_TEST(add[i] == static_cast<T>(ua + ub), ravel::dtype_name(ravel::dtype_v<T>) << " add " << i);
    BOOST_TEST(mul[i] == static_cast<T>(ua * ub), ravel::dtype_name(ravel::dtype_v<T>) << " mul " << i);
    BOOST_TEST(mx[i] == (a[i] < b[i] ? b[i] : a[i]));
    BOOST_TEST(lt[i] == (a[i] < b[i]));
    const T want_q = b[i] == 0 ? T(0) : static_cast<T>(a[i] / b[i]);  // no MIN / -1 in the data
    const T want_r = b[i] == 0 ? T(0) : static_cast<T>(a[i] % b[i]);
    BOOST_TEST(q[i] == want_q, ravel::dtype_name(ravel::dtype_v<T>) << " idiv " << i);
    BOOST_TEST(r[i] == want_r, ravel::dtype_name(ravel::dtype_v<T>) << " mod " << i);
  }
}

BOOST_AUTO_TEST_CASE(elementwise_against_the_types_own_arithmetic) {
  check_ops<int8_t>({-128, 127, -7, 100, 5, 0}, {-1 + 2, 1, 3, 100, -2, 9});
  check_ops<int16_t>({-32768, 32767, -7, 300, 5, 181}, {1, 1, 3, 300, -2, 181});
  check_ops<uint16_t>({65535, 1, 7, 300, 5, 65535}, {1, 65535, 3, 300, 0, 65535});
  check_ops<uint32_t>({4294967295u, 1, 7, 70000, 5, 4000000000u}, {1, 4294967295u, 3, 70000, 0, 3});
  check_ops<uint64_t>({~uint64_t{0}, 1, uint64_t{1} << 63, 7, (uint64_t{1} << 63) + 5, 12},
                      {1, ~uint64_t{0}, 3, uint64_t{1} << 63, 2, 0});
}

// Casts follow the ABI (float -> integer truncates and saturates, integer -> integer wraps);
// sums of the narrow types accumulate in i64 (docs/dtypes.md); max reduces with the type's order.
BOOST_AUTO_TEST_CASE(casts_and_reductions) {
  const Tensor f = Tensor::from_vector(std::vector<float>{-1e9f, -2.7f, 0.5f, 300.9f, 1e20f, NAN}, {6});
  BOOST_TEST(f.cast(DType::I8).to_vector<int8_t>() == (std::vector<int8_t>{-128, -2, 0, 127, 127, 0}));
  BOOST_TEST(f.cast(DType::U16).to_vector<uint16_t>() == (std::vector<uint16_t>{0, 0, 0, 300, 65535, 0}));
  BOOST_TEST(f.cast(DType::U64).to_vector<uint64_t>() ==
             (std::vector<uint64_t>{0, 0, 0, 300, ~uint64_t{0}, 0}));
  const Tensor i = Tensor::from_vector(std::vector<int32_t>{-1, 70000, 255}, {3});
  BOOST_TEST(i.cast(DType::I16).to_vector<int16_t>() == (std::vector<int16_t>{-1, 4464, 255}));  // 70000 - 65536
  BOOST_TEST(i.cast(DType::U32).to_vector<uint32_t>() == (std::vector<uint32_t>{4294967295u, 70000, 255}));
  const Tensor s8 = Tensor::from_vector(std::vector<int8_t>{100, 100, 100, -1}, {4});
  const Tensor sum = s8.sum();
  BOOST_TEST((sum.dtype() == DType::I64));
  BOOST_TEST(sum.item<int64_t>() == 299);  // 299, not the i8 wrap-around 43
  const Tensor u = Tensor::from_vector(std::vector<uint64_t>{5, (uint64_t{1} << 63) + 1, 7}, {3});
  BOOST_TEST(u.max().item<uint64_t>() == (uint64_t{1} << 63) + 1);
  BOOST_TEST(u.sum().item<uint64_t>() == (uint64_t{1} << 63) + 13);
  BOOST_TEST(Tensor::from_vector(std::vector<uint32_t>{4000000000u, 4000000000u}, {2}).sum().item<int64_t>() ==
             8000000000ll);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(halves_on_tbb_cpu)

// Half arithmetic computes in f32 and rounds once at the kernel's output (docs/dtypes.md): the
// expectation is the f32 (here: exact double) result of the rounded inputs, rounded once by the
// nearest-value search of this file. Elementwise ops of two halves are exact in f32 before the
// final rounding (products of 11- or 8-bit significands fit), so they must match bit for bit.
BOOST_AUTO_TEST_CASE(elementwise_matches_one_rounding) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (DType t : {DType::F16, DType::BF16}) {
    const Nearest& near = t == DType::F16 ? nearest_f16() : nearest_bf16();
    std::vector<float> a(257), b(257);
    for (size_t i = 0; i < a.size(); ++i) a[i] = u(rng), b[i] = u(rng);
    const Tensor x = Tensor::from_vector(a, {257}).cast(t), y = Tensor::from_vector(b, {257}).cast(t);
    const std::vector<float> xa = x.to_vector<float>(), yb = y.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) BOOST_TEST(near(a[i]) == near(xa[i]));  // the cast rounded once
    auto bits_of = [&](const Tensor& r) {
      std::vector<uint16_t> out;
      if (t == DType::F16) for (const Float16& h : r.to_vector<Float16>()) out.push_back(h.bits);
      else for (const BFloat16& h : r.to_vector<BFloat16>()) out.push_back(h.bits);
      return out;
    };
    const std::vector<uint16_t> add = bits_of(x + y), mul = bits_of(x * y), fused = bits_of(x * y + x);
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double p = double(xa[i]) * double(yb[i]);
      bad += add[i] != near(double(xa[i]) + double(yb[i]));
      bad += mul[i] != near(p);
      // one kernel, one rounding: x*y + x from the f32 product (exact here) rounded once, which
      // op-by-op rounding (near(near(p) + x)) would not always give
      bad += fused[i] != near(static_cast<double>(static_cast<float>(p) + xa[i]));
    }
    BOOST_TEST(bad == 0, ravel::dtype_name(t));
    BOOST_TEST(((x + y).dtype() == t));
  }
}

// Sums and matrix products accumulate in f32 and round once: against a double loop over the
// rounded inputs, within the format's precision (2^-10 f16, 2^-7 bf16: docs/dtypes.md).
BOOST_AUTO_TEST_CASE(reductions_and_matmul_accumulate_in_f32) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (DType t : {DType::F16, DType::BF16}) {
    const double unit = t == DType::F16 ? 1.0 / 1024 : 1.0 / 128;
    const int64_t m = 9, k = 300, n = 7;
    std::vector<float> a(m * k), b(k * n);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    const Tensor x = Tensor::from_vector(a, {m, k}).cast(t), y = Tensor::from_vector(b, {k, n}).cast(t);
    const std::vector<float> xa = x.to_vector<float>(), yb = y.to_vector<float>();
    const Tensor s = x.sum(1), c = x.matmul(y);
    BOOST_TEST((s.dtype() == t));
    BOOST_TEST((c.dtype() == t));
    const std::vector<float> got_s = s.to_vector<float>(), got_c = c.to_vector<float>();
    for (int64_t i = 0; i < m; ++i) {
      double want = 0, scale = 0;
      for (int64_t j = 0; j < k; ++j) want += xa[i * k + j], scale += std::fabs(xa[i * k + j]);
      BOOST_TEST(std::fabs(got_s[i] - want) <= unit * scale / 8 + unit * std::fabs(want), "sum row " << i);
      for (int64_t q = 0; q < n; ++q) {
        double w = 0, sc = 0;
        for (int64_t j = 0; j < k; ++j) w += double(xa[i * k + j]) * yb[j * n + q], sc += std::fabs(xa[i * k + j] * yb[j * n + q]);
        BOOST_TEST(std::fabs(got_c[i * n + q] - w) <= unit * sc / 8 + unit * std::fabs(w), "matmul " << i << "," << q);
      }
    }
  }
}

// Empty extents: a sum over no elements is 0, a product with k = 0 is zeros (in the half dtype).
BOOST_AUTO_TEST_CASE(empty_extents) {
  for (DType t : {DType::F16, DType::BF16}) {
    const Tensor s = Tensor::full({3, 0}, 1, t).sum(1);
    BOOST_TEST((s.dtype() == t));
    BOOST_TEST(s.to_vector<float>() == (std::vector<float>{0, 0, 0}));
    const Tensor c = Tensor::full({2, 0}, 1, t).matmul(Tensor::full({0, 3}, 1, t));
    BOOST_TEST(c.to_vector<float>() == std::vector<float>(6, 0.0f));
    BOOST_TEST(Tensor::full({0, 4}, 1, t).sum(0).to_vector<float>() == std::vector<float>(4, 0.0f));
    BOOST_TEST(Tensor::full({4, 0}, 1, t).sum(0).numel() == 0);
  }
}

// tbb_cpu's vector conversions (F16C for f16 where the CPU has it, integer shifts for bf16;
// plugins/tbb_cpu/half_convert.cpp) against the same independent references as the scalar
// routine above: every pattern widened, and every value, tie and neighbour of a tie narrowed.
// (ctest runs this file again with RAVEL_TBB_SIMD=portable for the scalar loops and with
// RAVEL_TBB_SIMD=avx2 for the 256-bit ones.)
BOOST_AUTO_TEST_CASE(device_casts_over_every_pattern_and_tie) {
  for (int fmt = 0; fmt < 2; ++fmt) {
    const DType t = fmt == 0 ? DType::F16 : DType::BF16;
    const Nearest& n = fmt == 0 ? nearest_f16() : nearest_bf16();
    std::vector<Float16> hp;
    std::vector<BFloat16> bp;
    for (uint32_t h = 0; h <= 0xFFFF; ++h) {
      hp.push_back(Float16::from_bits(static_cast<uint16_t>(h)));
      bp.push_back(BFloat16::from_bits(static_cast<uint16_t>(h)));
    }
    const Tensor all = fmt == 0 ? Tensor::from_vector(hp, {65536}) : Tensor::from_vector(bp, {65536});
    const std::vector<float> wide = all.cast(DType::F32).to_vector<float>();  // a kernel: CAST to f32
    int bad = 0;
    for (uint32_t h = 0; h <= 0xFFFF; ++h) {
      const double want = fmt == 0 ? decode16(static_cast<uint16_t>(h), 10, 15) : decode16(static_cast<uint16_t>(h), 7, 127);
      bad += std::isnan(want) ? !std::isnan(wide[h]) : static_cast<double>(wide[h]) != want;
    }
    const std::vector<float> xs = neighbourhoods(n);
    const Tensor narrow = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}).cast(t);
    std::vector<uint16_t> got;
    if (fmt == 0) for (const Float16& h : narrow.to_vector<Float16>()) got.push_back(h.bits);
    else for (const BFloat16& h : narrow.to_vector<BFloat16>()) got.push_back(h.bits);
    for (size_t i = 0; i < xs.size(); ++i) bad += got[i] != n(xs[i]);
    // NaNs: quiet, sign and top payload kept, as the scalar routine (tested above) does
    const std::vector<float> nans = {std::nanf(""), -std::nanf("")};
    const Tensor tn = Tensor::from_vector(nans, {2}).cast(t);
    std::vector<uint16_t> nb;
    if (fmt == 0) for (const Float16& h : tn.to_vector<Float16>()) nb.push_back(h.bits);
    else for (const BFloat16& h : tn.to_vector<BFloat16>()) nb.push_back(h.bits);
    for (size_t i = 0; i < nans.size(); ++i)
      bad += nb[i] != (fmt == 0 ? rvl::f16_bits_from(nans[i]) : rvl::bf16_bits_from(nans[i]));
    BOOST_TEST(bad == 0, ravel::dtype_name(t));
  }
}

// The vector narrowing loops (F16C; bf16 in AVX2 or the portable loop) against the scalar
// routine of <ravel/half.hpp>, bit for bit, through the three places a half kernel rounds:
//  - an elementwise CAST of a million random f32 patterns (every class: normals, subnormals,
//    infinities, quiet and signalling NaNs with payloads, values that overflow) and the
//    patterns next to every exponent boundary;
//  - a reduction's output: the rows [a, b] of a half matrix summed in f32 and rounded into the
//    half result, every half pattern as a with 15 random finite non-zero b's (a + b lands on
//    the format's ties, subnormals and overflow; a NaN a stays a NaN of a's payload);
//  - a contraction's epilogue: the same rows times a column of ones, [n, 2] @ [2, 1].
// Lengths are odd so that every vector loop also runs its scalar tail.
BOOST_AUTO_TEST_CASE(device_narrowing_equals_the_scalar_routine_bit_for_bit) {
  std::vector<uint32_t> bits;
  std::mt19937 rng(25);
  for (int i = 0; i < 1000003; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t m : {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x1000u, 0xFFFu, 0x400000u, 0x7FFFFFu})
      for (uint32_t sign : {0u, 0x80000000u}) bits.push_back(sign | (e << 23) | m);
  std::vector<float> xs(bits.size());
  std::memcpy(xs.data(), bits.data(), bits.size() * 4);
  for (const DType t : {DType::F16, DType::BF16}) {
    const bool f16 = t == DType::F16;
    auto want = [f16](float x) { return f16 ? rvl::f16_bits_from(x) : rvl::bf16_bits_from(x); };
    auto widen = [f16](uint16_t h) { return f16 ? rvl::f32_from_f16_bits(h) : rvl::f32_from_bf16_bits(h); };
    auto bits_of = [f16](const Tensor& h) {
      std::vector<uint16_t> out;
      if (f16) for (const Float16& v : h.to_vector<Float16>()) out.push_back(v.bits);
      else for (const BFloat16& v : h.to_vector<BFloat16>()) out.push_back(v.bits);
      return out;
    };
    auto compare = [&](const char* what, const std::vector<uint16_t>& got, const std::vector<float>& exact) {
      BOOST_TEST_REQUIRE(got.size() == exact.size());
      int64_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want(exact[i]) && bad++ < 3)
          BOOST_ERROR(what << " " << ravel::dtype_name(t) << ": " << exact[i] << " gave 0x" << std::hex << got[i]
                           << ", want 0x" << want(exact[i]) << std::dec);
      BOOST_TEST(bad == 0, what << " " << ravel::dtype_name(t) << ": " << bad << " values differ");
    };
    compare("cast", bits_of(Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}).cast(t)), xs);

    std::vector<uint16_t> pairs;  // [a, b] rows
    std::vector<float> sums;      // a + b in f32, what the kernels accumulate
    for (int rep = 0; rep < 15; ++rep)
      for (uint32_t a = 0; a <= 0xFFFF; ++a) {
        uint16_t b;
        do b = static_cast<uint16_t>(rng()); while (!std::isfinite(widen(b)) || widen(b) == 0.0f);
        pairs.push_back(static_cast<uint16_t>(a));
        pairs.push_back(b);
        sums.push_back(widen(static_cast<uint16_t>(a)) + widen(b));
      }
    for (int extra = 0; extra < 7; ++extra) {  // an odd length
      pairs.push_back(pairs[2 * static_cast<size_t>(extra)]), pairs.push_back(pairs[2 * static_cast<size_t>(extra) + 1]);
      sums.push_back(sums[static_cast<size_t>(extra)]);
    }
    const int64_t n = static_cast<int64_t>(sums.size());
    std::vector<Float16> hp;
    std::vector<BFloat16> bp;
    for (uint16_t h : pairs) hp.push_back(Float16::from_bits(h)), bp.push_back(BFloat16::from_bits(h));
    const Tensor m = f16 ? Tensor::from_vector(hp, {n, 2}) : Tensor::from_vector(bp, {n, 2});
    const Tensor ones = Tensor::full({2, 1}, 1.0, t);
    compare("reduction output", bits_of(m.sum(1)), sums);
    compare("contraction epilogue", bits_of(m.matmul(ones).reshape({n})), sums);
  }
}

BOOST_AUTO_TEST_SUITE_END()
