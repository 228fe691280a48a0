// make_recipe: the plan (fusion.hpp) of one realization, lowered kernel by kernel to rvl_program /
// rvl_contraction (kernel_builder.hpp, contraction.hpp) with buffers left unbound.
#include "schedule/recipe.hpp"

#include <algorithm>
#include <cstring>

#include "schedule/fusion.hpp"
#include "schedule/kernel_builder.hpp"
#include "schedule/kernel_cache.hpp"

namespace ravel::detail {

namespace {

// Elements a view touches (its valid box) times the element size.
int64_t view_bytes(const StridedView& v, DType t) {
  int64_t n = 1;
  for (int64_t d = 0; d < v.rank(); ++d) {
    auto [lo, hi] = v.valid(d);
    n *= (v.strides[d] == 0 ? std::min<int64_t>(1, hi - lo) : hi - lo);
  }
  return n * dtype_size(t);
}

// The bytes a reduction program with lists built apart reads: every input's view over the
// iteration space, its validity box included.
int64_t inputs_bytes(const CachedKernel& ck, const std::vector<NodePtr>& bases, const Shape& space) {
  int64_t bytes = 0;
  for (size_t i = 0; i < ck.inputs.size(); ++i) {
    StridedView v = StridedView::contiguous(space);
    v.strides.assign(ck.inputs[i].view.strides, ck.inputs[i].view.strides + ck.program.rank);
    v.mask = std::vector<Range>(ck.program.rank);
    for (int32_t d = 0; d < ck.program.rank; ++d)
      (*v.mask)[d] = {ck.inputs[i].view.valid_lo[d], ck.inputs[i].view.valid_hi[d]};
    bytes += view_bytes(v, bases[i]->dtype);
  }
  return bytes;
}

// Appends the inputs of `b` (a list built apart: a row epilogue, a chain's stage) that `ck` does
// not have yet and renumbers `code`'s LOADs into ck's inputs: a view the program already reads
// (x, for softmax) is the same input, so the program names it once.
void merge_inputs(CachedKernel& ck, std::vector<NodePtr>& bases, const KernelBuilder& b, const GraphKey& g,
                  std::vector<rvl_instruction>& code) {
  std::vector<int32_t> arg_of;
  for (size_t i = 0; i < b.inputs().size(); ++i) {
    const rvl_operand& op = b.inputs()[i];
    int32_t found = -1;
    for (size_t j = 0; j < ck.inputs.size() && found < 0; ++j)
      if (bases[j] == b.bases()[i] && ck.inputs[j].dtype == op.dtype &&
          std::memcmp(&ck.inputs[j].view, &op.view, sizeof op.view) == 0)
        found = static_cast<int32_t>(j);
    if (found < 0) {
      found = static_cast<int32_t>(ck.inputs.size());
      ck.inputs.push_back(op);
      bases.push_back(b.bases()[i]);
      ck.input_nodes.push_back(g.local(b.bases()[i].get()));
    }
    arg_of.push_back(found);
  }
  for (rvl_instruction& in : code)
    if (in.op == RVL_OP_LOAD) in.arg = arg_of[static_cast<size_t>(in.arg)];
}

}  // namespace

std::shared_ptr<const Recipe> make_recipe(const std::vector<NodePtr>& order, const std::unordered_set<const Node*>& keep,
                                          const GraphKey& g, const FusionOptions& options, int has_contraction,
                                          bool debug, const DeviceOps& ops, const DeviceMasks& epilogues,
                                          const DeviceMasks& chains) {
  KernelPlan plan = plan_kernels(order, keep, options, has_contraction, epilogues, chains);
  auto r = std::make_shared<Recipe>();
  r->inlined.assign(g.locals.size(), 0);
  for (const Node* n : plan.inlined) r->inlined[g.local(n)] = 1;
  for (const Node* n : keep) r->keep.push_back(g.local(n));
  auto take_builder = [&](CachedKernel& ck, const KernelBuilder& b, const Device& device) {
    ck.inputs = b.inputs();
    auto mask = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == device; });
    ck.instructions = mask == ops.end() ? b.instructions() : lower_for_device(b.instructions(), mask->second, device.str());
    ck.program.n_instructions = static_cast<int32_t>(ck.instructions.size());
    const bool rewritten = ck.instructions.size() != b.instructions().size();
    if (debug && rewritten) ck.detail += "    (ops " + device.str() + " lacks are decomposed)\n";
    for (const auto& base : b.bases()) ck.input_nodes.push_back(g.local(base.get()));
    if (debug) ck.detail += b.describe(&ck.instructions);
  };
  for (const auto& k : plan.roots) {
    CachedKernel ck;
    ck.out = g.local(k.get());
    for (const auto& rd : plan.reads.at(k.get())) ck.reads.push_back(g.local(rd.get()));
    auto c = plan.contractions.find(k.get());
    auto e = plan.epilogues.find(k.get());
    if (k->kind == NodeKind::Transfer) {
      ck.kind = CachedKernel::Kind::Transfer;
      ck.label = "transfer";
      ck.a_node = g.local(resolve(k->srcs[0]).base.get());  // laid out like its base (Tensor::to)
      ck.bytes_read = k->numel() * dtype_size(k->dtype);
      if (debug) ck.detail = "    from " + k->srcs[0]->device.str() + " to " + k->device.str() + "\n";
    } else if (c != plan.contractions.end() || e != plan.epilogues.end()) {
      ck.kind = CachedKernel::Kind::Contraction;
      ck.label = "contraction";
      const Node& reduce = e != plan.epilogues.end() ? *e->second : *k;
      const ContractionPlan& cp = plan.contractions.at(&reduce);
      ck.contraction = lower_contraction(cp, reduce, *k);
      ck.a_node = g.local(resolve(cp.x).base.get());
      ck.b_node = g.local(resolve(cp.y).base.get());
      if (e != plan.epilogues.end()) {
        // Note [Epilogue fusion]: this elementwise kernel runs as its contraction's epilogue.
        KernelBuilder b(epilogue_shape(plan.contractions.at(e->second), *e->second), &plan.inlined);
        b.set_accumulator(e->second);
        std::vector<int32_t> ins;
        for (const auto& s : k->srcs) ins.push_back(b.value(s));
        b.emit(abi_op(k->alu), k->dtype, ins);
        if (debug) ck.detail = "    epilogue:\n";
        take_builder(ck, b, k->device);
      }
      for (const auto& rd : plan.reads.at(k.get())) ck.bytes_read += rd->numel() * dtype_size(rd->dtype);
    } else if (auto rc = plan.row_chains.find(k.get()); rc != plan.row_chains.end()) {
      // Note [Row chains in the planner]: the stages, the reduction, and (with an Alu root) the
      // epilogue, each list reading the chain's reductions as ACC and its folded nodes as
      // their scalar ops.
      const RowChain& chain = rc->second;
      const Node& red = *chain.reduction;
      ck.label = chain.epilogue ? "reduce chain+epilogue" : "reduce chain";
      const Shape& space = red.srcs[0]->shape;
      std::unordered_map<const Node*, int32_t> acc{{&red, 0}};
      for (size_t s = 0; s < chain.stages.size(); ++s) acc[chain.stages[s]] = static_cast<int32_t>(s + 1);
      auto lower = [&](const std::vector<rvl_instruction>& code) {
        auto mask = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == k->device; });
        return mask == ops.end() ? code : lower_for_device(code, mask->second, k->device.str());
      };
      KernelBuilder b(space, &plan.inlined);
      b.set_row_values(&acc, &plan.fused_reductions);
      b.value(red.srcs[0]);
      ck.program = b.finish(red, static_cast<rvl_reduce_op>(red.reduce), red.axes);
      if (debug) {
        ck.detail = std::string("    ") + reduce_name(red.reduce) + ", axes mask " + std::to_string(red.axes) + ", " +
                    std::to_string(chain.stages.size()) + " stage(s)\n";
      }
      take_builder(ck, b, k->device);
      std::vector<NodePtr> bases = b.bases();
      for (size_t s = 0; s < chain.stages.size(); ++s) {
        const Node& st = *chain.stages[s];
        KernelBuilder sb(space, &plan.inlined);
        sb.set_row_values(&acc, &plan.fused_reductions);
        sb.value(st.srcs[0]);
        std::vector<rvl_instruction> code = lower(sb.instructions());
        if (debug) {
          ck.detail += std::string("    stage ") + std::to_string(s) + " (ACC " + std::to_string(s + 1) + "): " +
                       reduce_name(st.reduce) + " (its inputs renumbered into the program's):\n" + sb.describe(&code);
        }
        merge_inputs(ck, bases, sb, g, code);
        rvl_reduce_stage stage{};
        stage.struct_size = sizeof(rvl_reduce_stage);
        stage.reduce_op = static_cast<int32_t>(st.reduce);
        stage.acc_dtype = static_cast<int32_t>(st.dtype);
        stage.n_instructions = static_cast<int32_t>(code.size());
        ck.stages.push_back(stage);
        ck.stage_code.push_back(std::move(code));
      }
      if (chain.epilogue) {
        KernelBuilder eb(space, &plan.inlined);
        eb.set_row_values(&acc, &plan.fused_reductions);
        std::vector<int32_t> ins;
        for (const auto& s : k->srcs) ins.push_back(eb.value(s));
        eb.emit(abi_op(k->alu), k->dtype, ins);
        ck.epilogue = lower(eb.instructions());
        if (debug) ck.detail += "    epilogue (its inputs renumbered into the program's):\n" + eb.describe(&ck.epilogue);
        merge_inputs(ck, bases, eb, g, ck.epilogue);
        ck.program.output = make_operand(k->dtype, StridedView::contiguous(k->shape));
        ck.program.n_epilogue = static_cast<int32_t>(ck.epilogue.size());
      }
      ck.program.n_inputs = static_cast<int32_t>(ck.inputs.size());
      ck.program.acc_dtype = static_cast<int32_t>(red.dtype);
      ck.program.n_stages = static_cast<int32_t>(ck.stages.size());
      ck.bytes_read += inputs_bytes(ck, bases, space);
    } else if (auto re = plan.row_epilogues.find(k.get()); re != plan.row_epilogues.end()) {
      // Note [Row epilogue fusion]: the reduction's program, with this root as its epilogue.
      const Node& red = *re->second;
      ck.label = "reduce+epilogue";
      const Shape& space = red.srcs[0]->shape;
      KernelBuilder b(space, &plan.inlined);
      b.value(red.srcs[0]);
      KernelBuilder eb(space, &plan.inlined);
      eb.set_accumulator(&red);
      std::vector<int32_t> ins;
      for (const auto& s : k->srcs) ins.push_back(eb.value(s));
      eb.emit(abi_op(k->alu), k->dtype, ins);
      ck.program = b.finish(red, static_cast<rvl_reduce_op>(red.reduce), red.axes);
      ck.program.output = make_operand(k->dtype, StridedView::contiguous(k->shape));
      if (debug)
        ck.detail = std::string("    ") + reduce_name(red.reduce) + ", axes mask " + std::to_string(red.axes) + "\n";
      take_builder(ck, b, k->device);
      // The epilogue shares the reduction's inputs (merge_inputs: x, for softmax, is named once).
      std::vector<NodePtr> bases = b.bases();
      auto mask = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == k->device; });
      ck.epilogue = mask == ops.end() ? eb.instructions() : lower_for_device(eb.instructions(), mask->second, k->device.str());
      if (debug) ck.detail += "    epilogue (its inputs renumbered into the program's):\n" + eb.describe(&ck.epilogue);
      merge_inputs(ck, bases, eb, g, ck.epilogue);
      ck.program.n_inputs = static_cast<int32_t>(ck.inputs.size());
      ck.program.n_epilogue = static_cast<int32_t>(ck.epilogue.size());
      ck.program.acc_dtype = static_cast<int32_t>(red.dtype);
      ck.bytes_read += inputs_bytes(ck, bases, space);
    } else {
      const bool is_reduce = k->kind == NodeKind::Reduce;
      ck.label = is_reduce ? "reduce" : k->kind == NodeKind::Copy ? "copy" : "elementwise";
      const Shape& space = is_reduce ? k->srcs[0]->shape : k->shape;
      KernelBuilder b(space, &plan.inlined);
      if (k->kind == NodeKind::Alu) {
        std::vector<int32_t> ins;
        for (const auto& s : k->srcs) ins.push_back(b.value(s));
        b.emit(abi_op(k->alu), k->dtype, ins);
      } else {
        b.value(k->srcs[0]);
      }
      ck.program = b.finish(*k, is_reduce ? static_cast<rvl_reduce_op>(k->reduce) : RVL_REDUCE_NONE,
                            is_reduce ? k->axes : 0);
      if (debug && is_reduce)  // RAVEL_DEBUG=1 names the reduction (sum, max, prod, logsumexp)
        ck.detail = std::string("    ") + reduce_name(k->reduce) + ", axes mask " + std::to_string(k->axes) + "\n";
      take_builder(ck, b, k->device);
      for (int32_t i = 0; i < ck.program.n_inputs; ++i) {
        StridedView v = StridedView::contiguous(space);
        v.strides.assign(ck.program.inputs[i].view.strides, ck.program.inputs[i].view.strides + ck.program.rank);
        v.mask = std::vector<Range>(ck.program.rank);
        for (int32_t d = 0; d < ck.program.rank; ++d)
          (*v.mask)[d] = {ck.program.inputs[i].view.valid_lo[d], ck.program.inputs[i].view.valid_hi[d]};
        ck.bytes_read += view_bytes(v, b.bases()[i]->dtype);
      }
    }
    ck.program.inputs = nullptr;  // pointed into the builder; re-aimed at every run
    ck.program.instructions = nullptr;
    ck.program.epilogue = nullptr;
    ck.program.stages = nullptr;
    for (const auto& code : ck.stage_code) r->bytes += sizeof(rvl_reduce_stage) + code.size() * sizeof(rvl_instruction);
    r->bytes += sizeof(CachedKernel) + ck.inputs.size() * sizeof(rvl_operand) + ck.detail.size() +
                (ck.instructions.size() + ck.epilogue.size()) * sizeof(rvl_instruction) + (ck.reads.size() + ck.input_nodes.size()) * 4;
    r->kernels.push_back(std::move(ck));
  }
  r->bytes += sizeof(Recipe) + r->inlined.size() + r->keep.size() * 4;
  return r;
}

}  // namespace ravel::detail
