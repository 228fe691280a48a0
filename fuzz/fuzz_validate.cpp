// Fuzzes the SDK's kernel validator (sdk/validate, <ravel/validate.hpp>) with random, mostly
// malformed rvl_program and rvl_contraction structs: absurd ranks, shapes, strides and offsets
// (INT64_MIN/MAX included), bad handles, dtypes, op codes and SSA sources. Either it throws
// rvl::Error, or what it accepted must keep its promises, which this target re-checks naively:
// every element of every valid box lies inside its buffer (and is read, so ASan sees a wrong one),
// instructions are in SSA order, LOADs name an input, and outputs never alias.
#include <fuzzer/FuzzedDataProvider.h>

#include <ravel/backend.hpp>
#include <ravel/validate.hpp>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

namespace {

constexpr int kBuffers = 4;
constexpr int64_t kMaxWalk = 1 << 12;  // walk boxes up to this many elements

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "validate fuzzer: %s\n", what);
  std::abort();
}

// A size or stride: usually small, sometimes an extreme that must be rejected cleanly.
int64_t value(FuzzedDataProvider& f, int64_t lo, int64_t hi) {
  switch (f.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return INT64_MIN;
    case 1: return INT64_MAX;
    case 2: return f.ConsumeIntegral<int64_t>();
    case 3: return INT64_MAX / f.ConsumeIntegralInRange<int64_t>(1, 64);
    default: return f.ConsumeIntegralInRange<int64_t>(lo, hi);
  }
}

struct Buffers {
  std::vector<std::byte> mem[kBuffers];
  rvl_buffer* handle(int i) { return reinterpret_cast<rvl_buffer*>(&mem[i]); }
  rvl::validate::BufferRef lookup(const rvl_buffer* b, const char* what) {
    for (int i = 0; i < kBuffers; ++i)
      if (b == handle(i)) return {mem[i].data(), mem[i].size()};
    rvl::invalid(std::string(what) + ": unknown buffer handle");
  }
};

void fill_view(FuzzedDataProvider& f, Buffers& bufs, rvl_operand& op, int rank, const int64_t* shape) {
  op.struct_size = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? f.ConsumeIntegral<uint8_t>() : sizeof(rvl_operand);
  const int h = f.ConsumeIntegralInRange<int>(-1, kBuffers - 1);
  op.buffer = h < 0 ? reinterpret_cast<rvl_buffer*>(uintptr_t{f.ConsumeIntegral<uint8_t>()}) : bufs.handle(h);
  op.dtype = f.ConsumeIntegralInRange<int32_t>(-1, RVL_DTYPE_COUNT_);
  op.view.struct_size = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? 0 : sizeof(rvl_view);
  op.view.offset = value(f, -2, 16);
  for (int d = 0; d < RVL_MAX_RANK; ++d) {
    const int64_t ext = d < rank ? shape[d] : 1;
    op.view.strides[d] = value(f, -8, 8);
    const bool full = f.ConsumeBool();
    op.view.valid_lo[d] = full ? 0 : value(f, -1, 4);
    op.view.valid_hi[d] = full ? ext : value(f, -1, 6);
  }
}

void fill_instructions(FuzzedDataProvider& f, std::vector<rvl_instruction>& ins, int n) {
  ins.resize(n);
  for (int j = 0; j < n; ++j) {
    rvl_instruction& I = ins[j];
    I.op = f.ConsumeIntegralInRange<int32_t>(-1, RVL_OP_COUNT_);
    I.dtype = f.ConsumeIntegralInRange<int32_t>(-1, RVL_DTYPE_COUNT_);
    for (int k = 0; k < 3; ++k)
      I.src[k] = f.ConsumeBool() ? -1 : f.ConsumeIntegralInRange<int32_t>(-2, j + 1);
    I.arg = f.ConsumeIntegralInRange<int32_t>(-1, 4);
    I.value.i = f.ConsumeIntegral<int64_t>();
  }
}

int64_t box_size(int rank, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    if (__builtin_mul_overflow(n, shape[d], &n)) return INT64_MAX;
  return n;
}

// Every index of the valid box: inside the buffer, and readable (ASan checks the read).
void walk(const rvl::validate::View& v, int rank, const int64_t* shape, size_t buffer_bytes) {
  if (v.empty || box_size(rank, shape) > kMaxWalk) return;
  const int64_t esz = static_cast<int64_t>(rvl::dtype_size(v.dtype));
  const int64_t elems = static_cast<int64_t>(buffer_bytes) / esz;
  int64_t idx[RVL_MAX_RANK];
  for (int d = 0; d < rank; ++d) idx[d] = v.lo[d];
  volatile std::byte sink{};
  while (true) {
    int64_t addr = v.offset;
    for (int d = 0; d < rank; ++d) addr += idx[d] * v.stride[d];
    if (addr < 0 || addr >= elems) fail("an accepted view addresses outside its buffer");
    for (int64_t b = 0; b < esz; ++b) sink = v.data[addr * esz + b];
    int d = rank - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < v.hi[d]) break;
      idx[d] = v.lo[d];
    }
    if (d < 0) break;
  }
  (void)sink;
}

// Distinct stored indices (reduced axes fixed at 0) must have distinct addresses.
void check_no_alias(const rvl::validate::View& v, int rank, const int64_t* shape, uint32_t reduced) {
  if (box_size(rank, shape) > kMaxWalk || box_size(rank, shape) == 0) return;
  std::vector<int64_t> seen;
  int64_t idx[RVL_MAX_RANK] = {};
  while (true) {
    int64_t addr = v.offset;
    for (int d = 0; d < rank; ++d) addr += idx[d] * v.stride[d];
    seen.push_back(addr);
    int d = rank - 1;
    for (; d >= 0; --d) {
      if ((reduced >> d) & 1u) continue;
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) fail("an accepted output aliases two stored elements");
}

void check_ssa(const rvl_instruction* ins, int n, size_t n_inputs) {
  for (int j = 0; j < n; ++j) {
    for (int k = 0; k < rvl::op_arity(ins[j].op); ++k)
      if (ins[j].src[k] < 0 || ins[j].src[k] >= j) fail("an accepted instruction breaks SSA order");
    if (ins[j].op == RVL_OP_LOAD && (ins[j].arg < 0 || static_cast<size_t>(ins[j].arg) >= n_inputs))
      fail("an accepted LOAD names no input");
  }
}

// ABI 1.11: in an accepted chain every ACC names a value [lo, hi) the list may read.
void check_acc(const rvl_instruction* ins, int n, int32_t lo, int32_t hi) {
  for (int j = 0; j < n; ++j)
    if (ins[j].op == RVL_OP_ACC && (ins[j].arg < lo || ins[j].arg >= hi)) fail("an accepted ACC names no value it may read");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider f(data, size);
  Buffers bufs;
  for (auto& m : bufs.mem) m.resize(f.ConsumeIntegralInRange<size_t>(0, 256));
  auto lookup = [&](const rvl_buffer* b, const char* what) { return bufs.lookup(b, what); };
  auto size_of = [&](const std::byte* p) {
    for (auto& m : bufs.mem)
      if (m.data() == p) return m.size();
    return size_t{0};
  };
  std::vector<rvl_instruction> ins;
  std::vector<rvl_operand> inputs(f.ConsumeIntegralInRange<int>(0, 4));

  if (f.ConsumeBool()) {
    rvl_program p{};
    p.struct_size = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? 8 : sizeof(rvl_program);
    p.rank = f.ConsumeIntegralInRange<int32_t>(-1, RVL_MAX_RANK + 1);
    for (auto& s : p.shape) s = value(f, 0, 4);
    const int rank = std::clamp(p.rank, 0, RVL_MAX_RANK);
    for (auto& in : inputs) fill_view(f, bufs, in, rank, p.shape);
    p.n_inputs = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? f.ConsumeIntegral<int32_t>() : static_cast<int32_t>(inputs.size());
    p.inputs = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? nullptr : inputs.data();
    p.reduce_op = f.ConsumeIntegralInRange<int32_t>(-1, 4);
    p.reduce_axes = f.ConsumeBool() ? 0 : f.ConsumeIntegral<uint32_t>() & 0x1ff;
    fill_view(f, bufs, p.output, rank, p.shape);
    fill_instructions(f, ins, f.ConsumeIntegralInRange<int>(0, 8));
    p.n_instructions = static_cast<int32_t>(ins.size());
    p.instructions = ins.empty() ? nullptr : ins.data();
    if (p.n_inputs > static_cast<int32_t>(inputs.size()) && p.inputs != nullptr) p.n_inputs = static_cast<int32_t>(inputs.size());
    // ABI 1.10 / 1.11: an epilogue and a chain of stages, from the bytes left (older corpus
    // inputs have none, so they still mean what they meant). Every capability bit is set, so
    // the validator's form checks are what is reached.
    std::vector<rvl_instruction> epi;
    std::vector<std::vector<rvl_instruction>> stage_code;
    std::vector<rvl_reduce_stage> stages;
    if (f.remaining_bytes() > 0 && f.ConsumeBool()) {
      fill_instructions(f, epi, f.ConsumeIntegralInRange<int>(0, 8));
      p.n_epilogue = static_cast<int32_t>(epi.size());
      p.epilogue = epi.empty() ? nullptr : epi.data();
      p.acc_dtype = f.ConsumeIntegralInRange<int32_t>(-1, RVL_DTYPE_COUNT_);
    }
    if (f.remaining_bytes() > 0 && f.ConsumeBool()) {
      const int n = f.ConsumeIntegralInRange<int>(-1, RVL_MAX_REDUCE_STAGES + 1);
      stage_code.resize(static_cast<size_t>(std::max(n, 0)));
      for (auto& c : stage_code) {
        fill_instructions(f, c, f.ConsumeIntegralInRange<int>(0, 4));
        rvl_reduce_stage st{};
        st.struct_size = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? 8 : sizeof(rvl_reduce_stage);
        st.reduce_op = f.ConsumeIntegralInRange<int32_t>(-1, 5);
        st.acc_dtype = f.ConsumeIntegralInRange<int32_t>(-1, RVL_DTYPE_COUNT_);
        st.n_instructions = static_cast<int32_t>(c.size());
        st.instructions = c.empty() ? nullptr : c.data();
        stages.push_back(st);
      }
      p.n_stages = n;
      p.stages = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? nullptr : stages.data();
    }
    try {
      rvl::validate::Program v = rvl::validate::validate_program(&p, lookup, RVL_DTYPES_ALL, ~0u, ~0u);
      for (const auto& in : v.inputs) walk(in, v.rank, v.shape, size_of(in.data));
      walk(v.out, v.rank, v.shape, size_of(v.out.data));
      check_no_alias(v.out, v.rank, v.shape, v.n_epilogue > 0 ? 0u : v.reduce_axes);
      check_ssa(v.ins, v.n_ins, v.inputs.size());
      check_ssa(v.epilogue, v.n_epilogue, v.inputs.size());
      const int32_t n_accs = 1 + static_cast<int32_t>(v.stages.size());
      for (size_t s = 0; s < v.stages.size(); ++s) {
        check_ssa(v.stages[s].ins, v.stages[s].n_ins, v.inputs.size());
        check_acc(v.stages[s].ins, v.stages[s].n_ins, 1, 1 + static_cast<int32_t>(s));
      }
      if (!v.stages.empty()) {
        check_acc(v.ins, v.n_ins, 1, n_accs);
        check_acc(v.epilogue, v.n_epilogue, 0, n_accs);
      }
    } catch (const rvl::Error&) {
    }
  } else {
    rvl_contraction c{};
    c.struct_size = f.ConsumeIntegralInRange<int>(0, 20) == 0 ? 8 : sizeof(rvl_contraction);
    c.dtype = f.ConsumeIntegralInRange<int32_t>(-1, RVL_DTYPE_COUNT_);
    c.batch_rank = f.ConsumeIntegralInRange<int32_t>(-1, RVL_MAX_RANK - 1);
    for (auto& s : c.batch_shape) s = value(f, 0, 3);
    c.m = value(f, 0, 4), c.n = value(f, 0, 4), c.k = value(f, 0, 4);
    const int br = std::clamp(c.batch_rank, 0, RVL_MAX_RANK - 2);
    int64_t sa[RVL_MAX_RANK], sb[RVL_MAX_RANK], sc[RVL_MAX_RANK];
    std::copy(c.batch_shape, c.batch_shape + RVL_MAX_RANK, sa);
    std::copy(sa, sa + RVL_MAX_RANK, sb), std::copy(sa, sa + RVL_MAX_RANK, sc);
    sa[br] = c.m, sa[br + 1] = c.k, sb[br] = c.k, sb[br + 1] = c.n, sc[br] = c.m, sc[br + 1] = c.n;
    fill_view(f, bufs, c.a, br + 2, sa);
    fill_view(f, bufs, c.b, br + 2, sb);
    fill_view(f, bufs, c.c, br + 2, sc);
    for (auto& in : inputs) fill_view(f, bufs, in, br + 2, sc);
    c.n_epilogue_inputs = static_cast<int32_t>(inputs.size());
    c.epilogue_inputs = inputs.data();
    fill_instructions(f, ins, f.ConsumeIntegralInRange<int>(0, 6));
    c.n_epilogue = static_cast<int32_t>(ins.size());
    c.epilogue = ins.empty() ? nullptr : ins.data();
    try {
      rvl::validate::Contraction v = rvl::validate::validate_contraction(&c, lookup);
      const int r = v.batch_rank + 2;
      int64_t va[RVL_MAX_RANK] = {}, vb[RVL_MAX_RANK] = {};
      std::copy(v.batch_shape, v.batch_shape + v.batch_rank, va);
      std::copy(v.batch_shape, v.batch_shape + v.batch_rank, vb);
      va[r - 2] = v.m, va[r - 1] = v.k, vb[r - 2] = v.k, vb[r - 1] = v.n;
      walk(v.a, r, va, size_of(v.a.data));
      walk(v.b, r, vb, size_of(v.b.data));
      walk(v.epilogue.out, r, v.epilogue.shape, size_of(v.epilogue.out.data));
      for (const auto& in : v.epilogue.inputs) walk(in, r, v.epilogue.shape, size_of(in.data));
      check_no_alias(v.epilogue.out, r, v.epilogue.shape, 0);
      check_ssa(v.epilogue.ins, v.epilogue.n_ins, v.epilogue.inputs.size());
    } catch (const rvl::Error&) {
    }
  }
  return 0;
}
