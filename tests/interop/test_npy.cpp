// .npy/.npz against files NumPy 1.24 wrote (tests/interop/data/make_data.py makes them; the
// expected values below are that script's formulas recomputed here), Ravel's own files read back,
// bad input as typed errors, and nn parameter files as .npz.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <sys/stat.h>
#include <unistd.h>

#include "ravel/io.hpp"
#include "ravel/nn.hpp"
#include "ravel/ravel.hpp"
#include "tensor/zip.hpp"

#include "test_support.hpp"

using ravel::DType;
using ravel::Tensor;
namespace fs = std::filesystem;

namespace {
const fs::path kData = RAVEL_INTEROP_DATA;

std::string data(const char* name) { return (kData / name).string(); }

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream(path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
}
std::string temp(const char* name) { return (scratch_dir() / name).string(); }

// make_data.py's grid(dtype, base, step): base + step * k for k = 0..5, in the target dtype.
template <class T>
std::vector<T> grid(double base, double step) {
  std::vector<T> v;
  for (int k = 0; k < 6; ++k) v.push_back(static_cast<T>(base + step * k));
  return v;
}

template <class E>
bool says(const E& e, const std::string& text) {
  BOOST_TEST_MESSAGE(e.what());
  return std::string(e.what()).find(text) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_CASE(reads_every_dtype_numpy_wrote) {
  const ravel::Shape s{2, 3};
  Tensor b = ravel::load_npy(data("bool.npy"));
  BOOST_TEST((b.dtype() == DType::Bool && b.shape() == s));
  BOOST_TEST(b.to_vector<uint8_t>() == (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}), boost::test_tools::per_element());
  Tensor u = ravel::load_npy(data("uint8.npy"));
  BOOST_TEST((u.dtype() == DType::U8 && u.shape() == s));
  BOOST_TEST(u.to_vector<uint8_t>() == (std::vector<uint8_t>{250, 251, 252, 253, 254, 255}), boost::test_tools::per_element());
  Tensor i = ravel::load_npy(data("int32.npy"));
  BOOST_TEST((i.dtype() == DType::I32 && i.to_vector<int32_t>() == grid<int32_t>(-3, 1e6)));
  Tensor l = ravel::load_npy(data("int64.npy"));
  std::vector<int64_t> want_l;
  for (int64_t k = 0; k < 6; ++k) want_l.push_back(-(int64_t{1} << 40) + (int64_t{1} << 33) * k);
  BOOST_TEST((l.dtype() == DType::I64 && l.to_vector<int64_t>() == want_l));
  Tensor f = ravel::load_npy(data("float32.npy"));
  BOOST_TEST((f.dtype() == DType::F32 && f.to_vector<float>() == grid<float>(-1.5, 0.25)));
  Tensor d = ravel::load_npy(data("float64.npy"));
  BOOST_TEST((d.dtype() == DType::F64 && d.to_vector<double>() == grid<double>(1e-300, 1e299)));
}

BOOST_AUTO_TEST_CASE(reads_layouts_numpy_wrote) {
  Tensor be = ravel::load_npy(data("int32_big_endian.npy"));  // '>i4': swapped while reading
  BOOST_TEST((be.dtype() == DType::I32 && be.to_vector<int32_t>() == grid<int32_t>(-3, 1e6)));
  Tensor fo = ravel::load_npy(data("float64_fortran.npy"));  // same values as NumPy shows them
  BOOST_TEST((fo.shape() == ravel::Shape{2, 3} && fo.to_vector<double>() == grid<double>(0.5, 1.0)));
  Tensor sc = ravel::load_npy(data("scalar_f32.npy"));
  BOOST_TEST((sc.shape().empty() && sc.item<float>() == 3.5f));
  Tensor em = ravel::load_npy(data("empty_i64.npy"));
  BOOST_TEST((em.shape() == ravel::Shape{0, 4} && em.dtype() == DType::I64));
  BOOST_TEST(ravel::load_npy(data("vector_f64.npy")).to_vector<double>() == (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  Tensor r4 = ravel::load_npy(data("rank4_u8.npy"));
  BOOST_TEST((r4.shape() == ravel::Shape{2, 3, 4, 5} && r4.cast(DType::I64).sum().item<int64_t>() == 119 * 120 / 2));
}

// Ravel's writer produces byte-identical files to NumPy's for every dtype and for 0-d, empty
// and 1-D arrays (the header text, its padding to 64 bytes, and the data).
BOOST_AUTO_TEST_CASE(writes_what_numpy_writes) {
  for (const char* name : {"bool.npy", "uint8.npy", "int32.npy", "int64.npy", "float32.npy", "float64.npy",
                           "scalar_f32.npy", "empty_i64.npy", "vector_f64.npy", "rank4_u8.npy", "float16.npy"}) {
    BOOST_TEST_CONTEXT(name) {
      const auto want = bytes_of(data(name));
      BOOST_TEST(ravel::to_npy_bytes(ravel::load_npy(data(name))) == want);
    }
  }
  // A strided view is written in row-major order of its values: the Fortran file's values.
  Tensor t = Tensor::from_vector<double>({0.5, 3.5, 1.5, 4.5, 2.5, 5.5}, {3, 2}).transpose();
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(t)).to_vector<double>() == grid<double>(0.5, 1.0));
  const auto path = temp("ravel_interop.npy");
  ravel::save_npy(path, t);
  BOOST_TEST(ravel::load_npy(path).to_vector<double>() == grid<double>(0.5, 1.0));
}

// float16.npy is np.ones(3, dtype=np.float16) (make_data.py): f16 bits 0x3C00. The other 1.7
// dtypes carry NumPy's descr strings ('|i1', '<i2', '<u2', '<u4', '<u8', as np.dtype(...).str
// gives them) and come back bit for bit; bf16 has no NumPy dtype and is refused (Note [bf16 in
// .npy] in core/src/tensor/npy.cpp).
BOOST_AUTO_TEST_CASE(half_and_narrow_integer_dtypes) {
  Tensor h = ravel::load_npy(data("float16.npy"));
  BOOST_TEST((h.dtype() == DType::F16));
  for (const ravel::Float16& x : h.to_vector<ravel::Float16>()) BOOST_TEST(x.bits == 0x3C00);
  BOOST_TEST(h.to_vector<float>() == (std::vector<float>{1, 1, 1}));
  auto header_says = [](const Tensor& t, const std::string& descr) {
    const std::vector<char> b = ravel::to_npy_bytes(t);
    return std::string(b.begin(), b.begin() + 64).find("'descr': '" + descr + "'") != std::string::npos;
  };
  const Tensor i8 = Tensor::from_vector(std::vector<int8_t>{-128, 5}, {2});
  const Tensor i16 = Tensor::from_vector(std::vector<int16_t>{-32768, 7}, {2});
  const Tensor u16 = Tensor::from_vector(std::vector<uint16_t>{65535, 7}, {2});
  const Tensor u32 = Tensor::from_vector(std::vector<uint32_t>{4294967295u, 7}, {2});
  const Tensor u64 = Tensor::from_vector(std::vector<uint64_t>{~uint64_t{0}, 7}, {2});
  BOOST_TEST(header_says(i8, "|i1"));
  BOOST_TEST(header_says(i16, "<i2"));
  BOOST_TEST(header_says(u16, "<u2"));
  BOOST_TEST(header_says(u32, "<u4"));
  BOOST_TEST(header_says(u64, "<u8"));
  BOOST_TEST(header_says(h, "<f2"));
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(i8)).to_vector<int8_t>() == i8.to_vector<int8_t>());
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(i16)).to_vector<int16_t>() == i16.to_vector<int16_t>());
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(u16)).to_vector<uint16_t>() == u16.to_vector<uint16_t>());
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(u32)).to_vector<uint32_t>() == u32.to_vector<uint32_t>());
  BOOST_TEST(ravel::from_npy_bytes(ravel::to_npy_bytes(u64)).to_vector<uint64_t>() == u64.to_vector<uint64_t>());
  const Tensor bf = Tensor::from_vector(std::vector<ravel::BFloat16>(2, ravel::BFloat16(1.0f)), {2});
  BOOST_CHECK_EXCEPTION(ravel::to_npy_bytes(bf), ravel::DTypeError,
                        [](const ravel::DTypeError& e) { return says(e, "bf16") && says(e, "cast"); });
}

BOOST_AUTO_TEST_CASE(npz_archives) {
  auto all = ravel::load_npz(data("all_dtypes.npz"));
  BOOST_TEST_REQUIRE(all.size() == 6u);
  const char* keys[] = {"bool", "uint8", "int32", "int64", "float32", "float64"};
  for (size_t k = 0; k < 6; ++k) {
    BOOST_TEST(all[k].first == keys[k]);
    BOOST_TEST(ravel::to_npy_bytes(all[k].second) == bytes_of(data((std::string(keys[k]) + ".npy").c_str())));
  }
  // Round trip through our writer; the member bytes are NumPy's, so np.load reads them (the
  // Python peer test opens one too).
  const auto path = temp("ravel_interop.npz");
  ravel::save_npz(path, all);
  auto back = ravel::load_npz(path);
  BOOST_TEST_REQUIRE(back.size() == 6u);
  for (size_t k = 0; k < 6; ++k)
    BOOST_TEST((back[k].first == keys[k] && ravel::to_npy_bytes(back[k].second) == ravel::to_npy_bytes(all[k].second)));
  BOOST_CHECK_THROW(ravel::save_npz(path, {{"a", all[0].second}, {"a", all[1].second}}), ravel::ValueError);
}

BOOST_AUTO_TEST_CASE(compressed_npz) {
#ifdef RAVEL_TEST_HAVE_ZLIB
  auto c = ravel::load_npz(data("compressed.npz"));
  BOOST_TEST_REQUIRE(c.size() == 2u);
  BOOST_TEST((c[0].first == "a" && c[0].second.to_vector<float>() == grid<float>(-1.5, 0.25)));
  BOOST_TEST((c[1].first == "b" && c[1].second.to_vector<int64_t>() == grid<int64_t>(7, 3)));
#else
  BOOST_CHECK_EXCEPTION(ravel::load_npz(data("compressed.npz")), ravel::ValueError,
                        [](const ravel::ValueError& e) { return says(e, "zlib"); });
#endif
}

BOOST_AUTO_TEST_CASE(bad_input_is_a_typed_error) {
  for (const char* name : {"complex64.npy", "structured.npy"})
    BOOST_CHECK_EXCEPTION(ravel::load_npy(data(name)), ravel::DTypeError, [&](const ravel::DTypeError& e) {
      return says(e, name);
    });
  const auto good = bytes_of(data("float32.npy"));
  // Every truncation of a valid file is a ValueError, never a crash.
  for (size_t n = 0; n < good.size(); ++n)
    BOOST_CHECK_THROW(ravel::from_npy_bytes(std::vector<char>(good.begin(), good.begin() + static_cast<long>(n))),
                      ravel::ValueError);
  auto corrupt = good;
  corrupt[0] = 'X';
  BOOST_CHECK_EXCEPTION(ravel::from_npy_bytes(corrupt), ravel::ValueError, [](const auto& e) { return says(e, "magic"); });
  corrupt = good;
  corrupt[6] = 9;  // format version 9.0
  BOOST_CHECK_EXCEPTION(ravel::from_npy_bytes(corrupt), ravel::ValueError, [](const auto& e) { return says(e, "version 9"); });
  corrupt = good;
  corrupt[8] = '\xFF';  // header length beyond the file
  BOOST_CHECK_EXCEPTION(ravel::from_npy_bytes(corrupt), ravel::ValueError, [](const auto& e) { return says(e, "truncated"); });
  corrupt = good;
  for (size_t k = 10; k < 20; ++k) corrupt[k] = '#';  // garbage in the dict
  BOOST_CHECK_EXCEPTION(ravel::from_npy_bytes(corrupt), ravel::ValueError, [](const auto& e) { return says(e, "malformed"); });
  BOOST_CHECK_THROW(ravel::load_npy(temp("ravel_no_such_file.npy")), ravel::ValueError);

  auto zip = bytes_of(data("all_dtypes.npz"));
  zip[zip.size() / 2] ^= 0x5A;  // a flipped byte inside some member's data or header
  const auto bad = temp("ravel_corrupt.npz");
  write_bytes(bad, zip);
  BOOST_CHECK_THROW(ravel::load_npz(bad), ravel::Error);
  auto full = bytes_of(data("all_dtypes.npz"));
  for (size_t n : {size_t{0}, size_t{21}, full.size() / 2, full.size() - 1}) {
    write_bytes(bad, std::vector<char>(full.begin(), full.begin() + static_cast<long>(n)));
    BOOST_CHECK_THROW(ravel::load_npz(bad), ravel::ValueError);
  }
}

// Every single flipped byte of an archive (stored and deflated) loads or is a ravel::Error:
// sizes, offsets and lengths from the file are all checked before use.
BOOST_AUTO_TEST_CASE(every_corrupt_byte_is_handled) {
  const auto bad = temp("ravel_flipped.npz");
  for (const char* name : {"all_dtypes.npz", "compressed.npz"}) {
    const auto good = bytes_of(data(name));
    int errors = 0;
    for (size_t at = 0; at < good.size(); ++at) {
      auto b = good;
      b[at] = static_cast<char>(b[at] ^ 0xFF);
      write_bytes(bad, b);
      try {
        ravel::load_npz(bad);
      } catch (const ravel::Error&) {
        ++errors;
      }
    }
    BOOST_TEST_MESSAGE(name << ": " << errors << " of " << good.size() << " flipped bytes refused");
    BOOST_TEST(errors > static_cast<int>(good.size() / 2));
  }
}

BOOST_AUTO_TEST_CASE(nn_parameters_as_npz) {
  namespace nn = ravel::nn;
  const auto path = temp("ravel_mlp.npz");
  nn::MLP a({4, 8, 3}, nn::Activation::Tanh, 1), b({4, 8, 3}, nn::Activation::Tanh, 2);
  nn::save_parameters(a, path);
  auto arrays = ravel::load_npz(path);  // an ordinary archive, keyed by parameter name
  auto pa = a.named_parameters();
  BOOST_TEST_REQUIRE(arrays.size() == pa.size());
  for (size_t i = 0; i < pa.size(); ++i)
    BOOST_TEST((arrays[i].first == pa[i].first && arrays[i].second.to_vector<float>() == pa[i].second->to_vector<float>()));
  nn::load_parameters(b, path);
  auto pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) BOOST_TEST(pa[i].second->to_vector<float>() == pb[i].second->to_vector<float>());
  BOOST_TEST(b.layers[0].weight.requires_grad());
  nn::MLP wrong({4, 9, 3}, nn::Activation::Tanh, 1);
  BOOST_CHECK_EXCEPTION(nn::load_parameters(wrong, path), ravel::ValueError, [](const auto& e) {
    return says(e, "layers.0.weight") && says(e, "[4, 9]");
  });
  // An archive with a foreign key is refused, not half-loaded.
  arrays.emplace_back("extra", Tensor::zeros({1}));
  ravel::save_npz(path, arrays);
  BOOST_CHECK_EXCEPTION(nn::load_parameters(b, path), ravel::ValueError, [](const auto& e) { return says(e, "'extra'"); });
}

namespace {
// A version 1.0 .npy file with `header` as its dict and `data` after it.
std::vector<char> npy_with(const std::string& dict, size_t data_bytes = 0) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<char> b = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(header.size() & 0xFF),
                         static_cast<char>(header.size() >> 8)};
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}
}  // namespace

// Hostile files: a shape whose product overflows int64 (or wraps to 0) is refused before
// anything is multiplied or allocated; an honest empty shape still loads.
BOOST_AUTO_TEST_CASE(npy_shapes_are_checked_before_multiplying) {
  for (const char* shape : {"(4294967296, 4294967296)", "(4294967296, 4294967296, 3)", "(549755813888, 549755813888, 0)",
                            "(1099511627776,)"}) {
    const auto b = npy_with(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }");
    BOOST_CHECK_EXCEPTION(ravel::from_npy_bytes(b, "hostile.npy"), ravel::ValueError,
                          [](const ravel::ValueError& e) { return says(e, "hostile.npy: implausible shape"); });
  }
  const Tensor empty = ravel::from_npy_bytes(npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 7), }"));
  BOOST_TEST((empty.shape() == ravel::Shape{0, 7}));
}

namespace {
namespace zip = ravel::detail::zip;
const std::vector<char> kSmallNpy = ravel::to_npy_bytes(Tensor::from_vector<float>({1, 2, 3}, {3}));

template <class F>
std::string value_error(F&& f) {
  try {
    f();
  } catch (const ravel::ValueError& e) {
    BOOST_TEST_MESSAGE(e.what());
    return e.what();
  }
  BOOST_ERROR("expected a ValueError");
  return {};
}
bool has(const std::string& s, const std::string& part) {
  const bool ok = s.find(part) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("'" << s << "' lacks '" << part << "'");
  return ok;
}
}  // namespace

// Hostile paths: only regular files are read, and nothing blocks: a directory was a
// std::ios_failure, a FIFO blocked in open(), /dev/zero never ended. Each error names the file.
BOOST_AUTO_TEST_CASE(only_regular_files_are_read) {
  const auto dir = temp("ravel_npy_dir");
  fs::create_directories(dir);
  BOOST_TEST(has(value_error([&] { ravel::load_npy(dir); }), dir + " is a directory"));
  BOOST_TEST(has(value_error([&] { ravel::load_npz(dir); }), dir + " is a directory"));
  BOOST_TEST(has(value_error([] { ravel::load_npy("/dev/zero"); }), "/dev/zero is not a regular file but a character device"));
  const auto fifo = temp("ravel_npy.fifo");
  fs::remove(fifo);
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever comes: a blocking open would hang here (CTest's timeout would end the test).
  BOOST_TEST(has(value_error([&] { ravel::load_npy(fifo); }), fifo + " is not a regular file but a FIFO"));
  namespace nn = ravel::nn;
  nn::Linear lin(2, 2, 0);
  BOOST_TEST(has(value_error([&] { nn::load_parameters(lin, fifo); }), "parameter file " + fifo + " is not a regular file"));
  BOOST_TEST(has(value_error([&] { nn::load_parameters(lin, dir); }), "parameter file " + dir + " is a directory"));
  fs::remove(fifo);
}

// Directory entries that share bytes (one deflate bomb counted many times), two members of one
// name, and names that leave the extraction folder are refused; so is more inflated data than the
// bound (here a small bound over a real np.savez_compressed file).
BOOST_AUTO_TEST_CASE(hostile_archives_are_refused) {
  const auto path = temp("ravel_hostile.npz");
  auto archive = zip::write_archive({{"a.npy", kSmallNpy}, {"b.npy", kSmallNpy}});
  // Point b's directory entry at a's local header: both members are the same bytes.
  const size_t end = archive.size() - 22;
  const auto le32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(archive[at + static_cast<size_t>(i)]);
    return v;
  };
  const size_t second = le32(end + 16) + 46 + 5;  // the directory, then a's entry (46 + "a.npy")
  for (int i = 0; i < 4; ++i) archive[second + 42 + static_cast<size_t>(i)] = 0;
  write_bytes(path, archive);
  BOOST_TEST(has(value_error([&] { ravel::load_npz(path); }), "belong to two members"));

  write_bytes(path, zip::write_archive({{"w.npy", kSmallNpy}, {"w.npy", kSmallNpy}}));
  BOOST_TEST(has(value_error([&] { ravel::load_npz(path); }), path + " holds two members named 'w.npy'"));
  write_bytes(path, zip::write_archive({{"w.npy", kSmallNpy}, {"w", kSmallNpy}}));
  BOOST_TEST(has(value_error([&] { ravel::load_npz(path); }), path + " holds two arrays named 'w'"));

  for (const char* name : {"../evil.npy", "/etc/evil.npy", "a/../../b.npy", "a\\b.npy", "a//b.npy"}) {
    write_bytes(path, zip::write_archive({{name, kSmallNpy}}));
    BOOST_TEST(has(value_error([&] { ravel::load_npz(path); }), "is refused"));
  }
  const Tensor x = Tensor::from_vector<float>({1}, {1});
  for (const char* name : {"../evil", "/abs", "a/./b", "x\\y", ".."})
    BOOST_TEST(has(value_error([&] { ravel::save_npz(path, {{name, x}}); }), "is refused"));
  ravel::save_npz(path, {{"layers.0/weight", x}});  // a '/' inside a name is a plain name
  BOOST_TEST(ravel::load_npz(path).at(0).first == "layers.0/weight");

  // A directory claiming more members than its bytes can hold is refused before the loop.
  auto lying = zip::write_archive({{"a.npy", kSmallNpy}});
  lying[lying.size() - 22 + 10] = '\xFF', lying[lying.size() - 22 + 11] = '\x7F';
  BOOST_TEST(has(value_error([&] { zip::read_archive(lying, "lying.npz"); }), "claims 32767 members"));
#ifdef RAVEL_TEST_HAVE_ZLIB
  BOOST_TEST(has(value_error([&] { zip::read_archive(bytes_of(data("compressed.npz")), "c.npz", 100); }),
                 "a deflate bomb?"));
  BOOST_CHECK_NO_THROW(zip::read_archive(bytes_of(data("compressed.npz")), "c.npz"));
#endif
}

// Bytes after the last parameter of a Ravel-format file are refused, naming the file.
BOOST_AUTO_TEST_CASE(parameter_files_with_trailing_bytes_are_refused) {
  namespace nn = ravel::nn;
  const auto path = temp("ravel_params.bin");
  nn::Linear a(3, 2, 1), b(3, 2, 2);
  nn::save_parameters(a, path);
  nn::load_parameters(b, path);  // the clean file loads
  auto bytes = bytes_of(path);
  bytes.push_back('\0');
  write_bytes(path, bytes);
  BOOST_TEST(has(value_error([&] { nn::load_parameters(b, path); }),
                 "parameter file " + path + " has 1 trailing bytes after its last parameter"));
}
