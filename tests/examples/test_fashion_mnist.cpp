// examples/fashion_mnist: the IDX reader (round trip; every kind of bad file refused with a
// message naming the file and the fault) and the program itself for a few steps on a synthetic
// data set written here, whose classes a CNN separates at once.
#include <boost/test/unit_test.hpp>

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "idx.hpp"

#include "test_support.hpp"

namespace fm = fashion_mnist;

namespace {
std::string file_in_scratch(const std::string& name) { return (scratch_dir() / name).string(); }

// Raw bytes gzip-compressed (to build malformed files).
void write_gz_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  BOOST_REQUIRE(f != nullptr);
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// Checks that reading `path` as images (or labels) throws IdxError whose message holds `want`.
template <class Read>
void expect_refused(Read read, const std::string& want) {
  try {
    read();
    BOOST_ERROR("no error; expected one mentioning '" << want << "'");
  } catch (const fm::IdxError& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string(e.what()).find(want) != std::string::npos, "'" << e.what() << "' lacks '" << want << "'");
  }
}

// Synthetic images: class k is a bright horizontal bar on rows 2k+1..2k+2 of a 28x28 image
// (with some noise), so a few steps separate the classes.
fm::Images synthetic_images(const std::vector<uint8_t>& labels, unsigned seed) {
  fm::Images im;
  im.count = static_cast<int64_t>(labels.size()), im.rows = 28, im.cols = 28;
  im.pixels.resize(static_cast<size_t>(im.count * 28 * 28));
  std::srand(seed);
  for (int64_t i = 0; i < im.count; ++i)
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c) {
        const bool bar = r == 2 * labels[i] + 1 || r == 2 * labels[i] + 2;
        im.pixels[(i * 28 + r) * 28 + c] = static_cast<uint8_t>(bar ? 200 + std::rand() % 56 : std::rand() % 40);
      }
  return im;
}
}  // namespace

BOOST_AUTO_TEST_CASE(idx_round_trip) {
  fm::Images im;
  im.count = 3, im.rows = 2, im.cols = 4;
  for (int i = 0; i < 24; ++i) im.pixels.push_back(static_cast<uint8_t>(i * 10));
  fm::write_idx_images(file_in_scratch("rt-images-idx3-ubyte.gz"), im);
  fm::write_idx_labels(file_in_scratch("rt-labels-idx1-ubyte.gz"), {9, 0, 4});
  fm::Split s = fm::load_split(scratch_dir().string(), "rt", 10);
  BOOST_TEST(s.images.count == 3);
  BOOST_TEST(s.images.rows == 2);
  BOOST_TEST(s.images.cols == 4);
  BOOST_TEST(s.images.pixels == im.pixels);
  BOOST_TEST(s.labels == (std::vector<uint8_t>{9, 0, 4}));
  // An uncompressed file reads the same (zlib passes plain data through).
  std::vector<uint8_t> plain{0, 0, 8, 1, 0, 0, 0, 2, 7, 3};
  std::ofstream(file_in_scratch("plain.idx"), std::ios::binary).write(reinterpret_cast<const char*>(plain.data()), 10);
  BOOST_TEST(fm::read_idx_labels(file_in_scratch("plain.idx"), 10) == (std::vector<uint8_t>{7, 3}));
}

BOOST_AUTO_TEST_CASE(bad_idx_files_are_refused_with_the_reason) {
  const std::string p = file_in_scratch("bad.gz");
  auto images = [&] { fm::read_idx_images(p); };
  auto labels = [&] { fm::read_idx_labels(p, 10); };
  expect_refused([&] { fm::read_idx_images(file_in_scratch("missing.gz")); }, "no such file");
  expect_refused([&] { fm::read_idx_images(scratch_dir().string()); }, "not a regular file");
  write_gz_bytes(p, {});
  expect_refused(images, "truncated: expected 4 bytes of the magic number at byte 0");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 2, 1, 2});  // a label file read as images
  expect_refused(images, "magic number 0x00000801, expected 0x00000803");
  write_gz_bytes(p, {0, 0, 0x0d, 3});  // float elements
  expect_refused(images, "expected 0x00000803");
  write_gz_bytes(p, {0, 0, 8, 3, 0, 0, 0, 2, 0, 0});  // header cut short
  expect_refused(images, "truncated: expected 4 bytes of the size of axis 1 at byte 8");
  write_gz_bytes(p, {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3});
  expect_refused(images, "axis 1 has size 0");
  write_gz_bytes(p, {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7});  // 7 of 8 pixels
  expect_refused(images, "truncated: expected 8 bytes of data");
  expect_refused(images, "the data ends after 23 bytes");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 2, 1, 2, 3});  // a byte too many
  expect_refused(labels, "data after its 2 declared elements");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 3, 1, 12, 3});
  expect_refused(labels, "label 1 is 12, expected 0 to 9");
  write_gz_bytes(p, {0, 0, 8, 1, 0xff, 0, 0, 0});  // an absurd count
  expect_refused(labels, "axis 0 has size 4278190080");
  // A damaged gzip stream (the compressed bytes flipped in the middle).
  {
    fm::Images big;
    big.count = 50, big.rows = 28, big.cols = 28;
    for (int i = 0; i < 50 * 784; ++i) big.pixels.push_back(static_cast<uint8_t>((i * 7919) % 251));
    fm::write_idx_images(p, big);
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(p) / 2));
    const char junk[16] = {'\x55', '\x12', '\x7f', '\x00', '\x33', '\x99', '\x01', '\xee',
                           '\x55', '\x12', '\x7f', '\x00', '\x33', '\x99', '\x01', '\xee'};
    f.write(junk, sizeof junk);
  }
  expect_refused(images, "bad.gz");
  // Images and labels of different counts.
  fm::Images im;
  im.count = 2, im.rows = 1, im.cols = 1, im.pixels = {1, 2};
  fm::write_idx_images(file_in_scratch("mix-images-idx3-ubyte.gz"), im);
  fm::write_idx_labels(file_in_scratch("mix-labels-idx1-ubyte.gz"), {1, 2, 3});
  expect_refused([&] { fm::load_split(scratch_dir().string(), "mix", 10); }, "holds 2 images but");
}

namespace {
// The synthetic set of the test below in `dir`: bars this distinct that 12 steps learn them.
void write_synthetic_set(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::vector<uint8_t> train_labels, test_labels;
  for (int i = 0; i < 96; ++i) train_labels.push_back(static_cast<uint8_t>(i % 10));
  for (int i = 0; i < 40; ++i) test_labels.push_back(static_cast<uint8_t>((i * 3) % 10));
  fm::write_idx_images((dir / "train-images-idx3-ubyte.gz").string(), synthetic_images(train_labels, 1));
  fm::write_idx_labels((dir / "train-labels-idx1-ubyte.gz").string(), train_labels);
  fm::write_idx_images((dir / "t10k-images-idx3-ubyte.gz").string(), synthetic_images(test_labels, 2));
  fm::write_idx_labels((dir / "t10k-labels-idx1-ubyte.gz").string(), test_labels);
}

// The test accuracy the run's log reports, or -1.
double reported_accuracy(const std::string& log) {
  const auto at = log.find("test accuracy: ");
  return at == std::string::npos ? -1 : std::stod(log.substr(at + 15));
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_few_training_steps_on_a_synthetic_set_run_end_to_end) {
  const auto dir = scratch_dir() / "synthetic";
  write_synthetic_set(dir);
  const auto out = scratch_dir() / "out", log = scratch_dir() / "log.txt";
  const std::string cmd = std::string(FASHION_MNIST_BIN) + " --data " + dir.string() + " --out " + out.string() +
                          " --epochs 2 --batch 16 --channels 4,8 --lr 0.01 > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  BOOST_TEST_MESSAGE(text.str());
  BOOST_TEST(rc == 0);
  BOOST_TEST(text.str().find("test accuracy:") != std::string::npos);
  BOOST_TEST(text.str().find("confusion matrix") != std::string::npos);
  BOOST_TEST(std::filesystem::exists(out / "fashion-mnist-loss.svg"));
  BOOST_TEST(std::filesystem::exists(out / "fashion-mnist-accuracy.svg"));
  // 12 steps on bars this distinct: well above chance (10%).
  BOOST_TEST(reported_accuracy(text.str()) > 50.0);
  // A data folder without the files: a clear error and a non-zero exit.
  const std::string bad = std::string(FASHION_MNIST_BIN) + " --data " + (scratch_dir() / "nothing").string() + " > " +
                          log.string() + " 2>&1";
  BOOST_TEST(std::system(bad.c_str()) != 0);
  std::stringstream err;
  err << std::ifstream(log).rdbuf();
  BOOST_TEST(err.str().find("no such file") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(mixed_precision_runs_learn_the_synthetic_set_too) {
  // --dtype bf16 and f16 (autocast; f16 with loss scaling): the same 12 steps reach the same
  // bar as f32 above, and the run says which precision it used. Under the bug of Note
  // [Comparisons see stored halves] the accuracy read 0% here (argmax of half logits).
  const auto dir = scratch_dir() / "synthetic-half";
  write_synthetic_set(dir);
  for (const char* dtype : {"bf16", "f16"}) {
    BOOST_TEST_CONTEXT("--dtype " << dtype) {
      const auto log = scratch_dir() / (std::string("log-") + dtype + ".txt");
      const std::string cmd = std::string(FASHION_MNIST_BIN) + " --data " + dir.string() + " --out " +
                              (scratch_dir() / (std::string("out-") + dtype)).string() +
                              " --epochs 2 --batch 16 --channels 4,8 --lr 0.01 --dtype " + dtype + " > " +
                              log.string() + " 2>&1";
      const int rc = std::system(cmd.c_str());
      std::stringstream text;
      text << std::ifstream(log).rdbuf();
      BOOST_TEST_MESSAGE(text.str());
      BOOST_TEST(rc == 0);
      BOOST_TEST(text.str().find(std::string("mixed precision: ") + dtype + " layers") != std::string::npos);
      BOOST_TEST((text.str().find("loss scale at the end") != std::string::npos) == (std::string(dtype) == "f16"));
      BOOST_TEST(reported_accuracy(text.str()) > 50.0);
    }
  }
  // A bad value is a usage error naming the choices.
  const auto log = scratch_dir() / "log-bad.txt";
  const std::string bad = std::string(FASHION_MNIST_BIN) + " --dtype f8 > " + log.string() + " 2>&1";
  BOOST_TEST(std::system(bad.c_str()) != 0);
  std::stringstream err;
  err << std::ifstream(log).rdbuf();
  BOOST_TEST(err.str().find("bad value 'f8' for --dtype (expected f32, bf16 or f16)") != std::string::npos);
}
