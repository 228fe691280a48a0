// The oneTBB plugin's caching host allocator (Note [Block cache], plugins/tbb_cpu/block_cache.hpp):
// size classes round up by at most 25% and map back to themselves; a freed block is reused for
// any request of its class (so a steady-state loop allocates nothing new); the cap bounds the
// idle bytes; reused blocks keep their old contents (no zero-fill); statistics count all of it.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>

#include "block_cache.hpp"

using tbbcpu::BlockCache;

BOOST_AUTO_TEST_CASE(size_classes_round_up_by_at_most_a_quarter_and_invert) {
  uint64_t prev = 0;
  for (uint64_t b = 1; b < (uint64_t{1} << 34); b = b < 4096 ? b + 1 : b + b / 7 + 1) {
    const uint64_t c = BlockCache::class_size(b);
    BOOST_TEST_REQUIRE(c >= b);
    BOOST_TEST_REQUIRE(c % BlockCache::kAlign == 0);
    if (b > 1024) BOOST_TEST_REQUIRE(c - b <= b / 4);
    BOOST_TEST_REQUIRE(BlockCache::class_size(c) == c);
    BOOST_TEST_REQUIRE(BlockCache::class_of_index(BlockCache::class_index(c)) == c);
    BOOST_TEST_REQUIRE(c >= prev);
    prev = c;
  }
}

BOOST_AUTO_TEST_CASE(freed_blocks_are_reused_within_their_class_and_the_cap_holds) {
  setenv("RAVEL_TBB_CACHE_MB", "8", 1);
  BlockCache cache;
  cache.set_enabled(true);
  // A steady-state loop: the same sizes every iteration, nothing fresh after the first.
  for (int it = 0; it < 5; ++it) {
    void* big = cache.allocate(3 << 20);
    void* small = cache.allocate(100);
    BOOST_TEST_REQUIRE((big && small));
    std::memset(big, 0xab, 3 << 20);
    std::memset(small, 0xcd, 100);
    cache.release(big, 3 << 20);
    cache.release(small, 100);
  }
  auto s = cache.stats();
  BOOST_TEST(s.requests == 10u);
  BOOST_TEST(s.fresh == 2u);
  BOOST_TEST(s.hits == 8u);
  // Another request of the same class reuses it, contents as they were (nothing zero-filled).
  void* again = cache.allocate(3 << 20);
  auto* small = static_cast<unsigned char*>(cache.allocate(90));
  for (int i = 0; i < 90; ++i) BOOST_TEST_REQUIRE(small[i] == 0xcd);
  BOOST_TEST(cache.stats().fresh == 2u);
  cache.release(again, 3 << 20);
  cache.release(small, 90);
  // The cap (8 MiB): three idle 3 MiB-class blocks do not fit, the third is freed.
  void* b[3];
  for (auto& p : b) p = cache.allocate(3 << 20);
  for (auto& p : b) cache.release(p, 3 << 20);
  s = cache.stats();
  BOOST_TEST(s.idle_bytes <= s.cap_bytes);
  BOOST_TEST(s.evicted >= 1u);
  BOOST_TEST(s.live_bytes == 0u);
  BOOST_TEST(!cache.summary().empty());
  cache.set_enabled(false);
  BOOST_TEST(cache.stats().idle_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(a_zero_cap_turns_caching_off) {
  setenv("RAVEL_TBB_CACHE_MB", "0", 1);
  BlockCache cache;
  cache.set_enabled(true);
  for (int it = 0; it < 3; ++it) cache.release(cache.allocate(1 << 20), 1 << 20);
  BOOST_TEST(cache.stats().fresh == 3u);
  BOOST_TEST(cache.stats().idle_bytes == 0u);
  cache.set_enabled(false);
}
