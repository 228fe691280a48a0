// The data cases: every operation on every dtype and size, against results computed locally.
// Each rank's data is a known function of (rank, index), so every rank can compute what every
// operation must return without communicating. Values are small integers (products of 1, 2 and
// -1 for PROD), so float results are exact whatever order the plugin combines them in.
#include "cases.hpp"

#include <cstring>
#include <type_traits>

namespace ravel::comm_conformance {

namespace {

template <class T>
T value(bool prod, int rank, int64_t i) {
  static const int64_t kProd[3] = {1, 2, -1};
  const int64_t v = prod ? kProd[(i + rank) % 3] : ((i * 7 + rank * 13) % 23) - 11;
  if constexpr (std::is_same_v<T, bool>) return (v & 1) != 0;
  else return static_cast<T>(v);
}

// The combination of two values as collectives.h defines it (integers wrap; bool or/and).
template <class T>
T combine(rvl_coll_op op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return (op == RVL_COLL_SUM || op == RVL_COLL_MAX) ? (a || b) : (a && b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RVL_COLL_SUM: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case RVL_COLL_PROD: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case RVL_COLL_MAX: return a > b ? a : b;
      default: return a < b ? a : b;
    }
  } else {
    switch (op) {
      case RVL_COLL_SUM: return a + b;
      case RVL_COLL_PROD: return a * b;
      case RVL_COLL_MAX: return a > b ? a : b;
      default: return a < b ? a : b;
    }
  }
}

// bool travels as one byte; the vectors hold bytes for it.
template <class T>
using Elem = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

const char* const kOpNames[] = {"sum", "prod", "max", "min"};

template <class T>
class DTypeCases {
 public:
  DTypeCases(Runner& run, rvl_dtype dtype, const char* name) : run_(run), dtype_(dtype), name_(name) {}

  void all(int64_t n) {
    for (int op = 0; op < RVL_COLL_OP_COUNT_; ++op) {
      all_reduce(n, static_cast<rvl_coll_op>(op), false);
      reduce_scatter(n, static_cast<rvl_coll_op>(op));
    }
    all_reduce(n, RVL_COLL_SUM, true);
    all_gather(n);
    broadcast(n, 0);
    broadcast(n, run_.size - 1);
    if (run_.size > 1) ring(n);
  }

  void all_reduce(int64_t n, rvl_coll_op op, bool in_place) {
    const bool prod = op == RVL_COLL_PROD;
    std::vector<Elem<T>> send(n), recv(n + 1, poison()), want(n);
    for (int64_t i = 0; i < n; ++i) {
      send[i] = value<T>(prod, run_.rank, i);
      T acc = value<T>(prod, 0, i);
      for (int r = 1; r < run_.size; ++r) acc = combine<T>(op, acc, value<T>(prod, r, i));
      want[i] = acc;
    }
    if (in_place) std::copy(send.begin(), send.end(), recv.begin());
    const void* src = in_place ? recv.data() : send.data();
    Status s = run_.plugin.run([&](rvl_coll_request** r) {
      return run_.plugin.api()->all_reduce(run_.comm, n ? src : nullptr, n ? recv.data() : nullptr, n, dtype_, op, r);
    }, kTimeoutMs);
    check(std::string("all_reduce ") + kOpNames[op] + (in_place ? " in place" : ""), n, s, recv, want);
  }

  void reduce_scatter(int64_t n, rvl_coll_op op) {
    const bool prod = op == RVL_COLL_PROD;
    const int64_t total = n * run_.size;
    std::vector<Elem<T>> send(total), recv(n + 1, poison()), want(n);
    for (int64_t i = 0; i < total; ++i) send[i] = value<T>(prod, run_.rank, i);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t g = run_.rank * n + i;
      T acc = value<T>(prod, 0, g);
      for (int r = 1; r < run_.size; ++r) acc = combine<T>(op, acc, value<T>(prod, r, g));
      want[i] = acc;
    }
    Status s = run_.plugin.run([&](rvl_coll_request** r) {
      return run_.plugin.api()->reduce_scatter(run_.comm, n ? send.data() : nullptr, n ? recv.data() : nullptr, n,
                                               dtype_, op, r);
    }, kTimeoutMs);
    check(std::string("reduce_scatter ") + kOpNames[op], n, s, recv, want);
  }

  void all_gather(int64_t n) {
    const int64_t total = n * run_.size;
    std::vector<Elem<T>> send(n), recv(total + 1, poison()), want(total);
    for (int64_t i = 0; i < n; ++i) send[i] = value<T>(false, run_.rank, i);
    for (int r = 0; r < run_.size; ++r)
      for (int64_t i = 0; i < n; ++i) want[r * n + i] = value<T>(false, r, i);
    Status s = run_.plugin.run([&](rvl_coll_request** r) {
      return run_.plugin.api()->all_gather(run_.comm, n ? send.data() : nullptr, n ? recv.data() : nullptr, n, dtype_, r);
    }, kTimeoutMs);
    check("all_gather", n, s, recv, want);
  }

  void broadcast(int64_t n, int root) {
    std::vector<Elem<T>> buf(n + 1, poison()), want(n);
    for (int64_t i = 0; i < n; ++i) {
      want[i] = value<T>(false, root, i);
      if (run_.rank == root) buf[i] = want[i];
    }
    Status s = run_.plugin.run([&](rvl_coll_request** r) {
      return run_.plugin.api()->broadcast(run_.comm, n ? buf.data() : nullptr, n, dtype_, root, r);
    }, kTimeoutMs);
    check("broadcast from rank " + std::to_string(root), n, s, buf, want);
  }

  // Every rank sends to the next and receives from the previous.
  void ring(int64_t n) {
    const int next = (run_.rank + 1) % run_.size, prev = (run_.rank + run_.size - 1) % run_.size;
    std::vector<Elem<T>> out(n), in(n + 1, poison()), want(n);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = value<T>(false, run_.rank, i);
      want[i] = value<T>(false, prev, i);
    }
    const rvl_collectives_api* api = run_.plugin.api();
    rvl_coll_request *rs = nullptr, *rr = nullptr;
    Status s = run_.plugin.take(api->recv(run_.comm, n ? in.data() : nullptr, n, dtype_, prev, 5, &rr));
    if (s.ok()) s = run_.plugin.take(api->send(run_.comm, n ? out.data() : nullptr, n, dtype_, next, 5, &rs));
    if (s.ok()) s = run_.plugin.take(api->request_wait(rs, kTimeoutMs));
    Status s2 = rr ? run_.plugin.take(api->request_wait(rr, kTimeoutMs)) : Status{};
    if (rs) api->request_free(rs);
    if (rr) api->request_free(rr);
    check("send/recv ring", n, s.ok() ? s2 : s, in, want);
  }

 private:
  static Elem<T> poison() {
    Elem<T> p;
    std::memset(&p, 0xCD, sizeof p);
    return p;
  }

  void check(const std::string& what, int64_t n, const Status& s, const std::vector<Elem<T>>& got,
             const std::vector<Elem<T>>& want) {
    const std::string c = what + ", " + name_ + ", " + std::to_string(n) + " elements";
    if (!s.ok()) return run_.fail(c, std::string(status_name(s.code)) + ": " + s.message);
    const size_t m = want.size();  // n, or n * size for all_gather
    for (size_t i = 0; i < m; ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(Elem<T>)) != 0)
        return run_.fail(c, "element " + std::to_string(i) + " differs from the reference");
    if (std::memcmp(&got[m], &poison_value_, sizeof(Elem<T>)) != 0)
      return run_.fail(c, "the element after the output was written (overrun)");
    run_.pass();
  }

  Runner& run_;
  rvl_dtype dtype_;
  const char* name_;
  const Elem<T> poison_value_ = poison();
};

// Element counts for a dtype: 0, 1, 3, 4 KiB, 256 KiB + 1 element, and 3 MiB (bytes) for one
// 1-byte and one 8-byte dtype (the large-message protocols depend on bytes, not on the dtype;
// every dtype at 3 MiB tripled the run's time on a 2-core machine).
std::vector<int64_t> counts(size_t elem, bool large) {
  std::vector<int64_t> c{0, 1, 3, static_cast<int64_t>(4096 / elem), static_cast<int64_t>(262144 / elem) + 1};
  if (large) c.push_back(static_cast<int64_t>(3 * 1048576 / elem));
  return c;
}

}  // namespace

void run_data_cases(Runner& run, bool big) {
  for (int64_t n : counts(1, false)) DTypeCases<bool>(run, RVL_DTYPE_BOOL, "bool").all(n);
  for (int64_t n : counts(1, true)) DTypeCases<uint8_t>(run, RVL_DTYPE_U8, "u8").all(n);
  for (int64_t n : counts(4, false)) DTypeCases<int32_t>(run, RVL_DTYPE_I32, "i32").all(n);
  for (int64_t n : counts(8, false)) DTypeCases<int64_t>(run, RVL_DTYPE_I64, "i64").all(n);
  for (int64_t n : counts(4, false)) DTypeCases<float>(run, RVL_DTYPE_F32, "f32").all(n);
  for (int64_t n : counts(8, true)) DTypeCases<double>(run, RVL_DTYPE_F64, "f64").all(n);
  if (big) {  // 64 MiB once: the size at which real gradient buckets live
    DTypeCases<float> f32(run, RVL_DTYPE_F32, "f32");
    f32.all_reduce(int64_t{64} << 18, RVL_COLL_SUM, false);
  }
}

}  // namespace ravel::comm_conformance
