// The plugin's own collectives as host operations (Note [Plugin all-reduce]).
#include "runtime/plugin_collective.hpp"

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "ravel/error.hpp"
#include "ravel/runtime.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/host_op.hpp"
#include "runtime/loaded_plugin.hpp"

namespace ravel::detail {

namespace {

enum class Mode { Never, Always, Auto };

// RAVEL_PLUGIN_COLLECTIVES, read at each collective (tests switch it within one process).
Mode mode() {
  const char* v = std::getenv("RAVEL_PLUGIN_COLLECTIVES");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return Mode::Auto;
  if (std::strcmp(v, "0") == 0) return Mode::Never;
  if (std::strcmp(v, "1") == 0) return Mode::Always;
  throw ValueError(std::string("RAVEL_PLUGIN_COLLECTIVES='") + v +
                   "' is not a setting: expected 0 (never), 1 (at every size) or auto (from " +
                   std::to_string(kPluginAllReduceMinElements) + " elements)");
}

int32_t abi_op_of(ReduceOp op, bool min) {
  switch (op) {
    case ReduceOp::Sum: return RVL_ALL_REDUCE_SUM;
    case ReduceOp::Prod: return RVL_ALL_REDUCE_PROD;
    case ReduceOp::Max: return min ? RVL_ALL_REDUCE_MIN : RVL_ALL_REDUCE_MAX;
    case ReduceOp::LogSumExp: return 0;  // not a collective op of the ABI: composed
  }
  return 0;
}

enum class Kind { AllReduce, ReduceScatter, AllGather };

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;  // a checked shape (graph/view.hpp): no overflow
  return n;
}

// One plugin collective over n devices; `count` as the ABI counts it (per part for all_reduce,
// per output for reduce_scatter, per input for all_gather).
class PluginCollective final : public HostOp {
 public:
  PluginCollective(Kind kind, std::shared_ptr<LoadedPlugin> plugin, std::vector<Device> devices, DType dtype,
                   int64_t count, int32_t op, std::string label)
      : kind_(kind), plugin_(std::move(plugin)), devices_(std::move(devices)), dtype_(dtype), count_(count), op_(op),
        label_(std::move(label)) {}

  std::string label() const override { return label_; }

  void begin(const std::vector<const DeviceBuffer*>& inputs) override {
    const auto n = static_cast<int32_t>(devices_.size());
    const uint64_t count = static_cast<uint64_t>(count_);
    const uint64_t bytes = count * dtype_size(dtype_) * (kind_ == Kind::AllGather ? static_cast<uint64_t>(n) : 1u);
    std::vector<std::shared_ptr<DeviceBuffer>> outs;
    std::vector<const rvl_buffer*> in;
    std::vector<rvl_buffer*> out;
    for (size_t k = 0; k < devices_.size(); ++k) {
      outs.push_back(std::make_shared<DeviceBuffer>(plugin_, devices_[k].index(), bytes));
      in.push_back(inputs[k]->handle());
      out.push_back(outs.back()->handle());
    }
    const rvl_backend_api& api = plugin_->api();
    const auto dt = static_cast<int32_t>(dtype_);
    switch (kind_) {
      case Kind::AllReduce: plugin_->check(api.all_reduce(n, nullptr, in.data(), out.data(), count, dt, op_), label_); break;
      case Kind::ReduceScatter:
        plugin_->check(api.reduce_scatter(n, nullptr, in.data(), out.data(), count, dt, op_), label_);
        break;
      case Kind::AllGather: plugin_->check(api.all_gather(n, nullptr, in.data(), out.data(), count, dt), label_); break;
    }
    outputs_ = std::move(outs);
  }
  std::vector<std::shared_ptr<DeviceBuffer>> take_outputs() override { return std::exchange(outputs_, {}); }
  void end(const std::vector<DeviceBuffer*>&) override {}
  void cancel() noexcept override { outputs_.clear(); }
  bool runs_in_a_lane() const override { return true; }

 private:
  Kind kind_;
  std::shared_ptr<LoadedPlugin> plugin_;
  std::vector<Device> devices_;
  DType dtype_;
  int64_t count_;
  int32_t op_;
  std::string label_;
  std::vector<std::shared_ptr<DeviceBuffer>> outputs_;
};

bool has_member(const rvl_backend_api* api, Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return RAVEL_API_HAS(api, all_reduce);
    case Kind::ReduceScatter: return RAVEL_API_HAS(api, reduce_scatter);
    case Kind::AllGather: return RAVEL_API_HAS(api, all_gather);
  }
  return false;
}

// The collective over `parts` (one shape and dtype, distinct devices of one plugin that has the
// member and runs the dtype), each result of `out_shape`; empty where any of that fails, or
// RAVEL_PLUGIN_COLLECTIVES says no.
std::vector<NodePtr> run(Kind kind, const std::vector<NodePtr>& parts, int32_t abi_op, int64_t count,
                         const Shape& out_shape, std::string label) {
  const Mode m = mode();
  if (m == Mode::Never || parts.size() < 2) return {};
  const int64_t elems = parts[0]->numel();
  if (count == 0 || (m == Mode::Auto && elems < kPluginAllReduceMinElements)) return {};
  const Runtime& rt = Runtime::get();
  const std::shared_ptr<LoadedPlugin> plugin = rt.plugin_for(parts[0]->device);
  if (!has_member(&plugin->api(), kind)) return {};
  std::vector<Device> devices;
  std::set<int32_t> seen;
  for (const NodePtr& p : parts) {
    if (p->shape != parts[0]->shape || p->dtype != parts[0]->dtype) return {};
    if (rt.plugin_for(p->device) != plugin || !seen.insert(p->device.index()).second) return {};
    if (!((plugin->caps(p->device.index()).dtypes >> static_cast<uint32_t>(p->dtype)) & 1u)) return {};
    label += (devices.empty() ? "" : ", ") + p->device.str();
    devices.push_back(p->device);
  }
  auto host = std::make_shared<PluginCollective>(kind, plugin, devices, parts[0]->dtype, count, abi_op, std::move(label));
  std::vector<Tensor> inputs;
  std::vector<HostOutput> outs;
  for (const NodePtr& p : parts) {
    inputs.emplace_back(p);
    outs.push_back(HostOutput{p->dtype, out_shape, p->device});
  }
  begin_host_op(host, inputs);
  std::vector<NodePtr> result;
  for (const Tensor& t : end_host_op(host, outs)) result.push_back(t.node());
  return result;
}

}  // namespace

std::vector<NodePtr> run_plugin_all_reduce(const std::vector<NodePtr>& parts, ReduceOp op, bool min) {
  const int32_t abi = abi_op_of(op, min);
  if (abi == 0 || parts.empty()) return {};
  return run(Kind::AllReduce, parts, abi, parts[0]->numel(), parts[0]->shape,
             std::string("all_reduce (") + (min ? "min" : reduce_name(op)) + ") over ");
}

std::vector<NodePtr> run_plugin_reduce_scatter(const std::vector<NodePtr>& parts, ReduceOp op, bool min,
                                               const Shape& out_shape) {
  const int32_t abi = abi_op_of(op, min);
  if (abi == 0 || parts.empty()) return {};
  const auto n = static_cast<int64_t>(parts.size());
  if (parts[0]->numel() % n != 0 || shape_numel(out_shape) * n != parts[0]->numel()) return {};
  return run(Kind::ReduceScatter, parts, abi, parts[0]->numel() / n, out_shape,
             std::string("reduce_scatter (") + (min ? "min" : reduce_name(op)) + ") over ");
}

std::vector<NodePtr> run_plugin_all_gather(const std::vector<NodePtr>& parts, const Shape& out_shape) {
  if (parts.empty()) return {};
  const auto n = static_cast<int64_t>(parts.size());
  if (shape_numel(out_shape) != parts[0]->numel() * n) return {};
  return run(Kind::AllGather, parts, 0, parts[0]->numel(), out_shape, "all_gather over ");
}

}  // namespace ravel::detail
