// The all-reduces of a global-view program's entered cotangents, gathered into buckets (Note
// [Entered gradient buckets] in entered_buckets.cpp).
#pragma once

#include <string>

#include "ravel/tensor.hpp"

namespace ravel::distributed::detail {

// The sum over the ranks of g (rank_enter's derivative: this rank's cotangent of an entered value;
// rank_combine's sum: this rank's partial): a realized leaf whose all-reduce is one member of a
// bucket, begun with the bucket's other members and waited for at the leaf's first reader.
// g: one device, float.
Tensor bucketed_rank_sum(const Tensor& g);
// Begins every bucket not yet begun, in the order they were made, their cotangents realized in
// one scheduling pass. Every other rank collective calls it first, so every rank begins the same
// collectives in the same order. Cheap (one atomic load) when none is waiting.
void begin_entered_buckets();
// Whether rank_enter's derivative goes through buckets (RAVEL_DIST_ENTER_BUCKETS=0: one
// all-reduce per entered value, at once, as before decision 75; one binary measures both).
bool entered_buckets_enabled();
// For tests and benchmarks: whether buckets are used and their size (0: Options' or the
// environment's), overriding both; and how many buckets this process has begun (replays included).
void set_entered_buckets(bool on, size_t bucket_bytes = 0);
size_t entered_buckets_begun();
// RAVEL_DIST_ENTER_BUCKET_BYTES's value: a positive decimal number of bytes, else a ConfigError
// naming the variable.
size_t bucket_bytes_from_environment(const std::string& value);

}  // namespace ravel::distributed::detail
