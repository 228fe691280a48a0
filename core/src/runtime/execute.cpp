#include "runtime/execute.hpp"

#include <chrono>
#include <cstring>
#include <memory>

#include "ravel/error.hpp"
#include "runtime/debug.hpp"
#include "runtime/device_buffer.hpp"

namespace ravel::detail {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

void realize_const(const Runtime& rt, Node& n) {
  if (n.buffer) return;
  auto plugin = rt.plugin_for(n.device);
  n.buffer = std::make_shared<DeviceBuffer>(plugin, n.device.index(), dtype_size(n.dtype));
  unsigned char bytes[8] = {};
  switch (n.dtype) {
    case DType::Bool: case DType::U8: bytes[0] = static_cast<unsigned char>(n.value.i); break;
    case DType::I32: { int32_t v = static_cast<int32_t>(n.value.i); std::memcpy(bytes, &v, 4); break; }
    case DType::I64: std::memcpy(bytes, &n.value.i, 8); break;
    case DType::F32: { float v = static_cast<float>(n.value.f); std::memcpy(bytes, &v, 4); break; }
    case DType::F64: std::memcpy(bytes, &n.value.f, 8); break;
  }
  n.buffer->write(bytes, dtype_size(n.dtype));
}

namespace {

rvl_buffer* bound(const Runtime& rt, Node& n) {
  if (n.kind == NodeKind::Const && !n.buffer) realize_const(rt, n);  // read through padding
  if (!n.buffer) throw InternalError("ravel: kernel input has no buffer (an internal scheduler error; please report it)");
  return n.buffer->handle();
}

// Binds `ck` to the buffers of this graph's nodes and runs it; returns seconds in the plugin.
double run_kernel(const Runtime& rt, const CachedKernel& ck, const std::vector<NodePtr>& locals, Node& out) {
  std::vector<rvl_operand> ins = ck.inputs;
  for (size_t i = 0; i < ins.size(); ++i) ins[i].buffer = bound(rt, *locals[ck.input_nodes[i]]);
  LoadedPlugin& plugin = out.buffer->plugin();
  if (ck.kind == CachedKernel::Kind::Transfer) {
    // Through the host: ABI v1 has no device-to-device copy between plugins.
    Node& src = *locals[ck.a_node];
    bound(rt, src);
    std::vector<unsigned char> host(static_cast<size_t>(out.buffer->bytes()));
    const auto t0 = Clock::now();
    src.buffer->read(host.data(), host.size());
    out.buffer->write(host.data(), host.size());
    return since(t0);
  }
  if (ck.kind == CachedKernel::Kind::Program) {
    rvl_program p = ck.program;
    p.inputs = ins.data();
    p.instructions = ck.instructions.data();
    p.output.buffer = out.buffer->handle();
    const auto t0 = Clock::now();
    plugin.check(plugin.api().execute_program(out.device.index(), nullptr, &p), "kernel program");
    return since(t0);
  }
  rvl_contraction c = ck.contraction;
  c.a.buffer = bound(rt, *locals[ck.a_node]);
  c.b.buffer = bound(rt, *locals[ck.b_node]);
  c.c.buffer = out.buffer->handle();
  if (!ck.instructions.empty()) {
    c.n_epilogue_inputs = static_cast<int32_t>(ins.size());
    c.epilogue_inputs = ins.data();
    c.n_epilogue = static_cast<int32_t>(ck.instructions.size());
    c.epilogue = ck.instructions.data();
  }
  RAVEL_CHECK(RAVEL_API_HAS(&plugin.api(), execute_contraction), DeviceError, plugin.name(),
              " does not implement execute_contraction (optional in the ABI); matmul needs it for now");
  const auto t0 = Clock::now();
  plugin.check(plugin.api().execute_contraction(out.device.index(), nullptr, &c), "contraction kernel");
  return since(t0);
}

}  // namespace

void run_recipe(const Runtime& rt, const Recipe& r, const std::vector<NodePtr>& locals, KernelStats& stats, int debug) {
  std::vector<int32_t> remaining(locals.size(), 0);
  std::vector<uint8_t> made(locals.size(), 0), keep(locals.size(), 0);  // made: given a buffer here
  for (const auto& ck : r.kernels)
    for (int32_t rd : ck.reads) ++remaining[rd];
  for (int32_t k : r.keep) keep[k] = 1;
  auto release_temporaries = [&] {
    for (size_t i = 0; i < locals.size(); ++i)
      if (made[i] && !keep[i]) locals[i]->buffer.reset();
  };
  double exec = 0;
  for (const auto& ck : r.kernels) {
    Node& k = *locals[ck.out];
    if (k.buffer) continue;
    auto plugin = rt.plugin_for(k.device);
    const uint64_t bytes = static_cast<uint64_t>(k.numel()) * dtype_size(k.dtype);
    k.buffer = std::make_shared<DeviceBuffer>(plugin, k.device.index(), bytes);
    stats.bytes_allocated += static_cast<int64_t>(bytes);
    stats.bytes_written += static_cast<int64_t>(bytes);
    made[ck.out] = 1;
    double dt = 0;
    try {
      dt = run_kernel(rt, ck, locals, k);
    } catch (...) {
      k.buffer.reset();  // never leave a node looking realized with garbage in it
      release_temporaries();
      throw;
    }
    ++(ck.kind == CachedKernel::Kind::Program ? stats.programs
       : ck.kind == CachedKernel::Kind::Contraction ? stats.contractions : stats.transfers);
    if (ck.kind == CachedKernel::Kind::Transfer) stats.bytes_transferred += ck.bytes_read;
    exec += dt;
    stats.bytes_read += ck.bytes_read;
    if (debug >= 1) print_kernel(ck, k, dt);
    for (int32_t rd : ck.reads)
      if (--remaining[rd] == 0 && made[rd] && !keep[rd]) locals[rd]->buffer.reset();
  }
  stats.execute_seconds = exec;
}

}  // namespace ravel::detail
