// Pinned host staging for transfers (Note [Staging]).
#pragma once

#include "hip_port.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace rvl::hip {

class Staging {
 public:
  // Queues a copy of host `src` into device `dst` on `s`; returns as soon as `src` may change.
  void write(int32_t device, hipStream_t s, void* dst, const void* src, uint64_t bytes);
  // Copies device `src` into host `dst`; returns when the bytes are there (the host waits here,
  // and only here, for the stream's earlier work).
  void read(int32_t device, hipStream_t s, void* dst, const void* src, uint64_t bytes);
  void release_all() noexcept;  // frees every block (after the device is idle: shutdown)

 private:
  struct Block {
    void* host = nullptr;
    uint64_t capacity = 0;
    hipEvent_t done = nullptr;  // recorded after the copy that last used the block
    bool busy = false;          // taken by a read in progress
  };
  Block* acquire(int32_t device, uint64_t bytes);  // an idle block of >= bytes (mu_ held)
  std::mutex mu_;
  std::map<int32_t, std::vector<Block*>> blocks_;
};

Staging& staging();

}  // namespace rvl::hip
