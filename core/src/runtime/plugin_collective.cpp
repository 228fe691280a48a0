// The plugin's own all-reduce as a host operation (Note [Plugin all-reduce]).
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

class PluginAllReduce final : public HostOp {
 public:
  PluginAllReduce(std::shared_ptr<LoadedPlugin> plugin, std::vector<Device> devices, DType dtype, int64_t count,
                  int32_t op, std::string label)
      : plugin_(std::move(plugin)), devices_(std::move(devices)), dtype_(dtype), count_(count), op_(op),
        label_(std::move(label)) {}

  std::string label() const override { return label_; }

  void begin(const std::vector<const DeviceBuffer*>& inputs) override {
    const uint64_t bytes = static_cast<uint64_t>(count_) * dtype_size(dtype_);
    std::vector<std::shared_ptr<DeviceBuffer>> outs;
    std::vector<const rvl_buffer*> in;
    std::vector<rvl_buffer*> out;
    for (size_t k = 0; k < devices_.size(); ++k) {
      outs.push_back(std::make_shared<DeviceBuffer>(plugin_, devices_[k].index(), bytes));
      in.push_back(inputs[k]->handle());
      out.push_back(outs.back()->handle());
    }
    plugin_->check(plugin_->api().all_reduce(static_cast<int32_t>(devices_.size()), nullptr, in.data(), out.data(),
                                             static_cast<uint64_t>(count_), static_cast<int32_t>(dtype_), op_),
                   label_);
    outputs_ = std::move(outs);
  }
  std::vector<std::shared_ptr<DeviceBuffer>> take_outputs() override { return std::exchange(outputs_, {}); }
  void end(const std::vector<DeviceBuffer*>&) override {}
  void cancel() noexcept override { outputs_.clear(); }
  bool runs_in_a_lane() const override { return true; }

 private:
  std::shared_ptr<LoadedPlugin> plugin_;
  std::vector<Device> devices_;
  DType dtype_;
  int64_t count_;
  int32_t op_;
  std::string label_;
  std::vector<std::shared_ptr<DeviceBuffer>> outputs_;
};

}  // namespace

std::vector<NodePtr> run_plugin_all_reduce(const std::vector<NodePtr>& parts, ReduceOp op, bool min) {
  const Mode m = mode();
  if (m == Mode::Never || parts.size() < 2) return {};
  const int32_t abi = abi_op_of(op, min);
  const int64_t count = parts[0]->numel();
  if (abi == 0 || count == 0 || (m == Mode::Auto && count < kPluginAllReduceMinElements)) return {};
  const Runtime& rt = Runtime::get();
  const std::shared_ptr<LoadedPlugin> plugin = rt.plugin_for(parts[0]->device);
  if (!RAVEL_API_HAS(&plugin->api(), all_reduce)) return {};
  std::vector<Device> devices;
  std::set<int32_t> seen;
  std::string label = std::string("all_reduce (") + (min ? "min" : reduce_name(op)) + ") over ";
  for (const NodePtr& p : parts) {
    if (p->shape != parts[0]->shape || p->dtype != parts[0]->dtype) return {};
    if (rt.plugin_for(p->device) != plugin || !seen.insert(p->device.index()).second) return {};
    if (!((plugin->caps(p->device.index()).dtypes >> static_cast<uint32_t>(p->dtype)) & 1u)) return {};
    label += (devices.empty() ? "" : ", ") + p->device.str();
    devices.push_back(p->device);
  }
  auto host = std::make_shared<PluginAllReduce>(plugin, devices, parts[0]->dtype, count, abi, std::move(label));
  std::vector<Tensor> inputs;
  std::vector<HostOutput> outs;
  for (const NodePtr& p : parts) {
    inputs.emplace_back(p);
    outs.push_back(HostOutput{p->dtype, p->shape, p->device});
  }
  begin_host_op(host, inputs);
  std::vector<NodePtr> result;
  for (const Tensor& t : end_host_op(host, outs)) result.push_back(t.node());
  return result;
}

}  // namespace ravel::detail
