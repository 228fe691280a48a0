// Out of memory under a memory limit: with the address space capped (setrlimit
// RLIMIT_AS, as `ulimit -v` does), allocations that fail are an OutOfMemoryError naming the bytes
// and the device, never a std::bad_alloc, and the process goes on working. Its own executable,
// so the limit affects no other test. Skipped under AddressSanitizer, whose shadow memory needs
// terabytes of address space.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <unistd.h>

#include "expect_error.hpp"
#include "ravel/ravel.hpp"

// RAVEL_SANITIZED comes from tests/CMakeLists.txt in sanitizer builds (whose test sources may be
// compiled without instrumentation); the checks below cover instrumented builds of this file.
#if defined(RAVEL_SANITIZED)
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RAVEL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define RAVEL_SANITIZED 1
#endif
#endif

using namespace rtest;
using ravel::DType;
using ravel::Tensor;

namespace {
// The process's current address-space size (the first field of /proc/self/statm, in pages).
uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
}
}  // namespace

BOOST_AUTO_TEST_CASE(allocations_beyond_the_limit_are_out_of_memory_errors) {
#ifdef RAVEL_SANITIZED
  BOOST_TEST_MESSAGE("skipped: a sanitizer reserves more address space than the limit would allow");
  return;
#else
  // Start the runtime (plugins, worker threads) before capping, then allow 1 GiB more.
  BOOST_TEST((Tensor::arange(4) + 1).sum().item<int64_t>() == 10);
  const uint64_t limit = address_space_bytes() + (uint64_t{1} << 30);
  rlimit rl{limit, limit};
  BOOST_REQUIRE(setrlimit(RLIMIT_AS, &rl) == 0);

  // rand stages its values on the host: 2^28 f32 values need 3 GiB there (doubles and floats).
  expect_error<ravel::OutOfMemoryError>("rand({2^28})", [] { Tensor::rand({int64_t{1} << 28}, 1); },
                                        {"rand", "[268435456]", "bytes of host memory", ravel::Runtime::get().default_device().str()});
  // A device buffer that cannot be allocated: 2^30 f64 = 8 GiB for the copy kernel's output.
  expect_error<ravel::OutOfMemoryError>("realize 8 GiB", [] { Tensor::ones({int64_t{1} << 30}, DType::F64).contiguous().realize(); },
                                        {"8589934592 bytes", "device 0"});
  // one_hot(1 << 40) realized asks the device for terabytes, and is told no (it builds without
  // allocating: test_sizes.cpp).
  expect_error<ravel::OutOfMemoryError>("one_hot(1 << 40) realized",
                                        [] { Tensor::from_vector<int64_t>({0, 5}, {2}).one_hot(int64_t{1} << 40).realize(); },
                                        {"bytes", "device 0"});
  // Reading 2^29 f32 values back needs 2 GiB of host memory for the vector (the data itself is a
  // broadcast constant that a 2 GiB device buffer would also not hold: either error is right).
  expect_error<ravel::OutOfMemoryError>("to_vector of 2 GiB", [] { Tensor::ones({int64_t{1} << 29}).to_vector<float>(); },
                                        {"bytes"});
  // Still working afterwards.
  BOOST_TEST(Tensor::rand({1000}, 2).sum().item<double>() > 0);
#endif
}
