#include "runtime/execute.hpp"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "ravel/error.hpp"
#include "runtime/debug.hpp"
#include "runtime/capture.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/loaded_plugin.hpp"

namespace ravel::detail {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
thread_local int64_t t_launched = 0;
}  // namespace

int64_t kernels_launched_on_this_thread() { return t_launched; }

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
    case DType::I8: bytes[0] = static_cast<unsigned char>(n.value.i); break;
    case DType::I16: case DType::U16: { uint16_t v = static_cast<uint16_t>(n.value.i); std::memcpy(bytes, &v, 2); break; }
    case DType::U32: { uint32_t v = static_cast<uint32_t>(n.value.i); std::memcpy(bytes, &v, 4); break; }
    case DType::U64: std::memcpy(bytes, &n.value.i, 8); break;
    case DType::F16: { uint16_t v = rvl::f16_bits_from(n.value.f); std::memcpy(bytes, &v, 2); break; }
    case DType::BF16: { uint16_t v = rvl::bf16_bits_from(n.value.f); std::memcpy(bytes, &v, 2); break; }
  }
  n.buffer->write(bytes, dtype_size(n.dtype));
  n.buffer->mark_const_value();
}

namespace {

const std::shared_ptr<DeviceBuffer>& bound(const Runtime& rt, Node& n) {
  if (n.kind == NodeKind::Const && !n.buffer) realize_const(rt, n);  // read through padding
  if (!n.buffer)
    throw InternalError(concat("ravel: kernel input node ", n.id, " (", node_label(n), " ", shape_str(n.shape), " ", dtype_name(n.dtype),
                               ") has no buffer (an internal scheduler error; please report it)"));
  return n.buffer;
}

}  // namespace

double launch_kernel(const CachedKernel& ck, const BufferOf& buffer_of, DeviceBuffer& out) {
  ++t_launched;
  LoadedPlugin& plugin = out.plugin();
  if (ck.kind == CachedKernel::Kind::Transfer) {
    const DeviceBuffer& src = *buffer_of(ck.a_node);
    const auto t0 = Clock::now();
    // Between two devices of one plugin that has buffer_copy_peer (ABI 1.5): queued on both
    // devices, ordered after the work queued on either and before what follows (backend.h), so
    // nothing here waits. Otherwise (different plugins, or an older plugin) through host memory.
    if (&src.plugin() == &plugin && RAVEL_API_HAS(&plugin.api(), buffer_copy_peer)) {
      plugin.check(plugin.api().buffer_copy_peer(nullptr, src.handle(), 0, nullptr, out.handle(), 0, out.bytes()),
                   "copy from device " + std::to_string(src.device()) + " to device " + std::to_string(out.device()));
      return since(t0);
    }
    std::vector<unsigned char> host(static_cast<size_t>(out.bytes()));
    src.read(host.data(), host.size());
    out.write(host.data(), host.size());
    return since(t0);
  }
  // Up to 8 operands bind on the stack: this runs for every kernel of every step.
  rvl_operand small[8];
  std::vector<rvl_operand> large;
  rvl_operand* ins = small;
  if (ck.inputs.size() > 8) {
    large.resize(ck.inputs.size());
    ins = large.data();
  }
  for (size_t i = 0; i < ck.inputs.size(); ++i) {
    ins[i] = ck.inputs[i];
    ins[i].buffer = buffer_of(ck.input_nodes[i])->handle();
  }
  if (ck.kind == CachedKernel::Kind::Program) {
    rvl_program p = ck.program;
    p.inputs = ins;
    p.instructions = ck.instructions.data();
    if (!ck.epilogue.empty()) p.epilogue = ck.epilogue.data();  // ABI 1.10 (n_epilogue is set)
    rvl_reduce_stage stages[RVL_MAX_REDUCE_STAGES];  // ABI 1.11 (n_stages is set)
    for (size_t s = 0; s < ck.stages.size() && s < RVL_MAX_REDUCE_STAGES; ++s) {
      stages[s] = ck.stages[s];
      stages[s].instructions = ck.stage_code[s].data();
    }
    if (!ck.stages.empty()) p.stages = stages;
    p.output.buffer = out.handle();
    const auto t0 = Clock::now();
    plugin.check(plugin.api().execute_program(out.device(), nullptr, &p), "kernel program");
    return since(t0);
  }
  rvl_contraction c = ck.contraction;
  c.a.buffer = buffer_of(ck.a_node)->handle();
  c.b.buffer = buffer_of(ck.b_node)->handle();
  c.c.buffer = out.handle();
  if (!ck.instructions.empty()) {
    c.n_epilogue_inputs = static_cast<int32_t>(ck.inputs.size());
    c.epilogue_inputs = ins;
    c.n_epilogue = static_cast<int32_t>(ck.instructions.size());
    c.epilogue = ck.instructions.data();
  }
  RAVEL_CHECK(RAVEL_API_HAS(&plugin.api(), execute_contraction), DeviceError, plugin.name(),
              " does not implement execute_contraction (optional in the ABI); matmul needs it for now");
  const auto t0 = Clock::now();
  plugin.check(plugin.api().execute_contraction(out.device(), nullptr, &c), "contraction kernel");
  return since(t0);
}

void run_recipe(const Runtime& rt, const std::shared_ptr<const Recipe>& recipe, const std::vector<NodePtr>& locals,
                KernelStats& stats, int debug, const KernelMade& made_hook) {
  const Recipe& r = *recipe;
  KernelRecorder* recorder = active_recorder();
  const BufferOf buffer_of = [&](int32_t local) -> const std::shared_ptr<DeviceBuffer>& {
    return bound(rt, *locals[local]);
  };
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
      dt = launch_kernel(ck, buffer_of, *k.buffer);
      if (recorder) recorder->kernel_ran(recipe, ck, buffer_of, k);
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
    if (made_hook) {
      try {
        made_hook(k);  // k is realized and stays so: only the temporaries go if the hook fails
      } catch (...) {
        release_temporaries();
        throw;
      }
    }
    for (int32_t rd : ck.reads)
      if (--remaining[rd] == 0 && made[rd] && !keep[rd]) locals[rd]->buffer.reset();
  }
  stats.execute_seconds = exec;
}

}  // namespace ravel::detail
