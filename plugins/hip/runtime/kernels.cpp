// Note [Kernel keys]
// A training loop realises the same graph every step around new buffers, so a kernel is looked up
// by a key that spells every structural fact the generator bakes into the source (shape, views'
// strides, offsets and validity boxes, dtypes, instructions, reduction) but not the buffers.
// A hit costs building the key (a few hundred bytes) and one hash lookup. A miss generates the
// source, then looks in the on-disk cache (by source + arch + compiler), then compiles.
#include "kernels.hpp"

#include "device.hpp"
#include "rtc.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rvl::hip {

namespace {

template <class T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_view(std::string& k, const validate::View& v, int rank) {
  put(k, v.empty);
  put(k, v.dtype);
  put(k, v.offset);
  for (int d = 0; d < rank; ++d) put(k, v.stride[d]), put(k, v.lo[d]), put(k, v.hi[d]);
}

void put_instructions(std::string& k, const rvl_instruction* ins, int32_t n) {
  put(k, n);
  for (int32_t j = 0; j < n; ++j) {
    const rvl_instruction& I = ins[j];
    put(k, I.op), put(k, I.dtype), put(k, I.src), put(k, I.arg);
    if (I.op == RVL_OP_CONST) put(k, I.value.i);
  }
}

void put_program(std::string& k, const validate::Program& p) {
  put(k, p.rank);
  for (int d = 0; d < p.rank; ++d) put(k, p.shape[d]);
  put(k, p.reduce_op);
  put(k, p.reduce_axes);
  put(k, int32_t(p.inputs.size()));
  for (const validate::View& v : p.inputs) put_view(k, v, p.rank);
  put_view(k, p.out, p.rank);
  put_instructions(k, p.ins, p.n_ins);
  put_instructions(k, p.epilogue, p.n_epilogue);  // ABI 1.10: a row epilogue is part of the kernel
  if (p.n_epilogue > 0) put(k, p.acc_dtype);
  // ABI 1.11: a chain's stages too (two programs differing only there are two kernels).
  put(k, int32_t(p.stages.size()));
  for (const validate::Program::Stage& st : p.stages) {
    put(k, st.reduce_op), put(k, st.acc_dtype);
    put_instructions(k, st.ins, st.n_ins);
  }
}

// RAVEL_HIP_DUMP_DIR=dir: every generated source is also written to dir/NAME.cu (what the
// compile tests feed to NVRTC and hiprtc). RAVEL_HIP_DRY_RUN=1 (emulator only): generate and
// dump, but neither compile nor launch, so a conformance run enumerates its kernels in seconds.
void dump_source(const KernelSource& src) noexcept {
  const char* dir = std::getenv("RAVEL_HIP_DUMP_DIR");
  if (!dir || !*dir) return;
  try {
    std::ofstream(std::string(dir) + "/" + src.name + ".cu") << src.source;
  } catch (...) {
  }
}

int debug_level() {
  const char* e = std::getenv("RAVEL_DEBUG");
  return e ? std::atoi(e) : 0;
}

}  // namespace

bool dry_run() {
#if defined(RAVEL_HIP_EMULATED)
  const char* e = std::getenv("RAVEL_HIP_DRY_RUN");
  return e && *e && *e != '0';
#else
  return false;
#endif
}

std::string program_key(const validate::Program& p) {
  std::string k = "P";
  put_program(k, p);
  return k;
}

std::string contraction_key(const validate::Contraction& c) {
  std::string k = "C";
  put(k, c.dtype), put(k, c.batch_rank), put(k, c.m), put(k, c.n), put(k, c.k);
  for (int d = 0; d < c.batch_rank; ++d) put(k, c.batch_shape[d]);
  put_view(k, c.a, c.batch_rank + 2);
  put_view(k, c.b, c.batch_rank + 2);
  put_program(k, c.epilogue);
  return k;
}

const Kernel& KernelCache::get(int32_t device, const std::string& key,
                               KernelSource (*gen)(const void*, const Target&), const void* arg) {
  const std::string full_key = std::to_string(device) + ":" + key;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kernels_.find(full_key);
  if (it != kernels_.end()) return *it->second;
  const Target& t = hip::device(device).target;
  const KernelSource src = gen(arg, t);
  auto k = std::make_unique<Kernel>();
  k->name = src.name;
  k->summary = src.summary;
  for (int i = 0; i < 3; ++i) k->block[i] = src.block[i], k->grid[i] = src.grid[i];
  if (src.grid[0] != 0) {
    if (debug_level() >= 3)
      std::fprintf(stderr, "ravel hip: kernel %s (%s)\n%s\n", src.name.c_str(), src.summary.c_str(),
                   src.source.c_str());
    dump_source(src);
    if (dry_run()) return *kernels_.emplace(full_key, std::move(k)).first->second;
    const std::string key_text = disk_cache_key(src, t);
    std::string code;
    if (!disk_cache_load(key_text, &code)) {
      code = compile_kernel(src, t);
      disk_cache_store(key_text, code);
    }
    check(hipModuleLoadData(&k->module, code.data()), "loading kernel " + src.name);
    const hipError_t e = hipModuleGetFunction(&k->function, k->module, src.name.c_str());
    if (e != hipSuccess) {
      (void)hipModuleUnload(k->module);
      check(e, "finding kernel " + src.name + " in its module");
    }
  }
  return *kernels_.emplace(full_key, std::move(k)).first->second;
}

const Kernel& KernelCache::program(int32_t device, const validate::Program& p) {
  return get(device, program_key(p), [](const void* a, const Target& t) {
    return generate_program(*static_cast<const validate::Program*>(a), t);
  }, &p);
}

const Kernel& KernelCache::contraction(int32_t device, const validate::Contraction& c) {
  return get(device, contraction_key(c), [](const void* a, const Target& t) {
    return generate_contraction(*static_cast<const validate::Contraction*>(a), t);
  }, &c);
}

void KernelCache::clear() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, k] : kernels_)
    if (k->module) (void)hipModuleUnload(k->module);
  kernels_.clear();
}

size_t KernelCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return kernels_.size();
}

KernelCache& kernel_cache() {
  static auto* c = new KernelCache;
  return *c;
}

}  // namespace rvl::hip
