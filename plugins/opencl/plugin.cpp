// The OpenCL backend: kernels rendered as OpenCL C from the shared lowering (codegen.cpp),
// compiled at run time by the driver (clBuildProgram), cached per source text.
//
// Memory model (Note [OpenCL buffers]): buffers, streams, events and their registry are the
// SDK's host backend (<ravel/host_backend.hpp>): a buffer is host memory, and a launch wraps the
// buffers it touches with clCreateBuffer(CL_MEM_USE_HOST_PTR), runs, and maps them back before
// it returns (the spec makes kernel writes visible to the host pointer only through a map). On a
// CPU device (PoCL, where CI runs it) that is zero-copy; on a discrete GPU the driver copies
// every wrapped buffer each launch: correct, not fast. A GPU-resident version keeps cl_mem
// buffers and writes the buffer and stream members itself, as plugins/level_zero does.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <ravel/host_backend.hpp>
#include <ravel/validate.hpp>

#include "codegen.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rvl::ocl {
namespace {

// The device: the first GPU of any platform, else the first device (RAVEL_OPENCL_DEVICE=N picks
// the N-th of all devices). Found once; never destroyed (the host may shut down at exit).
struct Cl {
  cl_device_id device = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::string name, reason, options;
  bool fp64 = false, gpu = false;
  cl_uint units = 1;
  std::mutex mu;  // one launch at a time: kernel arguments and the queue are shared
  std::unordered_map<std::string, cl_kernel> kernels;  // by source text
};

std::string info_string(cl_device_id d, cl_device_info what) {
  char buf[1024] = {};
  clGetDeviceInfo(d, what, sizeof buf - 1, buf, nullptr);
  return buf;
}

void check(cl_int e, const char* call) {
  if (e == CL_OUT_OF_HOST_MEMORY || e == CL_OUT_OF_RESOURCES || e == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    fail(RVL_STATUS_OUT_OF_MEMORY, std::string("opencl: ") + call + " failed with " + std::to_string(e));
  if (e != CL_SUCCESS) fail(RVL_STATUS_DEVICE_ERROR, std::string("opencl: ") + call + " failed with " + std::to_string(e));
}

Cl& cl() {
  static Cl* instance = [] {
    auto* c = new Cl;
    cl_uint np = 0;
    std::vector<cl_device_id> all, gpus;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
      c->reason = "no OpenCL platform (no ICD registered in /etc/OpenCL/vendors)";
      return c;
    }
    std::vector<cl_platform_id> ps(np);
    clGetPlatformIDs(np, ps.data(), nullptr);
    for (cl_platform_id p : ps) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
      std::vector<cl_device_id> ds(nd);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
      for (cl_device_id d : ds) {
        cl_device_type t = 0;
        clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, nullptr);
        all.push_back(d);
        if (t & CL_DEVICE_TYPE_GPU) gpus.push_back(d);
      }
    }
    const char* pick = std::getenv("RAVEL_OPENCL_DEVICE");
    const size_t n = pick && *pick ? size_t(std::strtoul(pick, nullptr, 10)) : 0;
    if (all.empty() || n >= all.size()) {
      c->reason = all.empty() ? "OpenCL platforms have no device" : "RAVEL_OPENCL_DEVICE is out of range";
      return c;
    }
    c->device = pick && *pick ? all[n] : gpus.empty() ? all[0] : gpus[0];
    cl_int e = CL_SUCCESS;
    c->ctx = clCreateContext(nullptr, 1, &c->device, nullptr, nullptr, &e);
    if (e == CL_SUCCESS) c->queue = clCreateCommandQueue(c->ctx, c->device, 0, &e);
    if (e != CL_SUCCESS) {
      c->device = nullptr;
      c->reason = "clCreateContext/clCreateCommandQueue failed with " + std::to_string(e);
      return c;
    }
    c->name = info_string(c->device, CL_DEVICE_NAME) + " (" + info_string(c->device, CL_DEVICE_VERSION) + ")";
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(c->device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, nullptr);
    c->fp64 = fp != 0;
    cl_device_type t = 0;
    clGetDeviceInfo(c->device, CL_DEVICE_TYPE, sizeof t, &t, nullptr);
    c->gpu = (t & CL_DEVICE_TYPE_GPU) != 0;
    clGetDeviceInfo(c->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->units, &c->units, nullptr);
    // Each instruction rounds on its own (no -cl-mad-enable); f32 division and sqrt correctly
    // rounded where the device can (OpenCL allows 2.5 and 3 ulp otherwise).
    cl_device_fp_config sp = 0;
    clGetDeviceInfo(c->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof sp, &sp, nullptr);
    c->options = "-cl-std=CL1.2";
    if (sp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) c->options += " -cl-fp32-correctly-rounded-divide-sqrt";
    return c;
  }();
  return *instance;
}

// The compiled kernel of `k`, built on first use; a build failure carries the driver's log.
cl_kernel kernel_for(Cl& c, const KernelSource& k) {
  auto it = c.kernels.find(k.source);
  if (it != c.kernels.end()) return it->second;
  const char* src = k.source.c_str();
  cl_int e = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(c.ctx, 1, &src, nullptr, &e);
  check(e, "clCreateProgramWithSource");
  if (clBuildProgram(prog, 1, &c.device, c.options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(prog, c.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(prog, c.device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(prog);
    fail(RVL_STATUS_DEVICE_ERROR, "opencl: kernel " + k.name + " (" + k.summary + ") does not build on " +
                                      c.name + ":\n" + log);
  }
  cl_kernel kern = clCreateKernel(prog, k.name.c_str(), &e);
  clReleaseProgram(prog);  // the kernel keeps it
  check(e, "clCreateKernel");
  return c.kernels.emplace(k.source, kern).first->second;
}

// Wraps the buffers of a launch (one cl_mem per distinct buffer), runs the kernel over `groups`
// work-groups, and maps every buffer back (Note [OpenCL buffers]).
void launch(const KernelSource& k, const std::vector<const rvl_buffer*>& args);

struct Hooks : rvl::host::DefaultHooks {
  static constexpr const char* name = "opencl";
  static constexpr const char* version = "0.1.0";
  static constexpr const char* description =
      "OpenCL backend: OpenCL C rendered by the shared lowering, compiled by the driver";
  static constexpr int32_t probe_score = 2;  // below tbb_cpu: chosen by placement, not by default

  // Every dtype (ABI 1.7's too): halves as bits computed in f32 (Note [Halves in kernels] in
  // <ravel/lowering/halves.hpp>); f64 only with cl_khr_fp64.
  static uint32_t dtypes() { return RVL_DTYPES_ALL & ~(cl().fp64 ? 0u : 1u << RVL_DTYPE_F64); }
  static bool available(std::string* reason) {
    Cl& c = cl();
    *reason = c.reason;
    return c.device != nullptr;
  }
  static uint32_t reduce_ops() {
    return (1u << RVL_REDUCE_SUM) | (1u << RVL_REDUCE_MAX) | (1u << RVL_REDUCE_PROD) | (1u << RVL_REDUCE_LOGSUMEXP);
  }
  static void describe_device(rvl_device_properties* out) {
    Cl& c = cl();
    rvl::host::set_device_name(out, c.name);
    out->kind = c.gpu ? RVL_DEVICE_GPU : RVL_DEVICE_CPU;
    out->compute_units = int32_t(c.units);
    out->dtypes = dtypes();
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_ops)) out->reduce_ops = reduce_ops();
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_epilogue_ops)) out->reduce_epilogue_ops = reduce_ops();
    // ABI 1.11: chains of them (Note [Row chains on GPUs], decision 70).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, reduce_chain_ops)) out->reduce_chain_ops = reduce_ops();
#if RVL_ABI_MINOR >= 6
    // Every row: the shared C renderer switches over all of them (a row it misses does not compile).
    if (RVL_HAS_MEMBER(out, rvl_device_properties, ops)) out->ops = RVL_OPS_ALL;
#endif
  }
  static void execute_program(const rvl_program* p);
  static void execute_contraction(const rvl_contraction* c);
};
using Host = rvl::host::Backend<Hooks>;

void launch(const KernelSource& k, const std::vector<const rvl_buffer*>& args) {
  if (k.groups == 0) return;
  Cl& c = cl();
  std::lock_guard<std::mutex> lock(c.mu);
  cl_kernel kern = kernel_for(c, k);
  std::map<const rvl_buffer*, cl_mem> mems;
  cl_int e = CL_SUCCESS;
  auto release = [&] { for (auto& [b, m] : mems) clReleaseMemObject(m); };
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const rvl_buffer* b = args[i];
      cl_mem& m = mems[b];
      if (!m) {  // an empty buffer has no memory to wrap: a small scratch block stands in
        m = b->size ? clCreateBuffer(c.ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, b->size, b->data, &e)
                    : clCreateBuffer(c.ctx, CL_MEM_READ_WRITE, 16, nullptr, &e);
        check(e, "clCreateBuffer");
      }
      check(clSetKernelArg(kern, cl_uint(i), sizeof(cl_mem), &m), "clSetKernelArg");
    }
    const size_t local = kGroup, global = size_t(k.groups) * kGroup;
    check(clEnqueueNDRangeKernel(c.queue, kern, 1, nullptr, &global, &local, 0, nullptr, nullptr),
          "clEnqueueNDRangeKernel");
    for (auto& [b, m] : mems) {
      if (!b->size) continue;
      void* p = clEnqueueMapBuffer(c.queue, m, CL_TRUE, CL_MAP_READ, 0, b->size, 0, nullptr, nullptr, &e);
      check(e, "clEnqueueMapBuffer");
      check(clEnqueueUnmapMemObject(c.queue, m, p, 0, nullptr, nullptr), "clEnqueueUnmapMemObject");
    }
    check(clFinish(c.queue), "clFinish");
  } catch (...) {
    clFinish(c.queue);
    release();
    throw;
  }
  release();
}

// The handles behind a kernel's operands, in argument order (the validator checked them).
void Hooks::execute_program(const rvl_program* p) {
  const validate::Program v = validate::validate_program(p, Host::buffer_ref<validate::BufferRef>, Hooks::dtypes(),
                                                          Hooks::reduce_ops(), Hooks::reduce_ops());
  std::vector<const rvl_buffer*> args;
  for (int32_t i = 0; i < p->n_inputs; ++i) args.push_back(Host::lookup_buffer(p->inputs[i].buffer, "input"));
  args.push_back(Host::lookup_buffer(p->output.buffer, "output"));
  launch(generate_program(v), args);
}

void Hooks::execute_contraction(const rvl_contraction* c) {
  const validate::Contraction v = validate::validate_contraction(c, Host::buffer_ref<validate::BufferRef>, Hooks::dtypes());
  std::vector<const rvl_buffer*> args{Host::lookup_buffer(c->a.buffer, "A"), Host::lookup_buffer(c->b.buffer, "B")};
  for (int32_t i = 0; i < c->n_epilogue_inputs; ++i)
    args.push_back(Host::lookup_buffer(c->epilogue_inputs[i].buffer, "epilogue input"));
  args.push_back(Host::lookup_buffer(c->c.buffer, "C"));
  launch(generate_contraction(v), args);
}

constexpr rvl_backend_api kTable = Host::table();

}  // namespace
}  // namespace rvl::ocl

RVL_DEFINE_BACKEND_ENTRY(rvl::ocl::kTable)
