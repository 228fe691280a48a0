// The tbb_cpu backend: info, devices, lifetime and kernels; buffers and copies are in memory.cpp,
// streams, events and synchronisation in streams.cpp, the table in table.cpp.
//
// Devices (Note [Devices]): RAVEL_TBB_DEVICES=N host devices, each with a share of the cores and
// its own memory accounting; with N > 1 each runs its work asynchronously on an in-order queue
// (Note [Device queues]). With one device (the default) every call completes its work before it
// returns, as this plugin always did: streams and events then only exist to be validated.
// Every member runs inside rvl::guard, so no exception crosses the ABI.
#include "block_cache.hpp"
#include "devices.hpp"
#include "gemm_kernels.hpp"
#include "kernel.hpp"
#include "members.hpp"

#include <tbb/info.h>

#include <unistd.h>  // sysconf: physical memory

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tbbcpu {

namespace {

void set_chars(char* dst, size_t size, const std::string& text) {
  std::memset(dst, 0, size);
  std::strncpy(dst, text.c_str(), size - 1);
}

uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}


}  // namespace

rvl_error* probe(rvl_probe_result* out) {
  return rvl::guard([&] {
    // A 1.0 host passes the 1.0 size: accept it, and write 1.1 members only when they fit.
    rvl::require_struct(out, "probe result", RVL_PROBE_RESULT_STRUCT_SIZE_1_0);
    out->device_count = current_device_count();  // throws on a bad RAVEL_TBB_DEVICES
    out->score = 10;  // the portable fallback: any accelerator should win
    if (RVL_HAS_MEMBER(out, rvl_probe_result, reason)) out->reason[0] = '\0';
  });
}

rvl_error* get_info(rvl_backend_info* out) {
  return rvl::guard([&] {
    rvl::require_struct(out, "backend info", RVL_BACKEND_INFO_STRUCT_SIZE_1_0);
    out->name = "tbb_cpu";
    out->version = "0.2.0";
    out->description = "CPU backend: block-interpreted kernel programs and packed GEMM on oneTBB; "
                       "RAVEL_TBB_DEVICES=N splits the cores into N devices";
  });
}

rvl_error* device_count(int32_t* out) {
  return rvl::guard([&] {
    if (out == nullptr) rvl::invalid("device_count: output pointer is NULL");
    *out = current_device_count();
  });
}

rvl_error* device_properties(int32_t device, rvl_device_properties* out) {
  return rvl::guard([&] {
    rvl::require_struct(out, "device properties", RVL_DEVICE_PROPERTIES_STRUCT_SIZE_1_0);
    Config config;
    uint64_t used = 0;
    bool async = false, initialized = false;
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.initialized) {
        initialized = true;
        config = s.config;
        if (device >= 0 && device < static_cast<int32_t>(s.devices.size())) {
          used = s.devices[static_cast<size_t>(device)]->used.load();
          async = s.devices[static_cast<size_t>(device)]->queue != nullptr;
        }
      }
    }
    if (!initialized) config = read_config();  // before initialize: what it would configure
    const int32_t n = config.devices;
    if (device < 0 || device >= n)
      rvl::invalid("device " + std::to_string(device) + " does not exist: this plugin has " + std::to_string(n) +
                   " device(s) (RAVEL_TBB_DEVICES)");
    const int threads = threads_for(config, device);
    const std::string numa =
        config.numa_nodes.empty() ? "" : "; numa_node=" + std::to_string(config.numa_nodes[static_cast<size_t>(device)]);
    const std::string t = std::to_string(threads);
    set_chars(out->name, sizeof out->name,
              n == 1 ? "CPU (oneTBB, " + t + " threads)"
                     : "CPU device " + std::to_string(device) + " of " + std::to_string(n) + " (oneTBB, " + t + " threads)");
    out->kind = RVL_DEVICE_CPU;
    out->memory_bytes = physical_memory() / static_cast<uint64_t>(n);
    out->compute_units = threads;
    out->dtypes = RVL_DTYPES_ALL;  // f16/bf16 through half_kernels.cpp
    out->max_rank = RVL_MAX_RANK;
    if (RVL_HAS_MEMBER(out, rvl_device_properties, details)) {
      set_chars(out->arch, sizeof out->arch, "x86-64");
      out->warp_size = 1;
      // threads and the memory in use first: the details are cut at 255 characters.
      set_chars(out->details, sizeof out->details,
                "threads=" + t + "; devices=" + std::to_string(n) + "; queue=" + (async ? "async" : "sync") +
                    "; used_bytes=" + std::to_string(used) + numa + "; gemm=" + gemm::isa_name() + "; " +
                    block_cache().details());
    }
    // ABI 1.3: buffers are host memory (kDLCPU, device id 0) on every tbb_cpu device.
    if (RVL_HAS_MEMBER(out, rvl_device_properties, dlpack_device_id)) {
      out->dlpack_device_type = 1;
      out->dlpack_device_id = 0;
    }
    // ABI 1.4: LOGSUMEXP is implemented (lse_reduce.cpp). RAVEL_TBB_NO_LOGSUMEXP=1 hides it, so
    // the core's fallback (max, then sum of exp) can be tested on this device.
    const char* no_lse = std::getenv("RAVEL_TBB_NO_LOGSUMEXP");
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_ops))
      out->reduce_ops = RVL_REDUCE_OPS_BASIC | (no_lse && *no_lse && *no_lse != '0' ? 0u : 1u << RVL_REDUCE_LOGSUMEXP);
    // ABI 1.6: every row (array_ops.cpp and evaluator.cpp switch over all of them, and a row
    // they miss does not compile).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, ops)) out->ops = RVL_OPS_ALL;
    // ABI 1.8 (im2col block): multi-axis contractions (gemm_pack_window.cpp). RAVEL_TBB_NO_WINDOW_GEMM=1
    // hides them, so the core's 1.0 path (conv's im2col copy) can be tested on this device.
    const char* no_window = std::getenv("RAVEL_TBB_NO_WINDOW_GEMM");
    if (RVL_HAS_MEMBER(out, rvl_device_properties, contraction_axes))
      out->contraction_axes = no_window && *no_window && *no_window != '0' ? 1 : RVL_MAX_RANK;
    // ABI 1.10: every reduction it has takes a row epilogue (row_epilogue.cpp; one pass over
    // memory for LOGSUMEXP rows). RAVEL_TBB_NO_ROW_EPILOGUE=1 hides it, so the host's two-kernel
    // form can be tested and measured on this device.
    const char* no_epi = std::getenv("RAVEL_TBB_NO_ROW_EPILOGUE");
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_epilogue_ops))
      out->reduce_epilogue_ops = no_epi && *no_epi && *no_epi != '0' ? 0u : out->reduce_ops;
    // ABI 1.11: every reduction it has may be a stage of a chain (row_chain.cpp; one pass over
    // memory per block of rows). RAVEL_TBB_NO_ROW_CHAIN=1 hides it (the host's separate kernels).
    const char* no_chain = std::getenv("RAVEL_TBB_NO_ROW_CHAIN");
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_chain_ops))
      out->reduce_chain_ops = no_chain && *no_chain && *no_chain != '0' ? 0u : out->reduce_ops;
  });
}

rvl_error* initialize() {
  return rvl::guard([&] {
    const Config config = read_config();  // before any state changes: a bad variable changes nothing
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.initialized) return;
    s.config = config;
    s.kernels_queued = 0;
    const uint64_t share = physical_memory() / static_cast<uint64_t>(config.devices);
    for (int32_t i = 0; i < config.devices; ++i) {
      auto d = std::make_unique<Device>();
      d->index = i;
      d->threads = threads_for(config, i);
      d->memory_limit = share;
      if (!config.numa_nodes.empty()) {  // RAVEL_TBB_DEVICES=numa: bound to its node
        d->numa_node = config.numa_nodes[static_cast<size_t>(i)];
        d->arena = std::make_unique<tbb::task_arena>(tbb::task_arena::constraints(d->numa_node, d->threads));
        d->arena->initialize();
      } else if (config.devices > 1) {
        d->arena = std::make_unique<tbb::task_arena>(d->threads);
        // Initialised here, not lazily by the queue's worker on its first task: oneTBB's arena
        // initialisation racing with another arena's teardown (a shutdown and re-initialise, as
        // Runtime::reset does) ended in a pure virtual call inside tbb::detail::r1::initialize.
        d->arena->initialize();
      }
      if (has_queue(config, i)) d->queue = std::make_unique<DeviceQueue>(i, d->arena.get(), queues_spin(config));
      s.devices.push_back(std::move(d));
    }
    s.initialized = true;
    block_cache().set_enabled(true);
  });
}

// Runs what is queued, joins every queue's worker, then frees what is still alive (the ABI says
// so). All queues are drained before any is destroyed: a task of one queue may wait for another.
void shutdown() {
  rvl::guard_void([&] {
    State& s = state();
    std::vector<std::unique_ptr<Device>> devices;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (!s.initialized) return;
      devices = std::move(s.devices);
      s.devices.clear();
    }
    for (auto& d : devices)
      if (d->queue) d->queue->drain();
    devices.clear();  // joins the workers
    for (const rvl_buffer* b : s.buffers.take_all()) destroy_buffer(b);
    for (const rvl_stream* st : s.streams.take_all()) delete st;
    for (const rvl_event* e : s.events.take_all()) delete e;
    std::lock_guard<std::mutex> lock(s.mu);
    s.initialized = false;
    block_cache().set_enabled(false);
  });
}

// ---- kernels: validated on the calling thread (errors are returned by the call), then run now
// or queued with a copy of what the host only lends for the call (the instructions).
namespace {

rvl::validate::BufferLookup lookup_on(int32_t device) {
  return [device](const rvl_buffer* b, const char* what) {
    const rvl_buffer* live = lookup_buffer(b, what, device);
    return rvl::validate::BufferRef{live->data, live->size};
  };
}

// RAVEL_TBB_TEST_FAULT=n: true for the n-th kernel since initialize (tests of asynchronous errors).
bool inject_fault() {
  State& s = state();
  return s.config.fault_at != 0 && ++s.kernels_queued == s.config.fault_at;
}

[[noreturn]] void injected() {
  rvl::fail(RVL_STATUS_DEVICE_ERROR, "injected fault (RAVEL_TBB_TEST_FAULT)");
}

// Runs a kernel now, on this thread, within the device's share of the cores.
template <class Fn>
void run_on(Device& d, Fn&& fn) {
  if (d.arena) d.arena->execute(std::forward<Fn>(fn));
  else fn();
}

}  // namespace

rvl_error* execute_program(int32_t device, rvl_stream* stream, const rvl_program* program) {
  return rvl::guard([&] {
    Device& d = device_at(device);
    stream_device(stream, device, "execute_program");
    // Every reduction takes a row epilogue here (row_epilogue.cpp), stated or not (ABI 1.10).
    // Every reduction takes part in a chain too (row_chain.cpp, ABI 1.11).
    Program p = rvl::validate::validate_program(program, lookup_on(device), RVL_DTYPES_ALL, ~0u, ~0u);
    const bool fault = inject_fault();
    if (!d.queue) {
      if (fault) injected();
      run_on(d, [&] { run_kernel(p); });
      return;
    }
    std::vector<rvl_instruction> code(p.ins, p.ins + p.n_ins), epilogue(p.epilogue, p.epilogue + p.n_epilogue);
    p.ins = code.data();  // a moved vector keeps its storage
    p.epilogue = epilogue.data();
    std::vector<std::vector<rvl_instruction>> stages;  // ABI 1.11: the stages' code likewise
    for (Program::Stage& st : p.stages) {
      stages.emplace_back(st.ins, st.ins + st.n_ins);
      st.ins = stages.back().data();
    }
    d.queue->push([p = std::move(p), code = std::move(code), epilogue = std::move(epilogue),
                   stages = std::move(stages), fault] {
      if (fault) injected();
      run_kernel(p);
    });
  });
}

rvl_error* execute_contraction(int32_t device, rvl_stream* stream, const rvl_contraction* contraction) {
  return rvl::guard([&] {
    Device& d = device_at(device);
    stream_device(stream, device, "execute_contraction");
    Contraction c = rvl::validate::validate_contraction(contraction, lookup_on(device), RVL_DTYPES_ALL);
    const bool fault = inject_fault();
    if (!d.queue) {
      if (fault) injected();
      run_on(d, [&] { run_kernel(c); });
      return;
    }
    std::vector<rvl_instruction> code(c.epilogue.ins, c.epilogue.ins + c.epilogue.n_ins);
    c.epilogue.ins = code.data();
    d.queue->push([c = std::move(c), code = std::move(code), fault] {
      if (fault) injected();
      run_kernel(c);
    });
  });
}

}  // namespace tbbcpu
