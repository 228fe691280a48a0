// Recipe — the schedule's output: a realization's kernels lowered to the C ABI, unbound.
//
// A Recipe holds no node and no buffer handle (Note [Kernel cache]): the runtime binds its local
// node indices (GraphKey::locals) to buffers and runs it (runtime/execute.cpp). So the same
// recipe serves every graph of the same structure.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <unordered_set>
#include <vector>

#include "graph/node.hpp"
#include "ravel/backend.h"
#include "ravel/fusion.hpp"

namespace ravel::detail {

struct GraphKey;

// One kernel, lowered to the C ABI with every buffer handle left NULL: `input_nodes[i]` names
// the local node whose buffer binds to `inputs[i]` (program inputs, or a contraction's
// epilogue inputs); a contraction's A and B bind to `a_node` / `b_node`, its C (or a program's
// output) to `out`.
struct CachedKernel {
  enum class Kind : uint8_t { Program, Contraction, Transfer };  // Transfer: a_node -> out
  Kind kind = Kind::Program;
  const char* label = "";  // elementwise / reduce / copy / contraction / transfer (RAVEL_DEBUG)
  int32_t out = -1;
  rvl_program program{};          // its inputs / instructions pointers are re-aimed per run
  rvl_contraction contraction{};  // likewise its epilogue pointers
  int32_t a_node = -1, b_node = -1;
  std::vector<rvl_operand> inputs;
  std::vector<int32_t> input_nodes;
  std::vector<rvl_instruction> instructions;
  std::vector<rvl_instruction> epilogue;  // a reduction's row epilogue (ABI 1.10); program.n_epilogue
  // A chain's earlier reductions (ABI 1.11), their instruction pointers re-aimed at every run
  // at stage_code; program.n_stages.
  std::vector<rvl_reduce_stage> stages;
  std::vector<std::vector<rvl_instruction>> stage_code;
  std::vector<int32_t> reads;  // local nodes whose buffers this kernel reads (freeing temporaries)
  int64_t bytes_read = 0;
  std::string detail;  // RAVEL_DEBUG text
};

// Everything the runtime needs to run a graph of this structure: no node or buffer inside.
struct Recipe {
  std::vector<CachedKernel> kernels;  // in an order that respects data flow
  std::vector<int32_t> keep;          // local nodes that are targets (never freed)
  std::vector<uint8_t> inlined;       // per local index (RAVEL_DEBUG=2)
  size_t bytes = 0;                   // approximate memory held (for the cache's bound)
};

// The op mask of every device of a realization (Note [Capabilities] in graph/ops.hpp).
using DeviceOps = std::vector<std::pair<Device, uint64_t>>;
// Per device, the reductions it runs with a row epilogue (ABI 1.10); a device not listed: none.
using DeviceMasks = std::vector<std::pair<Device, uint32_t>>;

// Plans `order` (Note [Fusion]) and lowers every kernel of the plan, unbound, rewriting the ops
// a kernel's device lacks (`ops`; a device not listed has every op). `keep`: the targets' bases;
// `describe`: fill CachedKernel::detail for RAVEL_DEBUG. DeviceError, before anything runs, for
// an op a device lacks that has no decomposition.
std::shared_ptr<const Recipe> make_recipe(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                                          const GraphKey& g, const FusionOptions& options, int has_contraction,
                                          bool describe, const DeviceOps& ops = {}, const DeviceMasks& epilogues = {},
                                          const DeviceMasks& chains = {});

}  // namespace ravel::detail
