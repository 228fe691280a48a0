// The kernel cache: finished plans with their lowered kernels, keyed by the structure of the
// unrealized graph they were made for (Note [Kernel cache] in kernel_cache.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/node.hpp"
#include "ravel/fusion.hpp"
#include "schedule/recipe.hpp"

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
                        const FusionOptions& options, int device_has_contraction);

// Process-wide LRU cache, safe to use from several threads.
std::shared_ptr<const Recipe> kernel_cache_find(const std::string& key);
void kernel_cache_insert(const std::string& key, std::shared_ptr<const Recipe> recipe, const FusionOptions& options);
// Whether the options ask for the cache (cache_kernels, a positive entry count). The runtime also
// honours RAVEL_KERNEL_CACHE=0 (config/settings.hpp).
bool kernel_cache_enabled(const FusionOptions& options);
// Empties the cache / counts its entries (ravel::clear_kernel_cache, ravel::kernel_cache_size).
void kernel_cache_clear();
size_t kernel_cache_entries();

}  // namespace ravel::detail
