// ravel-bench's outputs: the table on stdout, and results as JSON, CSV and an SVG bar chart.
#pragma once

#include <iosfwd>
#include <string>

#include "bench_config.hpp"
#include "runner.hpp"

namespace ravel::bench {

void print_table(std::ostream& os, const BenchConfig& cfg, const RunResult& result);
std::string results_json(const BenchConfig& cfg, const RunResult& result);
std::string results_csv(const RunResult& result);
// Bars per workload and size, one per runner/device/policy, height = throughput relative to the
// group's baseline row (or to the group's fastest row when the config names no baseline).
std::string results_svg(const BenchConfig& cfg, const RunResult& result);

}  // namespace ravel::bench
