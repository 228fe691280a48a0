// Plumbing every backend plugin needs, written once (C++ helper, header-only; used by
// <ravel/host_backend.hpp>, plugins/level_zero, and meant for any new plugin):
//  - rvl::check_range: a byte range inside a buffer, checked without overflow;
//  - rvl::LiveSet<T>: the registry of live handles of one kind (buffers, streams, events), so a
//    stale, foreign or NULL handle from the host is an INVALID_ARGUMENT error, never a crash, and
//    a second free is caught by erase-or-fail;
//  - RVL_BACKEND_MEMBERS and rvl::backend_table<Impl>(): the entry table filled from one list of
//    the ABI's members, taking each from Impl's static member functions where Impl has it (an
//    optional member Impl leaves out stays NULL).
// Whether the host's struct has room for a member added in a later minor version is
// RVL_HAS_MEMBER (backend.h).
#ifndef RAVEL_PLUGIN_KIT_HPP
#define RAVEL_PLUGIN_KIT_HPP

#include <ravel/backend.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace rvl {

// Checks [offset, offset + bytes) lies inside a buffer of `size` bytes, without overflow.
inline void check_range(const char* what, uint64_t offset, uint64_t bytes, uint64_t size) {
  if (offset > size || bytes > size - offset)
    invalid(std::string(what) + ": byte range [" + std::to_string(offset) + ", " +
            std::to_string(offset) + " + " + std::to_string(bytes) +
            ") is outside the buffer of " + std::to_string(size) + " bytes");
}

// Note [Registry locks]
// Two host threads call a plugin at once in a Jit replay by device (a thread per device, Note
// [Replay by device] in core/src/runtime/device_lanes.hpp), and every kernel looks up each of
// its buffers, registers its output and frees temporaries: several lookups per kernel. With one
// std::mutex per set the two threads met on it every few microseconds, and glibc's mutex sleeps
// at once on a held lock: a futex wait and wake-up per meeting, the largest single cost of the
// 2-device makemore step (docs/performance.md §6, 2026-12-07). Even without sleeping, a lock
// both threads take passes its cache line between their cores at every kernel (16 us of the
// ~186 us step when handles were striped by address). So:
//  - a set is split into stripes, each with its own lock on its own cache line, and a handle is
//    registered in the stripe of the thread that registers it (threads take stripes in turn);
//    a lookup or a free searches the calling thread's stripe first, then the others: a device's
//    thread makes and uses its own buffers, so it finds them in its own stripe, which no other
//    thread locks; one thread alone uses one stripe;
//  - a lock spins briefly before it sleeps (a critical section is a hash lookup: far shorter
//    than a sleep and wake-up).
class SpinThenBlockMutex {
 public:
  void lock() {
    for (int i = 0; i < kSpins; ++i) {
      if (mu_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    mu_.lock();
  }
  bool try_lock() { return mu_.try_lock(); }
  void unlock() { mu_.unlock(); }

 private:
  static constexpr int kSpins = 200;  // a few microseconds at most
  std::mutex mu_;
};

// Live handles of one kind. A stripe's lock is held only for a lookup, an insert or an erase,
// never while the plugin waits on a device. `kind` names the handles in messages ("buffer").
template <class T>
class LiveSet {
 public:
  explicit LiveSet(const char* kind) : kind_(kind) {}

  void add(const T* h) {
    Stripe& s = stripes_[own_stripe()];
    std::lock_guard<SpinThenBlockMutex> lock(s.mu);
    s.live.insert(h);
  }
  bool contains(const T* h) const {
    return h != nullptr && holder(h) != nullptr;
  }
  // The live handle, or INVALID_ARGUMENT naming `what`.
  T* get(const T* h, const char* what) const {
    if (!contains(h)) not_live(h, what);
    return const_cast<T*>(h);  // the set holds what the plugin created
  }
  // f(handle) under the handle's lock, so that the host cannot free it meanwhile (a copy of the
  // handle's state that must not tear); INVALID_ARGUMENT naming `what` unless it is live.
  template <class F>
  auto with(const T* h, const char* what, F&& f) const {
    if (h == nullptr) not_live(h, what);
    for (size_t k : search_order()) {
      Stripe& s = stripes_[k];
      std::lock_guard<SpinThenBlockMutex> lock(s.mu);
      if (s.live.count(h) != 0) return f(*const_cast<T*>(h));
    }
    not_live(h, what);
  }
  // Erase-or-fail is the liveness check of a free: a second free finds nothing.
  T* take(const T* h, const char* what) {
    bool erased = false;
    if (h != nullptr)
      for (size_t k : search_order()) {
        Stripe& s = stripes_[k];
        std::lock_guard<SpinThenBlockMutex> lock(s.mu);
        if (s.live.erase(h) != 0) {
          erased = true;
          break;
        }
      }
    if (!erased) invalid(std::string(what) + ": not a live " + kind_ + " (freed twice, or never created here)");
    return const_cast<T*>(h);
  }
  // Registers a new handle and hands it back; deletes it if the set cannot grow (bad_alloc
  // propagates), so a failed create leaks nothing.
  T* adopt(T* h) {
    try {
      add(h);
    } catch (...) {
      delete h;
      throw;
    }
    return h;
  }
  // Calls f(handle) for every live handle, under every stripe's lock (f must not call the set).
  template <class F>
  void for_each(F&& f) const {
    AllLocked all(*this);
    for (const Stripe& s : stripes_)
      for (const T* h : s.live) f(const_cast<T*>(h));
  }
  // Everything still live, removed (shutdown frees it).
  std::vector<T*> take_all() {
    AllLocked all(*this);
    std::vector<T*> out;
    for (Stripe& s : stripes_) {
      for (const T* h : s.live) out.push_back(const_cast<T*>(h));
      s.live.clear();
    }
    return out;
  }
  size_t size() const {
    AllLocked all(*this);
    size_t n = 0;
    for (const Stripe& s : stripes_) n += s.live.size();
    return n;
  }

 private:
  static constexpr size_t kStripes = 16;
  struct alignas(64) Stripe {  // its own cache line: the threads' stripes do not share one
    mutable SpinThenBlockMutex mu;
    std::unordered_set<const T*> live;
  };
  // The calling thread's stripe: threads take stripes in turn, at their first call of any set.
  static size_t own_stripe() {
    static std::atomic<size_t> next{0};
    thread_local const size_t mine = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return mine;
  }
  // The calling thread's stripe, then every other in order.
  struct SearchOrder {
    size_t first;
    struct It {
      size_t i, first;
      size_t operator*() const { return i == 0 ? first : (i - 1 < first ? i - 1 : i); }
      It& operator++() { return ++i, *this; }
      bool operator!=(const It& o) const { return i != o.i; }
    };
    It begin() const { return {0, first}; }
    It end() const { return {kStripes, first}; }
  };
  static SearchOrder search_order() { return {own_stripe()}; }
  // The stripe that holds h (searched in search_order), or nullptr.
  const Stripe* holder(const T* h) const {
    for (size_t k : search_order()) {
      const Stripe& s = stripes_[k];
      std::lock_guard<SpinThenBlockMutex> lock(s.mu);
      if (s.live.count(h) != 0) return &s;
    }
    return nullptr;
  }
  struct AllLocked {  // every stripe's lock, always taken in stripe order
    const LiveSet& set;
    explicit AllLocked(const LiveSet& s) : set(s) {
      for (const Stripe& st : set.stripes_) st.mu.lock();
    }
    ~AllLocked() {
      for (const Stripe& st : set.stripes_) st.mu.unlock();
    }
  };
  [[noreturn]] void not_live(const T* h, const char* what) const {
    invalid(std::string(what) + ": not a live " + kind_ + (h ? " (freed, destroyed, or foreign)" : " (NULL)"));
  }

  const char* kind_;
  mutable Stripe stripes_[kStripes];
};

// Every function member of rvl_backend_api after the error members, in ABI order. A member
// appended in a minor version is appended here, and every plugin filling its table with
// backend_table() picks it up where it implements it.
#define RVL_BACKEND_MEMBERS(X)                                                                   \
  X(probe) X(initialize) X(shutdown) X(get_info) X(device_count) X(device_properties)            \
  X(buffer_allocate) X(buffer_free) X(buffer_size) X(buffer_write) X(buffer_read) X(buffer_copy) \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(event_record) X(event_wait)         \
  X(event_synchronize) X(event_destroy) X(execute_program) X(execute_contraction) X(synchronize) \
  X(buffer_address) X(buffer_wrap) X(buffer_copy_peer) X(all_reduce)    \
  X(reduce_scatter) X(all_gather)

// The entry table: version, the helper's error members, and every member Impl defines as a
// static member function (each a body wrapped in rvl::guard).
template <class Impl>
constexpr rvl_backend_api backend_table() {
  rvl_backend_api t{};
  t.struct_size = sizeof(rvl_backend_api);
  t.abi_major = RVL_ABI_MAJOR;
  t.abi_minor = RVL_ABI_MINOR;
  t.error_code = rvl::error_code;
  t.error_message = rvl::error_message;
  t.error_destroy = rvl::error_destroy;
#define RVL_KIT_FILL_(m) \
  if constexpr (requires { &Impl::m; }) t.m = &Impl::m;
  RVL_BACKEND_MEMBERS(RVL_KIT_FILL_)
#undef RVL_KIT_FILL_
  return t;
}

// Impl for backend_table when a plugin has no member of its own: version and error members only.
struct NoMembers {};

}  // namespace rvl

// For a plugin whose members are free functions named like the table's members, all of them
// (plugins/level_zero): the whole table from the one list, e.g.
//   constexpr rvl_backend_api kTable = RVL_BACKEND_TABLE_OF_FUNCTIONS();
// A missing function is a compile error naming the member.
#define RVL_KIT_ASSIGN_(m) t.m = m;
#define RVL_BACKEND_TABLE_OF_FUNCTIONS()                                 \
  [] {                                                                   \
    rvl_backend_api t = rvl::backend_table<rvl::NoMembers>();            \
    RVL_BACKEND_MEMBERS(RVL_KIT_ASSIGN_)                                 \
    return t;                                                            \
  }()

#endif  // RAVEL_PLUGIN_KIT_HPP
