// zecl: modules (SPIR-V -> SPIR 1.2 bitcode -> PoCL) and kernels.
#include <spirv/unified1/spirv.hpp11>

#include <cstring>

#include "zecl.hpp"

namespace zecl {

namespace {

using Kernels = std::map<std::string, std::vector<ArgKind>>;

// Kernel names and argument kinds from the module itself: entry points, pointer storage
// classes, and the parameters of each entry point's function.
bool parse_spirv(const uint32_t* w, size_t n, Kernels& out, bool& uses_fp64, std::string& err) {
  if (n < 5 || w[0] != spv::MagicNumber) return err = "not a SPIR-V module (bad magic)", false;
  std::map<uint32_t, std::string> entry;
  std::map<uint32_t, uint32_t> ptr_class;
  std::vector<ArgKind>* current = nullptr;
  for (size_t i = 5; i < n;) {
    const uint32_t op = w[i] & 0xffff, wc = w[i] >> 16;
    if (wc == 0 || i + wc > n) return err = "truncated SPIR-V instruction", false;
    switch (spv::Op(op)) {
      case spv::Op::OpCapability:
        uses_fp64 |= w[i + 1] == uint32_t(spv::Capability::Float64);
        break;
      case spv::Op::OpEntryPoint:
        if (w[i + 1] == uint32_t(spv::ExecutionModel::Kernel))
          entry[w[i + 2]] = std::string(reinterpret_cast<const char*>(&w[i + 3]),
                                        strnlen(reinterpret_cast<const char*>(&w[i + 3]), (wc - 3) * 4));
        break;
      case spv::Op::OpTypePointer: ptr_class[w[i + 1]] = w[i + 2]; break;
      case spv::Op::OpFunction: {
        auto e = entry.find(w[i + 2]);
        current = e == entry.end() ? nullptr : &out[e->second];
        break;
      }
      case spv::Op::OpFunctionParameter:
        if (current) {
          auto pc = ptr_class.find(w[i + 1]);
          ArgKind k = ArgKind::Value;
          if (pc != ptr_class.end())
            k = pc->second == uint32_t(spv::StorageClass::Workgroup) ? ArgKind::Local : ArgKind::Global;
          current->push_back(k);
        }
        break;
      case spv::Op::OpFunctionEnd: current = nullptr; break;
      default: break;
    }
    i += wc;
  }
  if (out.empty()) return err = "the module has no kernel entry point", false;
  return true;
}

ze_result_t module_create(ze_context_handle_t, ze_device_handle_t, const ze_module_desc_t* desc,
                          ze_module_handle_t* out, ze_module_build_log_handle_t* log_out) {
  auto* log = new _ze_module_build_log_handle_t{};
  if (log_out) *log_out = log;
  auto fail = [&](ze_result_t r, const std::string& msg) {
    log->text = msg;
    log_error("zeModuleCreate: " + msg);
    if (!log_out) delete log;
    return r;
  };
  if (!desc || !out) return fail(ZE_RESULT_ERROR_INVALID_NULL_POINTER, "NULL descriptor or output");
  if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV)
    return fail(ZE_RESULT_ERROR_INVALID_ENUMERATION, "only ZE_MODULE_FORMAT_IL_SPIRV is supported");
  if (!desc->pInputModule || desc->inputSize % 4)
    return fail(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY, "not a SPIR-V module (size)");
  Kernels kernels;
  bool fp64 = false;
  std::string err;
  if (!parse_spirv(reinterpret_cast<const uint32_t*>(desc->pInputModule), desc->inputSize / 4,
                   kernels, fp64, err))
    return fail(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY, err);
  State& s = state();
  if (fp64 && s.no_fp64)
    return fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE,
                "the module declares Float64, which this device does not support (ZECL_NO_FP64)");
  std::string bits;
  if (!translate(desc->pInputModule, desc->inputSize, bits, err))
    return fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, err);

  std::lock_guard<std::recursive_mutex> lock(s.mu);
  const unsigned char* bin = reinterpret_cast<const unsigned char*>(bits.data());
  size_t len = bits.size();
  cl_int status, e;
  cl_program prog = clCreateProgramWithBinary(s.ctx, 1, &s.dev, &len, &bin, &status, &e);
  if (e != CL_SUCCESS)
    return fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "clCreateProgramWithBinary: " + std::to_string(e));
  e = clBuildProgram(prog, 1, &s.dev, "-x spir -spir-std=1.2", nullptr, nullptr);
  size_t n = 0;
  clGetProgramBuildInfo(prog, s.dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string text(n, '\0');
  clGetProgramBuildInfo(prog, s.dev, CL_PROGRAM_BUILD_LOG, n, text.data(), nullptr);
  if (e != CL_SUCCESS) {
    clReleaseProgram(prog);
    return fail(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE, "clBuildProgram: " + text);
  }
  log->text = text;
  if (!log_out) delete log;
  *out = new _ze_module_handle_t{prog, std::move(kernels)};
  return ZE_RESULT_SUCCESS;
}

ze_result_t module_destroy(ze_module_handle_t m) {
  clReleaseProgram(m->program);
  delete m;
  return ZE_RESULT_SUCCESS;
}
ze_result_t module_kernel_names(ze_module_handle_t m, uint32_t* count, const char** names) {
  uint32_t i = 0;
  for (auto& kv : m->kernels) {
    if (names && i < *count) names[i] = kv.first.c_str();
    ++i;
  }
  if (!names) *count = i;
  return ZE_RESULT_SUCCESS;
}
ze_result_t log_destroy(ze_module_build_log_handle_t l) {
  delete l;
  return ZE_RESULT_SUCCESS;
}
ze_result_t log_string(ze_module_build_log_handle_t l, size_t* size, char* buf) {
  if (!buf) {
    *size = l->text.size() + 1;
    return ZE_RESULT_SUCCESS;
  }
  const size_t n = std::min(*size, l->text.size() + 1);
  if (n) {
    std::memcpy(buf, l->text.c_str(), n - 1);
    buf[n - 1] = 0;
  }
  return ZE_RESULT_SUCCESS;
}

ze_result_t kernel_create(ze_module_handle_t m, const ze_kernel_desc_t* desc, ze_kernel_handle_t* out) {
  auto sig = m->kernels.find(desc && desc->pKernelName ? desc->pKernelName : "");
  if (sig == m->kernels.end()) return log_error("zeKernelCreate: no such kernel"), ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  cl_int e;
  cl_kernel k = clCreateKernel(m->program, desc->pKernelName, &e);
  if (e != CL_SUCCESS) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  auto* kh = new _ze_kernel_handle_t{};
  kh->kernel = k;
  kh->name = desc->pKernelName;
  for (ArgKind a : sig->second) {
    Arg arg;
    arg.kind = a;
    kh->args.push_back(arg);
  }
  *out = kh;
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_destroy(ze_kernel_handle_t k) {
  clReleaseKernel(k->kernel);
  delete k;
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_group_size(ze_kernel_handle_t k, uint32_t x, uint32_t y, uint32_t z) {
  if (!x || !y || !z) return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
  k->group[0] = x;
  k->group[1] = y;
  k->group[2] = z;
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_suggest(ze_kernel_handle_t, uint32_t gx, uint32_t, uint32_t, uint32_t* x,
                           uint32_t* y, uint32_t* z) {
  *x = gx >= 64 ? 64 : 1;
  *y = *z = 1;
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_arg(ze_kernel_handle_t k, uint32_t i, size_t size, const void* v) {
  if (i >= k->args.size()) return log_error("argument index out of range"), ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  Arg& a = k->args[i];
  switch (a.kind) {
    case ArgKind::Global:
      if (size != sizeof(void*)) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
      a.ptr = v ? *static_cast<void* const*>(v) : nullptr;
      break;
    case ArgKind::Local:
      if (v) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
      a.local_size = size;
      break;
    case ArgKind::Value:
      if (!v) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
      a.bytes.assign(static_cast<const unsigned char*>(v), static_cast<const unsigned char*>(v) + size);
      break;
  }
  a.set = true;
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_properties(ze_kernel_handle_t k, ze_kernel_properties_t* p) {
  p->numKernelArgs = uint32_t(k->args.size());
  p->requiredGroupSizeX = p->requiredGroupSizeY = p->requiredGroupSizeZ = 0;
  p->requiredNumSubGroups = 0;
  p->requiredSubgroupSize = 0;
  p->maxSubgroupSize = 8;
  p->maxNumSubgroups = 1;
  p->localMemSize = p->privateMemSize = p->spillMemSize = 0;
  std::memset(&p->uuid, 0, sizeof p->uuid);
  return ZE_RESULT_SUCCESS;
}
ze_result_t kernel_name(ze_kernel_handle_t k, size_t* size, char* name) {
  if (!name) {
    *size = k->name.size() + 1;
    return ZE_RESULT_SUCCESS;
  }
  std::snprintf(name, *size, "%s", k->name.c_str());
  return ZE_RESULT_SUCCESS;
}

}  // namespace

void fill_module(ze_module_dditable_t* t) {
  t->pfnCreate = module_create;
  t->pfnDestroy = module_destroy;
  t->pfnGetKernelNames = module_kernel_names;
}
void fill_build_log(ze_module_build_log_dditable_t* t) {
  t->pfnDestroy = log_destroy;
  t->pfnGetString = log_string;
}
void fill_kernel(ze_kernel_dditable_t* t) {
  t->pfnCreate = kernel_create;
  t->pfnDestroy = kernel_destroy;
  t->pfnSetGroupSize = kernel_group_size;
  t->pfnSuggestGroupSize = kernel_suggest;
  t->pfnSetArgumentValue = kernel_arg;
  t->pfnGetProperties = kernel_properties;
  t->pfnGetName = kernel_name;
}

}  // namespace zecl
