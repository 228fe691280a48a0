// Builds one C ABI kernel program (rvl_program) from graph nodes.
#pragma once

#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/node.hpp"
#include "ravel/backend.h"

namespace ravel::detail {

// rvl_operand for a view of a node of `dtype`, over an iteration space of view.rank() axes. Its
// buffer handle is NULL: lowered kernels are bound to buffers when they run (kernel_cache.hpp).
rvl_operand make_operand(DType dtype, const StridedView& view);

class KernelBuilder {
 public:
  // `inlined`: Alu nodes to evaluate inside this kernel rather than load (may be null).
  explicit KernelBuilder(Shape iteration, const std::unordered_set<const Node*>* inlined = nullptr)
      : shape_(std::move(iteration)), inlined_(inlined) {}

  // Emits the value of `n` over the iteration space: inlined Alu nodes as instructions on
  // their sources' values, everything else via load(). Each node is emitted once per kernel.
  int32_t value(const NodePtr& n);

  // Emits instructions that read `n` over the iteration space (which must equal n's shape);
  // returns the SSA index of the value. Constants become CONST instructions; everything else
  // becomes a LOAD of an input whose buffer is bound at run time (bases()[arg]).
  int32_t load(const NodePtr& n) { return load(resolve(n)); }
  int32_t load(Source s);  // `s.base` read through `s.view`
  int32_t emit(rvl_op op, DType dtype, std::vector<int32_t> srcs);

  // The finished program writing into `out` (contiguous, of the result's shape, bound later);
  // with a reduction, `axes` are reduced and the output view has stride 0 along them.
  // The returned struct points into this builder, which must outlive its use.
  const rvl_program& finish(const Node& out, rvl_reduce_op reduce = RVL_REDUCE_NONE, uint32_t axes = 0);
  // Bases read by the program (for freeing temporaries afterwards).
  const std::vector<NodePtr>& bases() const { return bases_; }
  // Reads of `contraction` become ACC instructions (a contraction epilogue, Note [Epilogue fusion]).
  void set_accumulator(const Node* contraction) { acc_ = contraction; }
  // The row values of a chain (Note [Row chains in the planner]): a read of a reduction in `acc`
  // becomes ACC with that arg; a read of an Alu node in `folded` (over the reduced shape, read
  // broadcast over the rows) is that node's own instructions on its sources' row values. Both
  // maps must outlive the builder.
  void set_row_values(const std::unordered_map<const Node*, int32_t>* acc,
                      const std::unordered_set<const Node*>* folded) {
    row_acc_ = acc;
    row_folded_ = folded;
  }
  const std::vector<rvl_operand>& inputs() const { return inputs_; }
  const std::vector<rvl_instruction>& instructions() const { return instrs_; }
  // One line per instruction and input, for RAVEL_DEBUG; `code`: the instructions that run
  // instead of instructions() (the decomposed ones, Note [Capabilities] in graph/ops.hpp).
  std::string describe(const std::vector<rvl_instruction>* code = nullptr) const;

 private:
  int32_t row_value(const Node* n);  // a chain's row value (set_row_values), once per kernel
  Shape shape_;
  const std::unordered_map<const Node*, int32_t>* row_acc_ = nullptr;
  const std::unordered_set<const Node*>* row_folded_ = nullptr;
  const std::unordered_set<const Node*>* inlined_;
  const Node* acc_ = nullptr;
  std::unordered_map<const Node*, int32_t> emitted_;
  std::vector<rvl_operand> inputs_;
  std::vector<NodePtr> bases_;
  std::vector<StridedView> views_;
  std::vector<rvl_instruction> instrs_;
  // Half values rounded before a comparison (Note [Comparisons see stored halves]).
  int32_t rounded(int32_t k);
  std::unordered_map<int32_t, int32_t> rounded_;
  std::map<std::pair<uint64_t, std::string>, int32_t> loaded_;  // (base id, view) -> SSA index
  rvl_program program_{};
};

}  // namespace ravel::detail
