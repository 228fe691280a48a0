#include "bench_config.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/json_check.hpp"  // the core's checker: the same error wording everywhere
#include "config/json_input.hpp"  // and the same input bounds
#include "ravel/device.hpp"
#include "workloads.hpp"

namespace ravel::bench {

using detail::JsonChecker;
using detail::brief_json;
using detail::parse_json_text;
using detail::read_json_file;
using nlohmann::json;

namespace {

Size parse_size(const JsonChecker& ck, const json& v, const std::string& path, const WorkloadInfo& w) {
  std::string want = "an array of " + std::to_string(w.size_rank) + " positive integers (" + w.size_meaning + ")";
  if (!v.is_array() || v.size() != w.size_rank) ck.fail(path, "expected " + want + ", got " + brief_json(v));
  Size s;
  for (size_t i = 0; i < v.size(); ++i)
    s.push_back(ck.integer(v[i], path + "[" + std::to_string(i) + "]", 1, int64_t{1} << 31));
  return s;
}

WorkloadSpec parse_workload(const JsonChecker& ck, const json& v, const std::string& path) {
  std::vector<std::string> names;
  for (const auto& w : workload_catalog()) names.push_back(w.name);
  WorkloadSpec spec;
  // A bare name means "this workload at its default sizes".
  const json* name = &v;
  if (v.is_object()) {
    ck.keys(v, path, {"name", "sizes", "warmup", "repetitions"});
    if (!v.contains("name")) ck.fail(path, "expected a \"name\" key naming the workload, got " + brief_json(v));
    name = &v["name"];
  } else if (!v.is_string()) {
    ck.fail(path, "expected a workload name or an object {\"name\": ..., \"sizes\": [...]}, got " + brief_json(v));
  }
  std::string name_path = v.is_object() ? path + ".name" : path;
  spec.name = ck.choice(*name, name_path, names);
  const WorkloadInfo& info = find_workload(spec.name);
  if (v.is_object() && v.contains("sizes")) {
    const json& sizes = v["sizes"];
    if (!sizes.is_array() || sizes.empty())
      ck.fail(path + ".sizes", "expected a non-empty array of sizes, each " + std::to_string(info.size_rank) +
                                   " positive integers (" + info.size_meaning + "), got " + brief_json(sizes));
    for (size_t i = 0; i < sizes.size(); ++i)
      spec.sizes.push_back(parse_size(ck, sizes[i], path + ".sizes[" + std::to_string(i) + "]", info));
  }
  if (v.is_object() && v.contains("warmup"))
    spec.warmup = static_cast<int>(ck.integer(v["warmup"], path + ".warmup", 0, 10000));
  if (v.is_object() && v.contains("repetitions"))
    spec.repetitions = static_cast<int>(ck.integer(v["repetitions"], path + ".repetitions", 1, 100000));
  return spec;
}

}  // namespace

BenchConfig parse_bench_config(const std::string& text, const std::string& source, const std::string& dir) {
  JsonChecker ck(source);
  BenchConfig c;
  c.source = source;
  c.config_dir = dir;
  json j = parse_json_text(text, source);  // bounded depth, no duplicate keys (core/src/config)
  if (!j.is_object()) ck.fail("$", "expected an object, got " + brief_json(j));
  if (!j.contains("bench")) ck.fail("$.bench", "missing: a ravel-bench config needs a \"bench\" section (docs/bench.md)");
  const json& b = j["bench"];
  ck.keys(b, "$.bench", {"workloads", "devices", "policies", "warmup", "repetitions", "check", "peers", "baseline",
                         "output", "peer_timeout_s", "peer_threads", "comment"});
  if (!b.contains("workloads")) ck.fail("$.bench.workloads", "missing: expected a list of workloads");
  const json& ws = b["workloads"];
  if (!ws.is_array() || ws.empty()) ck.fail("$.bench.workloads", "expected a non-empty array of workloads, got " + brief_json(ws));
  for (size_t i = 0; i < ws.size(); ++i) c.workloads.push_back(parse_workload(ck, ws[i], "$.bench.workloads[" + std::to_string(i) + "]"));
  if (b.contains("devices")) {
    c.devices = ck.strings(b["devices"], "$.bench.devices");
    for (size_t i = 0; i < c.devices.size(); ++i) try {
        Device::parse(c.devices[i]);
      } catch (const Error& e) {
        ck.fail("$.bench.devices[" + std::to_string(i) + "]", e.what());
      }
  }
  if (b.contains("policies")) {
    auto names = ck.strings(b["policies"], "$.bench.policies");
    for (size_t i = 0; i < names.size(); ++i) {
      std::string p = ck.choice(b["policies"][i], "$.bench.policies[" + std::to_string(i) + "]", {"none", "elementwise", "reduce", "full"});
      c.policies.push_back(parse_fusion_policy(p));
    }
  }
  if (b.contains("warmup")) c.warmup = static_cast<int>(ck.integer(b["warmup"], "$.bench.warmup", 0, 10000));
  if (b.contains("repetitions")) c.repetitions = static_cast<int>(ck.integer(b["repetitions"], "$.bench.repetitions", 1, 100000));
  if (b.contains("check")) c.check = ck.boolean(b["check"], "$.bench.check");
  if (b.contains("peer_timeout_s"))
    c.peer_timeout_s = static_cast<int>(ck.integer(b["peer_timeout_s"], "$.bench.peer_timeout_s", 1, 86400));
  if (b.contains("peer_threads"))
    c.peer_threads = static_cast<int>(ck.integer(b["peer_threads"], "$.bench.peer_threads", 0, 4096));
  if (b.contains("peers")) {
    const json& ps = b["peers"];
    if (!ps.is_array()) ck.fail("$.bench.peers", "expected an array of {\"name\", \"command\"} objects, got " + brief_json(ps));
    for (size_t i = 0; i < ps.size(); ++i) {
      std::string path = "$.bench.peers[" + std::to_string(i) + "]";
      ck.keys(ps[i], path, {"name", "command", "comment"});
      PeerSpec p;
      if (!ps[i].contains("name")) ck.fail(path + ".name", "missing: expected the peer's name (e.g. \"numpy\")");
      if (!ps[i].contains("command")) ck.fail(path + ".command", "missing: expected the peer's command as an array of strings");
      p.name = ck.string(ps[i]["name"], path + ".name");
      if (p.name == "ravel" || p.name.empty()) ck.fail(path + ".name", "expected a name other than \"ravel\" and \"\", got \"" + p.name + "\"");
      for (const auto& q : c.peers)  // rows are keyed by runner name: two peers of one name mix their rows
        if (q.name == p.name) ck.fail(path + ".name", "\"" + p.name + "\" names an earlier peer too; expected unique peer names");
      p.command = ck.strings(ps[i]["command"], path + ".command");
      if (p.command.empty()) ck.fail(path + ".command", "expected a non-empty array of strings (the program and its arguments), got []");
      c.peers.push_back(p);
    }
  }
  if (b.contains("baseline")) {
    const json& bl = b["baseline"];
    ck.keys(bl, "$.bench.baseline", {"runner", "device", "policy"});
    std::vector<std::string> runners = {"ravel"};
    for (const auto& p : c.peers) runners.push_back(p.name);
    c.baseline.runner = bl.contains("runner") ? ck.choice(bl["runner"], "$.bench.baseline.runner", runners) : "ravel";
    if (bl.contains("device")) try {
        c.baseline.device = Device::parse(ck.string(bl["device"], "$.bench.baseline.device")).str();
      } catch (const DeviceError& e) {
        ck.fail("$.bench.baseline.device", e.what());
      }
    if (bl.contains("policy"))
      c.baseline.policy = ck.choice(bl["policy"], "$.bench.baseline.policy", {"none", "elementwise", "reduce", "full"});
  }
  if (b.contains("output")) {
    const json& o = b["output"];
    ck.keys(o, "$.bench.output", {"dir", "name"});
    if (o.contains("dir")) c.output_dir = ck.string(o["dir"], "$.bench.output.dir");
    if (o.contains("name")) c.output_name = ck.string(o["name"], "$.bench.output.name");
    if (c.output_name.empty() || c.output_name.find('/') != std::string::npos)
      ck.fail("$.bench.output.name", "expected a file name stem without '/', got \"" + c.output_name + "\"");
  }
  return c;
}

void override_counts(BenchConfig& c, int warmup, int repetitions) {
  if (warmup >= 0) c.warmup = warmup;
  if (repetitions >= 1) c.repetitions = repetitions;
  for (auto& w : c.workloads) {
    if (warmup >= 0) w.warmup = -1;
    if (repetitions >= 1) w.repetitions = -1;
  }
}

BenchConfig load_bench_config(const std::string& path) {
  return parse_bench_config(read_json_file(path), path, std::filesystem::absolute(path).parent_path().string());
}

}  // namespace ravel::bench
