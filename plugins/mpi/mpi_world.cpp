// Starting Open MPI, making communicators, and shutting down — including after a failure.
//
// Note [Exit after a failure]
// MPI_Finalize synchronises with every other rank (Open MPI 4 runs a PMIx fence), so after a
// peer died or a request was abandoned it would block forever. destroy() of the world therefore
// (1) skips MPI_Finalize when the process is broken, and (2) otherwise first runs an
// MPI_Ibarrier under the finalize deadline (the timeout given to comm_create_world): only when
// every rank reached it is MPI_Finalize called. When finalize is skipped, destroy returns an
// error saying so, and the process is expected to exit with a non-zero status; mpirun then
// reports that a rank exited without finalizing and ends the job (its exit status is non-zero).
// Nothing else blocks at exit: Open MPI registers no exit handler that waits for peers.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "mpi_state.hpp"

namespace mpi_plugin {

namespace {

// Open MPI opens its components (mca_*.so) with dlopen and they resolve libmpi's symbols
// globally; the core loads this plugin RTLD_LOCAL, which would hide libmpi from them
// ("undefined symbol: ompi_..."). Re-open libmpi RTLD_GLOBAL (as mpi4py does); the handle is
// kept, so libmpi also stays loaded if the plugin is unloaded (MPI cannot start twice anyway).
std::string promote_libmpi() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) == 0 || !info.dli_fname)
    return "cannot find the library that defines MPI_Init_thread";
  if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) {
    const char* e = dlerror();
    return std::string("cannot make ") + info.dli_fname + " global: " + (e ? e : "?");
  }
  return "";
}

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// Waits for an MPI request under the library lock with a deadline; false on time-out.
bool wait_for(MPI_Request* req, int64_t timeout_ms, int* rc) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int flag = 0;
    {
      std::lock_guard<std::mutex> lock(process().mutex);
      *rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    }
    if (*rc != MPI_SUCCESS || flag) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Note [Small all-reduces]: the communicator their messages travel on, a duplicate of `comm`
// (MPI_Comm_idup under the deadline: every rank of `comm` takes part).
rvl_coll_error* duplicate_for_small(MPI_Comm comm, int64_t timeout_ms, MPI_Comm* out) {
  MPI_Request req;
  int rc;
  {
    std::lock_guard<std::mutex> lock(process().mutex);
    rc = MPI_Comm_idup(comm, out, &req);
  }
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "MPI_Comm_idup"));
  if (!wait_for(&req, timeout_ms, &rc))
    return make_error(RVL_COLL_STATUS_TIMEOUT, "MPI_Comm_idup (small all-reduce communicator) did not complete within " +
                                                   std::to_string(timeout_ms) + " ms");
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "MPI_Comm_idup"));
  std::lock_guard<std::mutex> lock(process().mutex);
  MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
  return nullptr;
}

rvl_communicator* wrap(MPI_Comm comm) {
  auto* c = new (std::nothrow) rvl_communicator();
  if (!c) return nullptr;
  c->comm = comm;
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->size);
  MPI_Group mine, world;
  MPI_Comm_group(comm, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(c->size));
  for (int i = 0; i < c->size; ++i) ranks[i] = i;
  c->world_rank_of.resize(ranks.size());
  MPI_Group_translate_ranks(mine, c->size, ranks.data(), world, c->world_rank_of.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  return c;
}

}  // namespace

rvl_coll_error* create_world(int64_t timeout_ms, rvl_communicator** out) {
  Process& p = process();
  if (p.world_created)
    return make_error(RVL_COLL_STATUS_INVALID_ARGUMENT, "comm_create_world: the world communicator already exists");
  if (std::string why = promote_libmpi(); !why.empty()) return make_error(RVL_COLL_STATUS_COMM_ERROR, why);
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    MPI_Initialized(&initialized);
    if (!initialized) {
      // No deadline exists for MPI_Init_thread (it waits for the launcher's wire-up): the
      // launcher's own start-up timeout bounds it (docs/distributed.md).
      if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
        return make_error(RVL_COLL_STATUS_COMM_ERROR, "MPI_Init_thread failed (error " + std::to_string(rc) + ")");
      p.initialized_here = true;
    } else {
      MPI_Query_thread(&provided);
    }
    // Errors come back as codes from here on: never MPI_ERRORS_ARE_FATAL's abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  }
  // The plugin calls MPI from whichever thread the host uses, one call at a time (its lock).
  if (provided < MPI_THREAD_SERIALIZED)
    return make_error(RVL_COLL_STATUS_UNSUPPORTED, std::string("MPI granted ") + level_name(provided) +
                                                       "; the plugin needs MPI_THREAD_SERIALIZED or higher");
  p.finalize_timeout_ms = timeout_ms;
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  // Note [Who is late]: every rank's pid and host, gathered under the deadline.
  PeerId me;
  me.pid = static_cast<int32_t>(getpid());
  gethostname(me.host, sizeof me.host - 1);
  p.my_host = me.host;
  p.peers.assign(static_cast<size_t>(world_size), PeerId{});
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request req;
  int rc;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    rc = MPI_Iallgather(&me, sizeof me, MPI_BYTE, p.peers.data(), sizeof me, MPI_BYTE, MPI_COMM_WORLD, &req);
  }
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "start-up all-gather"));
  if (!wait_for(&req, timeout_ms, &rc))
    return make_error(RVL_COLL_STATUS_TIMEOUT, "start-up: not every rank of " + std::to_string(world_size) +
                                                   " joined within " + std::to_string(timeout_ms) + " ms");
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "start-up all-gather"));
  // A communicator of our own, so the host program's MPI traffic never matches ours.
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req);
  }
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "MPI_Comm_idup"));
  if (!wait_for(&req, timeout_ms, &rc))
    return make_error(RVL_COLL_STATUS_TIMEOUT, "start-up: MPI_Comm_idup did not complete within " +
                                                   std::to_string(timeout_ms) + " ms");
  MPI_Comm small = MPI_COMM_NULL;
  if (rvl_coll_error* e = duplicate_for_small(dup, timeout_ms, &small)) return e;
  std::lock_guard<std::mutex> lock(p.mutex);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  rvl_communicator* c = wrap(dup);
  if (!c) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "comm_create_world: out of memory");
  c->small_comm = small;
  c->world = true;
  p.world_created = true;
  *out = c;
  return nullptr;
}

rvl_coll_error* split(rvl_communicator* comm, int32_t color, int32_t key, int64_t timeout_ms,
                      rvl_communicator** out) {
  if (rvl_coll_error* e = broken_error()) return e;
  Process& p = process();
  // MPI_Comm_split has no non-blocking form: first exchange (color, key) under the deadline, so
  // a missing rank is a TIMEOUT here; then the ranks of each color (all known to have arrived)
  // build their group with MPI_Comm_create_group, which involves only them.
  std::vector<int32_t> all(static_cast<size_t>(comm->size) * 2);
  int32_t mine[2] = {color, key};
  rvl_coll_request* r = new_request(comm, "comm_split");
  if (!r) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "comm_split: out of memory");
  int rc;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    rc = MPI_Iallgather(mine, 2, MPI_INT32_T, all.data(), 2, MPI_INT32_T, comm->comm, &r->request);
  }
  if (rc != MPI_SUCCESS) {
    r->done = true;
    request_free(r);
    return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "comm_split"));
  }
  rvl_coll_error* e = request_wait(r, timeout_ms);
  if (e && !r->done) return e;  // the request stays pending: the caller's error path abandons nothing
  request_free(r);
  if (e) return e;
  *out = nullptr;
  if (color < 0) return nullptr;
  std::vector<std::pair<int32_t, int>> members;  // (key, rank)
  for (int i = 0; i < comm->size; ++i)
    if (all[2 * i] == color) members.emplace_back(all[2 * i + 1], i);
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (auto& m : members) ranks.push_back(m.second);
  std::unique_lock<std::mutex> lock(p.mutex);
  MPI_Group parent, group;
  MPI_Comm_group(comm->comm, &parent);
  MPI_Group_incl(parent, static_cast<int>(ranks.size()), ranks.data(), &group);
  MPI_Comm child = MPI_COMM_NULL;
  rc = MPI_Comm_create_group(comm->comm, group, color, &child);
  MPI_Group_free(&group);
  MPI_Group_free(&parent);
  if (rc != MPI_SUCCESS) return make_error(RVL_COLL_STATUS_COMM_ERROR, mpi_message(rc, "MPI_Comm_create_group"));
  MPI_Comm_set_errhandler(child, MPI_ERRORS_RETURN);
  *out = wrap(child);
  if (!*out) return make_error(RVL_COLL_STATUS_OUT_OF_MEMORY, "comm_split: out of memory");
  lock.unlock();
  if (rvl_coll_error* dup_err = duplicate_for_small(child, timeout_ms, &(*out)->small_comm)) {
    destroy(*out);
    *out = nullptr;
    return dup_err;
  }
  return nullptr;
}

rvl_coll_error* destroy(rvl_communicator* comm) {
  if (!comm) return nullptr;
  Process& p = process();
  if (comm->pending.load() > 0)
    mark_broken(RVL_COLL_STATUS_TIMEOUT, "a communicator was destroyed with requests pending", -1);
  const bool world = comm->world;
  if (!p.broken.load()) {
    std::lock_guard<std::mutex> lock(p.mutex);
    MPI_Comm_free(&comm->comm);  // local when nothing is pending
    if (comm->small_comm != MPI_COMM_NULL) MPI_Comm_free(&comm->small_comm);
  }
  delete comm->spare.exchange(nullptr);  // Note [Reused requests]
  delete comm;
  if (!world || !p.initialized_here) return nullptr;
  // Note [Exit after a failure]
  if (p.broken.load())
    return make_error(RVL_COLL_STATUS_PEER_LOST, "MPI_Finalize skipped: the communicator is broken (" +
                                                     p.broken_message + "); exit with a non-zero status", p.broken_rank);
  MPI_Request req;
  int rc;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
  }
  if (rc != MPI_SUCCESS || !wait_for(&req, p.finalize_timeout_ms, &rc) || rc != MPI_SUCCESS) {
    mark_broken(RVL_COLL_STATUS_TIMEOUT, "not every rank reached shut-down", -1);
    return make_error(RVL_COLL_STATUS_TIMEOUT, "MPI_Finalize skipped: not every rank reached shut-down within " +
                                                   std::to_string(p.finalize_timeout_ms) + " ms");
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  MPI_Finalize();
  p.initialized_here = false;
  return nullptr;
}

}  // namespace mpi_plugin
