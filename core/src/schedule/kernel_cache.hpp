// The kernel cache: finished plans with their lowered kernels, keyed by the structure of the
// unrealized graph they were made for (Note [Kernel cache] in kernel_cache.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ravel/backend.h"
#include "ravel/schedule.hpp"
#include "schedule/schedule.hpp"

namespace ravel::detail {

// The graph below some targets, numbered: every node a realization touches gets a *local index*
// (unrealized nodes in topological order, interleaved with the leaves they read), and `key`
// spells the whole structure in terms of those indices.
struct GraphKey {
  std::string key;
  std::vector<NodePtr> locals;                   // local index -> node
  std::unordered_map<const Node*, int32_t> index;  // node -> local index
  int32_t local(const Node* n) const { return index.at(n); }
};

// `order`: the unrealized nodes below `targets` in topological order (sources first).
GraphKey make_graph_key(const std::vector<NodePtr>& order, const std::vector<NodePtr>& targets,
                        const FusionOptions& options, bool device_has_contraction);

// One kernel, lowered to the C ABI with every buffer handle left NULL: `input_nodes[i]` names
// the local node whose buffer binds to `inputs[i]` (program inputs, or a contraction's
// epilogue inputs); a contraction's A and B bind to `a_node` / `b_node`, its C (or a program's
// output) to `out`.
struct CachedKernel {
  enum class Kind : uint8_t { Program, Contraction, Transfer };  // Transfer: a_node -> out
  Kind kind = Kind::Program;
  const char* label = "";  // elementwise / reduce / copy / contraction (RAVEL_DEBUG)
  int32_t out = -1;
  rvl_program program{};          // its inputs / instructions pointers are re-aimed per run
  rvl_contraction contraction{};  // likewise its epilogue pointers
  int32_t a_node = -1, b_node = -1;
  std::vector<rvl_operand> inputs;
  std::vector<int32_t> input_nodes;
  std::vector<rvl_instruction> instructions;
  std::vector<int32_t> reads;  // local nodes whose buffers this kernel reads (freeing temporaries)
  int64_t bytes_read = 0;
  std::string detail;  // RAVEL_DEBUG text
};

// Everything realize_nodes needs to run a graph of this structure: no node or buffer inside.
struct Recipe {
  std::vector<CachedKernel> kernels;  // in an order that respects data flow
  std::vector<int32_t> keep;          // local nodes that are targets (never freed)
  std::vector<uint8_t> inlined;       // per local index (RAVEL_DEBUG=2)
  size_t bytes = 0;                   // approximate memory held (for the cache's bound)
};

// Process-wide LRU cache, safe to use from several threads.
std::shared_ptr<const Recipe> kernel_cache_find(const std::string& key);
void kernel_cache_insert(const std::string& key, std::shared_ptr<const Recipe> recipe, const FusionOptions& options);
// Whether realizations should use the cache: options.cache_kernels and RAVEL_KERNEL_CACHE != 0.
bool kernel_cache_enabled(const FusionOptions& options);

}  // namespace ravel::detail
