// Shared helpers for the ABI suite: the dlopen'ed plugin, host mirrors of device buffers,
// dtype-independent values; the reference evaluator is the SDK's (Ravel::reference).
#pragma once

#include <ravel/backend.h>
#include <ravel/conformance/reference.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace abitest {

// The plugin's table, loaded once by the global fixture and initialized.
const rvl_backend_api& api();

// Values and host mirrors of buffers are the SDK reference's (`i` for bool and integers, `f` for
// floats; HostBuf holds a buffer's bytes read as `dtype` elements).
using Val = rvl::ref::Value;
using HostBuf = rvl::ref::HostBuffer;
using rvl::ref::is_float;
inline Val I(int64_t i) { return rvl::ref::ival(i); }
inline Val F(double f) { return rvl::ref::fval(f); }
HostBuf make_buf(int32_t dtype, const std::vector<Val>& vals);
HostBuf filled(int32_t dtype, int64_t n, const std::function<Val(int64_t)>& f);

// RAII device buffer.
class DevBuf {
 public:
  explicit DevBuf(uint64_t bytes);
  explicit DevBuf(const HostBuf& h);  // allocate + upload
  ~DevBuf();
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  rvl_buffer* get() const { return b_; }
  HostBuf read(int32_t dtype) const;
  void release() { b_ = nullptr; }  // after a deliberate buffer_free

 private:
  rvl_buffer* b_ = nullptr;
  uint64_t size_ = 0;
};

// Requires success; on failure prints the plugin's message and destroys the error.
void ok(rvl_error* e, const std::string& ctx = "");
// Requires an error with `code` whose message contains `keyword` (case-sensitive).
void expect_error(rvl_error* e, const std::string& keyword,
                  rvl_status code = RVL_STATUS_INVALID_ARGUMENT);

rvl_view contiguous(int rank, const int64_t* shape, int64_t offset = 0);
rvl_view make_view(int rank, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                   int64_t offset = 0);
rvl_operand operand(rvl_buffer* b, int32_t dtype, const rvl_view& v);
rvl_instruction ins(int32_t op, int32_t dtype, int32_t s0 = -1, int32_t s1 = -1, int32_t s2 = -1,
                    int32_t arg = 0);
rvl_instruction load(int32_t dtype, int32_t arg);
rvl_instruction cnst_i(int32_t dtype, int64_t v);
rvl_instruction cnst_f(int32_t dtype, double v);

// Element-wise comparison of two mirrors: exact, NaN == NaN, -0 == +0; `rel` > 0 allows a
// relative float tolerance.
void check_same(const HostBuf& got, const HostBuf& want, const std::string& ctx, double rel = 0);

// A program with host-side inputs: runs it on the plugin and on the reference and compares the
// whole output buffer (so elements the program must not touch are checked too).
struct ProgramCase {
  std::vector<int64_t> shape;
  std::vector<HostBuf> inputs;
  std::vector<rvl_view> views;
  std::vector<rvl_instruction> code;
  int32_t reduce_op = RVL_REDUCE_NONE;
  uint32_t reduce_axes = 0;
  HostBuf out;  // initial contents of the output buffer (also fixes its dtype)
  rvl_view out_view{};
  void run(const std::string& ctx, double rel = 0) const;
};

}  // namespace abitest
