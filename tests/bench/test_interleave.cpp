// ravel-bench's ratios are trustworthy: Ravel-vs-peer ratios from one run that has both (the
// peer right after Ravel's repetitions of each case, as every comparison table is made) agree
// within 10% with the ratios from separate runs (`--no-peers`, then `--peers-only`). A peer that
// kept spinning threads, or a Ravel thread pool that did, would slow the other side down in the
// joint run only. docs/bench.md, "Threads".
//
// This is the one test of a timing property, so it is built to be robust on a loaded machine:
// small sizes (about a millisecond a row, 41 repetitions, the fastest), ratios rather than times
// (load slows both sides alike), each side's ratio the median over three rounds of runs (joint,
// Ravel alone, peer alone, interleaved round by round), and up to five attempts per case; a
// case passes when one attempt agrees. It runs serially (RUN_SERIAL) and only where the
// hand-loop peer was built (OpenMP).
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs ravel-bench with `flags`; the results JSON (empty object on failure).
json run(const fs::path& cfg, const fs::path& out, const std::string& flags) {
  fs::create_directories(out);
  const std::string cmd = std::string(RAVEL_BENCH_EXE) + " " + cfg.string() + " --out " + out.string() + " --quiet " +
                          flags + " > " + (out / "stdout.txt").string() + " 2>&1";
  const int st = std::system(cmd.c_str());
  BOOST_TEST_REQUIRE((WIFEXITED(st) && WEXITSTATUS(st) == 0), slurp(out / "stdout.txt"));
  return json::parse(slurp(out / "r.json"));
}

// case ("workload size") -> runner -> fastest repetition, ms. The minimum, not the median: other
// work on the machine only ever adds time, so the fastest of 41 repetitions is what the code
// itself costs, while a runner that spins or leaves threads spinning slows even its neighbour's
// fastest repetition.
using Medians = std::map<std::string, std::map<std::string, double>>;
void collect(const json& j, Medians& m) {
  for (const auto& r : j["results"])
    if (r["status"] == "ok")
      m[r["workload"].get<std::string>() + " " + r["size"].get<std::string>()][r["runner"].get<std::string>()] =
          r["min_ms"].get<double>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(joint_and_separate_runs_give_the_same_ratios_within_ten_percent) {
  const fs::path peer = fs::path(RAVEL_BENCH_EXE).parent_path() / "ravel-peer-loops";
  if (!fs::exists(peer)) {
    BOOST_TEST_MESSAGE("ravel-peer-loops not built (no OpenMP): nothing to compare");
    return;
  }
  const fs::path dir = scratch_dir() / "interleave";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "c.json") << R"({"placement": {"devices": ["tbb_cpu"]}, "bench": {
      "workloads": [{"name": "elementwise", "sizes": [[1048576]]}, {"name": "sum_axis1", "sizes": [[1024, 1024]]},
                    {"name": "softmax", "sizes": [[256, 1024]]}],
      "policies": ["full"], "warmup": 5, "repetitions": 41, "check": false,
      "peers": [{"name": "loops", "command": ["{bin}/ravel-peer-loops"]}], "output": {"name": "r"}}})";

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::map<std::string, std::string> pending;  // case -> what the last attempt measured
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::map<std::string, std::vector<double>> joint_ratio, apart_ratio;
    for (int round = 0; round < 3; ++round) {
      Medians joint, apart;
      collect(run(dir / "c.json", dir / "joint", ""), joint);
      collect(run(dir / "c.json", dir / "ravel", "--no-peers"), apart);
      collect(run(dir / "c.json", dir / "peer", "--peers-only"), apart);
      for (auto& [c, j] : joint) {
        auto& a = apart[c];
        BOOST_TEST_REQUIRE(j.count("ravel") + j.count("loops") + a.count("ravel") + a.count("loops") == 4u, c);
        joint_ratio[c].push_back(j["loops"] / j["ravel"]);
        apart_ratio[c].push_back(a["loops"] / a["ravel"]);
        if (attempt == 0 && round == 0) pending[c] = "";
      }
    }
    for (auto it = pending.begin(); it != pending.end();) {
      const double rj = median(joint_ratio[it->first]), ra = median(apart_ratio[it->first]);
      const double dev = std::abs(rj / ra - 1);
      std::ostringstream what;
      what << it->first << ": joint runs loops/ravel = " << rj << ", separate runs " << ra << " (" << 100 * dev
           << "% apart)";
      BOOST_TEST_MESSAGE("attempt " << attempt + 1 << ": " << what.str());
      if (dev <= 0.10) it = pending.erase(it);
      else it->second = what.str(), ++it;
    }
    if (pending.empty()) break;
  }
  for (const auto& [c, what] : pending) BOOST_ERROR("ratios disagree by more than 10% in every attempt: " << what);
  fs::remove_all(dir);
}
