// dist_fault: the failure scenarios of a distributed run, one per invocation, under mpirun.
// The CTest scripts (run_fault.cmake) check what each rank prints and how fast the job ends.
//   dist_fault never-join   the last rank never calls the all-reduce the others wait for:
//                           they must report a TimeoutError (RAVEL_DIST_TIMEOUT_S bounds it)
//   dist_fault kill         "training": all-reduces in a loop; rank 1 SIGKILLs itself after 20:
//                           the others must report PeerLostError naming rank 1
//   dist_fault kill-ddp     the same with DataParallel training of a small MLP (lazy gradients,
//                           buckets begun between the backward kernels); rank 1 dies at step 20
//   dist_fault mismatch     rank 1 passes a different shape: every rank reports ShapeError
//   dist_fault plain        one all-reduce (with RAVEL_COMMUNICATOR naming a missing plugin:
//                           every rank reports the PluginError)
// Each rank prints one line "RESULT rank R: <error type>: <message>" and exits 3 on the
// expected error (0 if nothing failed, which the scripts treat as a failure of the test).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "ravel/distributed.hpp"
#include "ravel/ravel.hpp"

namespace dist = ravel::distributed;
using ravel::Tensor;

namespace {

void report(const char* type, const std::string& what) {
  // The launcher's rank: init() itself may be what failed.
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  std::printf("RESULT rank %s: %s: %s\n", rank ? rank : "0", type, what.c_str());
  std::fflush(stdout);
}

int run(const std::string& mode) {
  const int rank = dist::rank(), size = dist::world_size();
  Tensor x = Tensor::full({1000}, 1.0 + rank);
  dist::barrier();
  if (mode == "never-join") {
    if (rank == size - 1) {
      // Outlives the others' deadline, then leaves; mpirun ends the job when they exit non-zero.
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 0;
    }
    dist::all_reduce(x).realize();
  } else if (mode == "kill") {
    for (int step = 0; step < 1000000; ++step) {
      if (rank == 1 && step == 20) raise(SIGKILL);
      x = dist::all_reduce(x) * (1.0 / size);
      x.realize();
    }
  } else if (mode == "kill-ddp") {
    // Note [Gradient buckets]: several buckets (64 bytes), begun while backward runs.
    Tensor w1 = Tensor::randn({4, 16}, 1), w2 = Tensor::randn({16, 3}, 2);
    dist::DataParallel ddp({&w1, &w2}, dist::DataParallel::Config{64});
    for (int step = 0; step < 1000000; ++step) {
      if (rank == 1 && step == 20) raise(SIGKILL);
      Tensor in = Tensor::randn({8, 4}, 100 + step);
      Tensor loss = (in.matmul(w1).tanh().matmul(w2) * (1.0 / size)).square().mean();
      std::vector<Tensor> g = ddp.reduce_gradients(ravel::gradients(loss, {w1, w2}), 1.0);
      ravel::NoGradGuard no_grad;
      w1.assign(w1 - g[0] * 0.01), w2.assign(w2 - g[1] * 0.01);
      ravel::realize({w1, w2});
    }
  } else if (mode == "plain") {
    dist::all_reduce(x).realize();
  } else if (mode == "mismatch") {
    dist::all_reduce(rank == 1 ? Tensor::zeros({3, 5}) : Tensor::zeros({3, 4})).realize();
  } else {
    std::fprintf(stderr, "dist_fault: unknown mode %s\n", mode.c_str());
    return 2;
  }
  report("none", "no error");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np N dist_fault never-join|kill|kill-ddp|mismatch|plain\n");
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const dist::PeerLostError& e) {
    report("PeerLostError", std::string(e.what()) + " [peer " + std::to_string(e.peer()) + "]");
  } catch (const dist::TimeoutError& e) {
    report("TimeoutError", std::string(e.what()) + " [peer " + std::to_string(e.peer()) + "]");
  } catch (const ravel::PluginError& e) {
    report("PluginError", e.what());
  } catch (const ravel::ShapeError& e) {
    report("ShapeError", e.what());
  } catch (const std::exception& e) {
    report("other", e.what());
  }
  // Give the other ranks a moment to report the same before mpirun ends the job.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  return 3;
}
