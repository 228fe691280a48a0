// zecl: a Level Zero driver for tests, running SPIR-V kernels on PoCL's CPU OpenCL device.
//
// Loaded by the stock Level Zero loader through ZE_ENABLE_ALT_DRIVERS=/abs/path/libzecl.so, so a
// Level Zero client (the plugin) is exercised end to end through the real loader, its
// validation layer included, on a machine without an Intel GPU. Facts it is built on
// (../shared/level-zero/README.md): the 1.8 loader requires 46 DDI table getters, explicitly
// exported; PoCL 3.1 takes no SPIR-V, so modules go SPIR-V -> `llvm-spirv -r` -> SPIR 1.2
// bitcode -> clBuildProgram("-x spir"); USM memory is fine-grained SVM.
//
// What makes it a *test* driver (environment variables):
//   ZECL_STRICT=1    immediate command lists execute only when the host synchronises (event,
//                    fence or queue wait), never at append: a client that reads results without
//                    waiting reads stale memory and fails its tests.
//   ZECL_NO_FP64=1   the device reports no fp64 and refuses modules declaring Float64, like
//                    Arc (DG2) and Xe-LP GPUs.
//   ZECL_DEBUG=1     prints why a call failed.
//   ZECL_DEVICES=N   N devices (1..8, default 1) of the one driver, all on the same PoCL device and
//                    its memory: the client's multi-device paths (copies between devices) run.
//   ZECL_LLVM_SPIRV  the translator (default llvm-spirv-14).
// Always on: every pointer a kernel receives and every copy range must lie inside a live
// allocation (or, for copies, in ordinary host memory); unset kernel arguments, unknown kernel
// names, garbage SPIR-V and closed/reset misuse of command lists are errors; events waited on
// by the host that nothing will signal are reported instead of hanging.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <level_zero/ze_ddi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

struct _ze_driver_handle_t { int unused; };
struct _ze_device_handle_t { int unused; };
struct _ze_context_handle_t { int unused; };
struct _ze_module_build_log_handle_t { std::string text; };
struct _ze_event_pool_handle_t { uint32_t count; };
struct _ze_event_handle_t { bool signaled = false; };
struct _ze_fence_handle_t { bool signaled = false; };
struct _ze_command_queue_handle_t { int unused; };

namespace zecl {

enum class ArgKind { Value, Global, Local };

struct Arg {
  ArgKind kind = ArgKind::Value;
  bool set = false;
  std::vector<unsigned char> bytes;  // Value
  void* ptr = nullptr;               // Global
  size_t local_size = 0;             // Local
};

// A command plus the events it waits on and signals; run() returns its result.
struct Command {
  std::vector<ze_event_handle_t> waits;
  ze_event_handle_t signal = nullptr;
  std::function<ze_result_t()> run;
};

struct CommandList {
  bool immediate = false;
  bool closed = false;
  std::deque<Command> commands;
};

struct State {
  std::recursive_mutex mu;
  bool init_done = false;
  ze_result_t init_result = ZE_RESULT_ERROR_UNINITIALIZED;
  cl_device_id dev = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  bool strict = false, no_fp64 = false, debug = false;
  std::map<uintptr_t, size_t> allocs;  // base -> size
  // base -> the context it was allocated in and its USM kind, so zeMemGetAllocProperties answers
  // as a real driver: UNKNOWN for memory of another context (the plugin's buffer_wrap test).
  std::map<uintptr_t, std::pair<ze_context_handle_t, ze_memory_type_t>> alloc_kind;
  std::map<uintptr_t, ze_device_handle_t> alloc_device;  // device memory: the device it was allocated on
  std::vector<CommandList*> immediate_lists;  // for strict-mode flushing
};
State& state();

bool log_error(const std::string& what);  // prints with ZECL_DEBUG=1; returns false
// Whether [p, p + n) lies in one live allocation; `n` 0 means just p.
bool in_allocation(const void* p, size_t n);
// The base of the live allocation holding p, or 0.
uintptr_t allocation_base(const void* p);

// Runs queued commands of every immediate list until they are empty (strict mode's host
// synchronisation point); returns the first failure.
ze_result_t flush_all();

// SPIR-V -> SPIR 1.2 bitcode for PoCL 3.1, which has no SPIR-V front end (translate.cpp).
bool translate(const void* spirv, size_t bytes, std::string& bitcode, std::string& err);
// The same in process through the translator's library, where the build found it
// (translate_in_process.cpp); false with `err` set when the module is rejected.
bool translate_in_process(const void* spirv, size_t bytes, std::string& bitcode, std::string& err);

}  // namespace zecl

struct _ze_module_handle_t {
  cl_program program = nullptr;
  std::map<std::string, std::vector<zecl::ArgKind>> kernels;  // name -> argument kinds
};
struct _ze_kernel_handle_t {
  cl_kernel kernel = nullptr;
  std::string name;
  std::vector<zecl::Arg> args;
  uint32_t group[3] = {1, 1, 1};
};

struct _ze_command_list_handle_t : zecl::CommandList {};

// The table getters fill these in (one file per concept: runtime.cpp, module.cpp, commands.cpp).
namespace zecl {
void fill_global(ze_global_dditable_t* t);
void fill_driver(ze_driver_dditable_t* t);
void fill_device(ze_device_dditable_t* t);
void fill_context(ze_context_dditable_t* t);
void fill_mem(ze_mem_dditable_t* t);
void fill_module(ze_module_dditable_t* t);
void fill_build_log(ze_module_build_log_dditable_t* t);
void fill_kernel(ze_kernel_dditable_t* t);
void fill_event_pool(ze_event_pool_dditable_t* t);
void fill_event(ze_event_dditable_t* t);
void fill_fence(ze_fence_dditable_t* t);
void fill_queue(ze_command_queue_dditable_t* t);
void fill_list(ze_command_list_dditable_t* t);
}  // namespace zecl
