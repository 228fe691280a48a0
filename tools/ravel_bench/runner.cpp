#include "runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>

#include "ravel/ravel.hpp"
#include "workloads.hpp"

namespace ravel::bench {

std::string Row::label() const { return runner == "ravel" ? runner + " " + device + " " + policy : runner; }

namespace {

using Clock = std::chrono::steady_clock;

// One Ravel variant of a case: a device and a policy, sharing the device's inputs.
struct Variant {
  std::shared_ptr<Instance> instance;
  FusionPolicy policy;
  size_t row;  // index into the case's rows
  std::vector<double> ms;
};

class Progress {
 public:
  explicit Progress(bool on) : on_(on), tty_(on && isatty(2)) {}
  void update(const std::string& s) {
    if (tty_) std::fprintf(stderr, "\r\033[K%s", s.c_str()), std::fflush(stderr);
  }
  // Once per case: on a terminal it replaces the line; elsewhere (a CI log) a line per case.
  void done(const std::string& s) {
    if (tty_) std::fprintf(stderr, "\r\033[K%s", s.c_str()), std::fflush(stderr);
    else if (on_) std::fprintf(stderr, "%s\n", s.c_str());
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  bool on_, tty_;
};

void summarize(Row& r, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  r.reps = static_cast<int>(ms.size());
  if (ms.empty()) return;
  size_t n = ms.size();
  r.median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  r.min_ms = ms.front();
  r.max_ms = ms.back();
  r.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / double(n);
}

void fail(Row& r, const std::string& why) {
  r.status = "failed";
  r.message = why;
}

// Ratio to the baseline row of the same workload and size, and throughputs.
void finish_rows(std::vector<Row>& rows, const Baseline& b) {
  for (auto& r : rows) {
    if (r.status == "ok" && r.median_ms > 0)
      r.throughput = (r.flop_bound ? r.flops : r.bytes) / (r.median_ms * 1e-3) / 1e9;
  }
  if (b.runner.empty()) return;
  for (auto& r : rows) {
    const Row* base = nullptr;
    for (const auto& c : rows)
      if (!base && c.status == "ok" && c.workload == r.workload && c.size == r.size && c.runner == b.runner &&
          (b.device.empty() || c.runner != "ravel" || c.device == b.device) &&
          (b.policy.empty() || c.runner != "ravel" || c.policy == b.policy))
        base = &c;
    if (!base) continue;
    r.is_baseline = base == &r;
    if (r.status == "ok" && r.median_ms > 0) r.ratio = base->median_ms / r.median_ms;
  }
}

// How a Ravel device runs its work, for the thread-settings lines: the device's own name (the
// oneTBB plugin's says how many threads), and how its workers wait.
std::string device_threads(const std::string& device) {
  for (const auto& d : Runtime::get().devices())
    if (d.device.str() == device)
      return d.name + (d.name.find("oneTBB") != std::string::npos ? ", workers sleep when idle (passive)" : "");
  return "";
}

}  // namespace

RunResult run_bench(const BenchConfig& cfg, const RunOptions& opt) {
  Runtime& rt = Runtime::get();
  const FusionOptions base_fusion = fusion_options();
  std::vector<std::string> devices = cfg.devices;
  if (devices.empty()) {
    try {
      devices = {rt.default_device().str()};
    } catch (const DeviceError& e) {
      devices = {"(default)"};
    }
  }
  std::vector<FusionPolicy> policies = cfg.policies;
  if (policies.empty()) policies = {base_fusion.policy};
  // Missing devices are found once, up front; their rows fail with the reason and the rest runs.
  std::vector<std::string> device_error(devices.size());
  for (size_t d = 0; d < devices.size(); ++d) try {
      rt.resolve_device(devices[d] == "(default)" ? "" : devices[d]);
    } catch (const Error& e) {
      device_error[d] = std::string("device unavailable: ") + e.what();
    }

  size_t n_cases = 0;
  for (const auto& w : cfg.workloads) n_cases += w.sizes.empty() ? find_workload(w.name).default_sizes.size() : w.sizes.size();
  RunResult result;
  Progress progress(opt.progress);
  size_t case_no = 0;
  for (const auto& spec : cfg.workloads) {
    const WorkloadInfo& info = find_workload(spec.name);
    const int warmup = warmup_of(cfg, spec), reps = repetitions_of(cfg, spec);
    for (const Size& size : spec.sizes.empty() ? info.default_sizes : spec.sizes) {
      ++case_no;
      std::string head = "[" + std::to_string(case_no) + "/" + std::to_string(n_cases) + "] " + spec.name + " " + size_str(size);
      Work work = work_of(spec.name, size);
      std::vector<Row> rows;
      auto new_row = [&](const std::string& device, const std::string& policy) {
        Row r;
        r.workload = spec.name, r.size = size_str(size), r.device = device, r.policy = policy;
        r.flops = work.flops, r.bytes = work.bytes, r.flop_bound = info.flop_bound;
        if (device != "-") r.threads = device_threads(device);
        rows.push_back(r);
        return rows.size() - 1;
      };
      std::vector<Variant> variants;
      if (!opt.ravel) {
        // --peers-only: no Ravel rows
      } else if (!info.unavailable.empty()) {
        Row& r = rows[new_row("-", "-")];
        r.status = "unavailable", r.message = info.unavailable;
      } else {
        for (size_t d = 0; d < devices.size(); ++d) {
          std::shared_ptr<Instance> inst;
          std::string err = device_error[d], unavailable;
          if (err.empty()) try {
              progress.update(head + ": preparing inputs on " + devices[d]);
              inst = make_instance(spec.name, size, Device::parse(devices[d]));
            } catch (const Unavailable& e) {
              unavailable = e.what();
            } catch (const std::exception& e) {
              err = std::string("preparing inputs failed: ") + e.what();
            }
          for (FusionPolicy p : policies) {
            size_t row = new_row(devices[d], fusion_policy_name(p));
            if (!unavailable.empty()) {
              rows[row].status = "unavailable", rows[row].message = unavailable;
              continue;
            }
            if (!err.empty()) {
              fail(rows[row], err);
              continue;
            }
            FusionOptions fo = base_fusion;
            fo.policy = p;
            set_fusion_options(fo);
            try {
              if (cfg.check) {
                progress.update(head + ": checking " + rows[row].label());
                std::string wrong = inst->check();
                if (!wrong.empty()) {
                  fail(rows[row], "wrong result (not timed): " + wrong);
                  continue;
                }
                rows[row].checked = "yes";
              }
              for (int w = 0; w < warmup; ++w) inst->run();
              variants.push_back({inst, p, row, {}});
            } catch (const std::exception& e) {
              fail(rows[row], e.what());
            }
          }
        }
      }
      // Repetitions, interleaved across variants.
      for (int rep = 0; rep < reps; ++rep) {
        progress.update(head + ": repetition " + std::to_string(rep + 1) + "/" + std::to_string(reps));
        for (auto& v : variants) {
          Row& r = rows[v.row];
          if (r.status != "ok") continue;
          FusionOptions fo = base_fusion;
          fo.policy = v.policy;
          set_fusion_options(fo);
          try {
            reset_stats();
            auto t0 = Clock::now();
            v.instance->run();
            synchronize(Device::parse(r.device));  // asynchronous devices: time the work, not the queueing
            v.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            KernelStats s = cumulative_stats();
            r.kernels = double(s.kernels());
            r.bytes_moved = double(s.bytes_read + s.bytes_written);
          } catch (const std::exception& e) {
            fail(r, e.what());
          }
        }
      }
      for (auto& v : variants) summarize(rows[v.row], v.ms);
      variants.clear();  // frees this case's device buffers before the peers run
      if (opt.peers && info.unavailable.empty())
        for (const auto& peer : cfg.peers) {
          progress.update(head + ": peer " + peer.name);
          Row r = run_peer(cfg, peer, spec.name, size, warmup, reps, opt.bin_dir);
          r.flops = work.flops, r.bytes = work.bytes, r.flop_bound = info.flop_bound;
          rows.push_back(r);
        }
      int failed = 0;
      for (const auto& r : rows) failed += r.status == "failed";
      // Each row's median on the progress line too: a run cut short (a time limit on a lent
      // machine, scripts/gpu-check.sh) still leaves the figures of the workloads it finished.
      std::string medians;
      for (const auto& r : rows)
        if (r.status == "ok") {
          char ms[32];
          std::snprintf(ms, sizeof ms, "%.4g", r.median_ms);
          medians += (medians.empty() ? " (" : "; ") + r.label() + " " + ms + " ms";
        }
      progress.done(head + ": " + std::to_string(rows.size()) + " rows" + (failed ? ", " + std::to_string(failed) + " failed" : "") +
                    (medians.empty() ? "" : medians + ")"));
      result.failures += failed;
      result.rows.insert(result.rows.end(), rows.begin(), rows.end());
    }
  }
  progress.finish();
  set_fusion_options(base_fusion);
  finish_rows(result.rows, cfg.baseline);
  return result;
}

}  // namespace ravel::bench
