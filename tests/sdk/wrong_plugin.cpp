// A deliberately wrong backend for testing the conformance runner itself: it forwards every
// call to the real tbb_cpu plugin, then corrupts the results of execute_program.
//   WRONG_ADD_OFF_BY_ONE: a program ending in an f32/i32 ADD gets element 0 of its output + 1.
//   WRONG_WRITE_PAST_END: one byte just past the output buffer's data region is overwritten
//                         (the runner's guard region must catch it).
//   WRONG_CRASH:          a program ending in SIN segfaults, one ending in EXP2 aborts, one ending
//                         in LOG2 hangs (the runner must fail just those cases and go on).
#include <ravel/backend.h>

#include <dlfcn.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

const rvl_backend_api* real() {
  static const rvl_backend_api* api = [] {
    void* h = dlopen(RAVEL_REAL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "wrong_plugin: %s\n", dlerror()); std::abort(); }
    auto entry = reinterpret_cast<rvl_backend_entry_fn>(dlsym(h, RVL_BACKEND_ENTRY_SYMBOL));
    return entry();
  }();
  return api;
}

rvl_error* wrong_execute_program(int32_t device, rvl_stream* stream, const rvl_program* p) {
#if defined(WRONG_CRASH)
  if (p != nullptr && p->n_instructions >= 1 && p->struct_size >= sizeof(rvl_program)) {
    const int32_t op = p->instructions[p->n_instructions - 1].op;
    if (op == RVL_OP_SIN) std::raise(SIGSEGV);
    if (op == RVL_OP_EXP2) std::abort();
    if (op == RVL_OP_LOG2) for (;;) pause();
  }
#endif
  rvl_error* e = real()->execute_program(device, stream, p);
  if (e || p == nullptr || p->n_instructions < 1) return e;
#if defined(WRONG_ADD_OFF_BY_ONE)
  const rvl_instruction& last = p->instructions[p->n_instructions - 1];
  if (last.op == RVL_OP_ADD && (last.dtype == RVL_DTYPE_I32 || last.dtype == RVL_DTYPE_F32)) {
    const uint64_t at = uint64_t(p->output.view.offset) * 4;
    if (last.dtype == RVL_DTYPE_I32) {
      int32_t v = 0;
      real()->buffer_read(stream, p->output.buffer, at, &v, 4);
      v += 1;
      real()->buffer_write(stream, p->output.buffer, at, &v, 4);
    } else {
      float v = 0;
      real()->buffer_read(stream, p->output.buffer, at, &v, 4);
      v += 1;
      real()->buffer_write(stream, p->output.buffer, at, &v, 4);
    }
  }
#elif defined(WRONG_WRITE_PAST_END)
  uint64_t size = 0;
  if (!real()->buffer_size(p->output.buffer, &size) && size > 64) {
    const uint8_t junk = 0x11;  // the first byte of the runner's trailing guard region
    real()->buffer_write(stream, p->output.buffer, size - 64, &junk, 1);
  }
#endif
  return nullptr;
}

rvl_backend_api make_table() {
  rvl_backend_api t = *real();
  t.execute_program = wrong_execute_program;
  return t;
}

}  // namespace

extern "C" RVL_EXPORT const rvl_backend_api* rvl_backend_entry(void) {
  static const rvl_backend_api table = make_table();
  return &table;
}
