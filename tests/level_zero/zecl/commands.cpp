// zecl: command lists, queues, events and fences.
//
// Every list keeps a queue of commands. An immediate list runs its queue right after each append
// unless ZECL_STRICT=1, in which case queues run only at host synchronisation points (event /
// fence / queue waits and status queries): a client that forgets a wait sees stale data. A
// command waiting on an unsignalled event blocks its list until another list signals it.
// Pointers are checked when a command is appended *and* when it runs, so a buffer freed while
// work that uses it is still queued is caught too.
#include <algorithm>
#include <cstring>

#include "zecl.hpp"

namespace zecl {

namespace {

// Runs the runnable prefix of a list's queue; returns the first failure (the failing command
// is dropped so the list does not wedge).
ze_result_t run_list(CommandList& l, bool& progressed) {
  while (!l.commands.empty()) {
    Command& c = l.commands.front();
    for (ze_event_handle_t e : c.waits)
      if (!e->signaled) return ZE_RESULT_SUCCESS;  // blocked
    const ze_result_t r = c.run();
    if (r == ZE_RESULT_SUCCESS && c.signal) c.signal->signaled = true;
    l.commands.pop_front();
    progressed = true;
    if (r != ZE_RESULT_SUCCESS) return r;
  }
  return ZE_RESULT_SUCCESS;
}

bool check_range(const void* p, size_t n, const char* what) {
  if (!in_allocation(p, 0)) return true;  // ordinary host memory: the client's business
  if (in_allocation(p, n)) return true;
  return log_error(std::string(what) + ": range runs past the end of its allocation");
}

ze_result_t append(CommandList* l, ze_event_handle_t signal, uint32_t n_wait,
                   ze_event_handle_t* waits, std::function<ze_result_t()> run) {
  if (!l) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (l->closed) return log_error("append to a closed command list"), ZE_RESULT_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  l->commands.push_back({std::vector<ze_event_handle_t>(waits, waits + n_wait), signal, std::move(run)});
  if (l->immediate && !s.strict) return flush_all();
  return ZE_RESULT_SUCCESS;
}

ze_result_t list_create(ze_context_handle_t, ze_device_handle_t, const ze_command_list_desc_t*,
                        ze_command_list_handle_t* out) {
  *out = new _ze_command_list_handle_t{};
  return ZE_RESULT_SUCCESS;
}
ze_result_t list_create_immediate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t*,
                                  ze_command_list_handle_t* out) {
  auto* l = new _ze_command_list_handle_t{};
  l->immediate = true;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  state().immediate_lists.push_back(l);
  *out = l;
  return ZE_RESULT_SUCCESS;
}
ze_result_t list_destroy(ze_command_list_handle_t l) {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  if (!l->commands.empty() && l->immediate)
    log_error("zeCommandListDestroy: the list still has unexecuted commands (missing wait?)");
  std::erase(s.immediate_lists, static_cast<CommandList*>(l));
  delete l;
  return ZE_RESULT_SUCCESS;
}
ze_result_t list_close(ze_command_list_handle_t l) {
  l->closed = true;
  return ZE_RESULT_SUCCESS;
}
ze_result_t list_reset(ze_command_list_handle_t l) {
  l->commands.clear();
  l->closed = false;
  return ZE_RESULT_SUCCESS;
}
ze_result_t list_barrier(ze_command_list_handle_t l, ze_event_handle_t s, uint32_t n, ze_event_handle_t* w) {
  return append(l, s, n, w, [] { return ZE_RESULT_SUCCESS; });  // commands run in order anyway
}
ze_result_t list_copy(ze_command_list_handle_t l, void* dst, const void* src, size_t size,
                      ze_event_handle_t s, uint32_t n, ze_event_handle_t* w) {
  if (size && (!dst || !src)) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  {
    std::lock_guard<std::recursive_mutex> lock(state().mu);
    if (!check_range(dst, size, "copy destination") || !check_range(src, size, "copy source"))
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  return append(l, s, n, w, [=]() -> ze_result_t {
    if (!check_range(dst, size, "copy destination (at execution)") ||
        !check_range(src, size, "copy source (at execution)"))
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (size) std::memmove(dst, src, size);
    return ZE_RESULT_SUCCESS;
  });
}
ze_result_t list_fill(ze_command_list_handle_t l, void* dst, const void* pattern, size_t psize,
                      size_t size, ze_event_handle_t s, uint32_t n, ze_event_handle_t* w) {
  if (!psize || size % psize) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::vector<unsigned char> p(static_cast<const unsigned char*>(pattern),
                               static_cast<const unsigned char*>(pattern) + psize);
  return append(l, s, n, w, [=] {
    for (size_t o = 0; o < size; o += psize) std::memcpy(static_cast<char*>(dst) + o, p.data(), psize);
    return ZE_RESULT_SUCCESS;
  });
}
ze_result_t list_signal(ze_command_list_handle_t l, ze_event_handle_t e) {
  return append(l, e, 0, nullptr, [] { return ZE_RESULT_SUCCESS; });
}
ze_result_t list_wait(ze_command_list_handle_t l, uint32_t n, ze_event_handle_t* w) {
  return append(l, nullptr, n, w, [] { return ZE_RESULT_SUCCESS; });
}
ze_result_t list_event_reset(ze_command_list_handle_t l, ze_event_handle_t e) {
  return append(l, nullptr, 0, nullptr, [e] {
    e->signaled = false;
    return ZE_RESULT_SUCCESS;
  });
}

bool check_pointers(const std::vector<Arg>& args, const char* when) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].set)
      return log_error("kernel argument " + std::to_string(i) + " was never set");
    if (args[i].kind == ArgKind::Global && args[i].ptr && !in_allocation(args[i].ptr, 0))
      return log_error("kernel argument " + std::to_string(i) + " points outside every live allocation " + when);
  }
  return true;
}

ze_result_t list_launch(ze_command_list_handle_t l, ze_kernel_handle_t k, const ze_group_count_t* g,
                        ze_event_handle_t s, uint32_t n, ze_event_handle_t* w) {
  if (!k || !g) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  std::vector<Arg> args = k->args;  // Level Zero captures arguments at append time
  {
    std::lock_guard<std::recursive_mutex> lock(state().mu);
    if (!check_pointers(args, "(at append)")) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  const size_t local[3] = {k->group[0], k->group[1], k->group[2]};
  const size_t global[3] = {g->groupCountX * local[0], g->groupCountY * local[1], g->groupCountZ * local[2]};
  cl_kernel ck = k->kernel;
  return append(l, s, n, w, [=]() -> ze_result_t {
    State& st = state();
    if (!check_pointers(args, "(at execution: freed while queued?)")) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (cl_uint i = 0; i < args.size(); ++i) {
      const Arg& a = args[i];
      const cl_int e = a.kind == ArgKind::Global ? clSetKernelArgSVMPointer(ck, i, a.ptr)
                       : a.kind == ArgKind::Local ? clSetKernelArg(ck, i, a.local_size, nullptr)
                                                  : clSetKernelArg(ck, i, a.bytes.size(), a.bytes.data());
      if (e != CL_SUCCESS) return log_error("clSetKernelArg failed"), ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
    }
    if (!global[0] || !global[1] || !global[2]) return ZE_RESULT_SUCCESS;
    const cl_int e = clEnqueueNDRangeKernel(st.queue, ck, 3, nullptr, global, local, 0, nullptr, nullptr);
    if (e != CL_SUCCESS) return log_error("clEnqueueNDRangeKernel: " + std::to_string(e)), ZE_RESULT_ERROR_INVALID_ARGUMENT;
    return clFinish(st.queue) == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_DEVICE_LOST;
  });
}

// ---- queues: executing a regular list copies its commands into the queue's own list ---------
struct Queue : _ze_command_queue_handle_t {
  CommandList pending;
};
ze_result_t queue_create(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t*,
                         ze_command_queue_handle_t* out) {
  auto* q = new Queue{};
  q->pending.immediate = true;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  state().immediate_lists.push_back(&q->pending);
  *out = q;
  return ZE_RESULT_SUCCESS;
}
ze_result_t queue_destroy(ze_command_queue_handle_t h) {
  auto* q = static_cast<Queue*>(h);
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  std::erase(state().immediate_lists, &q->pending);
  delete q;
  return ZE_RESULT_SUCCESS;
}
ze_result_t queue_execute(ze_command_queue_handle_t h, uint32_t n, ze_command_list_handle_t* lists,
                          ze_fence_handle_t fence) {
  auto* q = static_cast<Queue*>(h);
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  for (uint32_t i = 0; i < n; ++i) {
    if (lists[i]->immediate || !lists[i]->closed)
      return log_error("zeCommandQueueExecuteCommandLists: list is immediate or not closed"),
             ZE_RESULT_ERROR_INVALID_ARGUMENT;
    for (const Command& c : lists[i]->commands) q->pending.commands.push_back(c);
  }
  if (fence)
    q->pending.commands.push_back({{}, nullptr, [fence] {
                                     fence->signaled = true;
                                     return ZE_RESULT_SUCCESS;
                                   }});
  return s.strict ? ZE_RESULT_SUCCESS : flush_all();
}
ze_result_t queue_synchronize(ze_command_queue_handle_t, uint64_t) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  return flush_all();
}

// ---- events and fences: host waits are the synchronisation points -------------------------
ze_result_t pool_create(ze_context_handle_t, const ze_event_pool_desc_t* d, uint32_t, ze_device_handle_t*,
                        ze_event_pool_handle_t* out) {
  *out = new _ze_event_pool_handle_t{d ? d->count : 0};
  return ZE_RESULT_SUCCESS;
}
ze_result_t pool_destroy(ze_event_pool_handle_t p) {
  delete p;
  return ZE_RESULT_SUCCESS;
}
ze_result_t event_create(ze_event_pool_handle_t p, const ze_event_desc_t* d, ze_event_handle_t* out) {
  if (!p || !d || d->index >= p->count) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  *out = new _ze_event_handle_t{};
  return ZE_RESULT_SUCCESS;
}
ze_result_t event_destroy(ze_event_handle_t e) {
  delete e;
  return ZE_RESULT_SUCCESS;
}
ze_result_t event_signal(ze_event_handle_t e) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  e->signaled = true;
  return flush_all();  // lists blocked on it may go on
}
ze_result_t event_sync(ze_event_handle_t e, uint64_t timeout) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  const ze_result_t r = flush_all();
  if (r != ZE_RESULT_SUCCESS) return r;
  if (e->signaled) return ZE_RESULT_SUCCESS;
  if (timeout == UINT64_MAX) log_error("host waits forever on an event nothing queued will signal");
  return ZE_RESULT_NOT_READY;
}
ze_result_t event_query(ze_event_handle_t e) { return event_sync(e, 0); }
ze_result_t event_reset(ze_event_handle_t e) {
  e->signaled = false;
  return ZE_RESULT_SUCCESS;
}
ze_result_t fence_create(ze_command_queue_handle_t, const ze_fence_desc_t*, ze_fence_handle_t* out) {
  *out = new _ze_fence_handle_t{};
  return ZE_RESULT_SUCCESS;
}
ze_result_t fence_destroy(ze_fence_handle_t f) {
  delete f;
  return ZE_RESULT_SUCCESS;
}
ze_result_t fence_sync(ze_fence_handle_t f, uint64_t) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  const ze_result_t r = flush_all();
  if (r != ZE_RESULT_SUCCESS) return r;
  return f->signaled ? ZE_RESULT_SUCCESS : ZE_RESULT_NOT_READY;
}
ze_result_t fence_query(ze_fence_handle_t f) { return fence_sync(f, 0); }
ze_result_t fence_reset(ze_fence_handle_t f) {
  f->signaled = false;
  return ZE_RESULT_SUCCESS;
}

}  // namespace

ze_result_t flush_all() {
  State& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mu);
  for (bool progressed = true; progressed;) {  // until no list can make progress
    progressed = false;
    for (CommandList* l : std::vector<CommandList*>(s.immediate_lists)) {
      const ze_result_t r = run_list(*l, progressed);
      if (r != ZE_RESULT_SUCCESS) return r;
    }
  }
  return ZE_RESULT_SUCCESS;
}

void fill_event_pool(ze_event_pool_dditable_t* t) {
  t->pfnCreate = pool_create;
  t->pfnDestroy = pool_destroy;
}
void fill_event(ze_event_dditable_t* t) {
  t->pfnCreate = event_create;
  t->pfnDestroy = event_destroy;
  t->pfnHostSignal = event_signal;
  t->pfnHostSynchronize = event_sync;
  t->pfnQueryStatus = event_query;
  t->pfnHostReset = event_reset;
}
void fill_fence(ze_fence_dditable_t* t) {
  t->pfnCreate = fence_create;
  t->pfnDestroy = fence_destroy;
  t->pfnHostSynchronize = fence_sync;
  t->pfnQueryStatus = fence_query;
  t->pfnReset = fence_reset;
}
void fill_queue(ze_command_queue_dditable_t* t) {
  t->pfnCreate = queue_create;
  t->pfnDestroy = queue_destroy;
  t->pfnExecuteCommandLists = queue_execute;
  t->pfnSynchronize = queue_synchronize;
}
void fill_list(ze_command_list_dditable_t* t) {
  t->pfnCreate = list_create;
  t->pfnCreateImmediate = list_create_immediate;
  t->pfnDestroy = list_destroy;
  t->pfnClose = list_close;
  t->pfnReset = list_reset;
  t->pfnAppendBarrier = list_barrier;
  t->pfnAppendMemoryCopy = list_copy;
  t->pfnAppendMemoryFill = list_fill;
  t->pfnAppendSignalEvent = list_signal;
  t->pfnAppendWaitOnEvents = list_wait;
  t->pfnAppendEventReset = list_event_reset;
  t->pfnAppendLaunchKernel = list_launch;
}

}  // namespace zecl
