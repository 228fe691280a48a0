#include "schedule/interleave.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace ravel::detail {

// Note [Device interleaving]
// The runtime launches kernels in the order of the nodes, and a launch on a device with a queue
// returns at once; so a graph that spans devices (a sharded program: every part's forward and
// backward, then the collectives) keeps them all busy only if their kernels alternate. A
// depth-first post-order lists one part's whole subgraph before the next's, and the second
// device would idle until the host had launched everything of the first (and, where the first
// device runs on the launching thread, until it had computed it: Note [Queues by core count] in
// plugins/tbb_cpu/devices.hpp). So a graph with nodes on several devices is re-sorted
// topologically (Kahn), taking each next node from the device that has had the fewest so far
// among those with a node ready, and the earliest ready node of that device in the depth-first
// order: a deterministic order, so the kernel cache sees the same key for the same graph.
//
// Note [Cross-device work first]
// Within a device, the ready node taken is the one fewest hops from a node on another device
// that reads its result, ties broken by the depth-first order. Another device that waits for a
// value (a Transfer reading it) idles until the value is computed; so the short chain that feeds
// it goes before this device's own long independent work. The case that asked for it: in a
// data-parallel training step, device 1's backward pass starts from its loss cotangent, a scalar
// that crosses from device 0 (Note [Sharded gradients]); in the depth-first order device 0
// reached that scalar only after its whole backward pass, so the two backward passes ran one
// after the other (docs/performance.md §6). Nodes with no consumer elsewhere come last on their
// device, in depth-first order among themselves.
std::vector<NodePtr> interleave_devices(std::vector<NodePtr> order) {
  // The common case, one device, costs a comparison per node (this runs on every realization).
  bool one_device = true;
  for (const auto& n : order) one_device = one_device && n->device == order.front()->device;
  if (one_device) return order;
  std::vector<Device> devices;  // a mesh has a handful of devices: a linear search is cheapest
  std::vector<size_t> device_of(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    size_t d = 0;
    while (d < devices.size() && !(devices[d] == order[i]->device)) ++d;
    if (d == devices.size()) devices.push_back(order[i]->device);
    device_of[i] = d;
  }
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position.emplace(order[i].get(), i);
  std::vector<int> pending(order.size(), 0);
  std::vector<std::vector<size_t>> users(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    std::unordered_set<size_t> srcs;  // a node may read one source twice
    for (const auto& s : order[i]->srcs) {
      auto it = position.find(s.get());
      if (it != position.end() && srcs.insert(it->second).second) {
        ++pending[i];
        users[it->second].push_back(i);
      }
    }
  }
  // Hops from each node to a reader on another device (Note [Cross-device work first]); users
  // come after their sources in `order`, so one backward sweep sees every user's count first.
  constexpr size_t kFar = SIZE_MAX;
  std::vector<size_t> hops(order.size(), kFar);
  for (size_t i = order.size(); i-- > 0;)
    for (size_t u : users[i]) {
      const size_t via = device_of[u] != device_of[i] ? 0 : hops[u] == kFar ? kFar : hops[u] + 1;
      hops[i] = std::min(hops[i], via);
    }
  using Key = std::pair<size_t, size_t>;  // (hops, position in the depth-first order)
  using MinHeap = std::priority_queue<Key, std::vector<Key>, std::greater<>>;
  std::vector<MinHeap> ready(devices.size());
  std::vector<size_t> taken(devices.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    if (pending[i] == 0) ready[device_of[i]].push({hops[i], i});
  std::vector<NodePtr> out;
  out.reserve(order.size());
  while (out.size() < order.size()) {
    size_t best = ready.size();
    for (size_t d = 0; d < ready.size(); ++d)
      if (!ready[d].empty() && (best == ready.size() || taken[d] < taken[best])) best = d;
    const size_t i = ready[best].top().second;
    ready[best].pop();
    ++taken[best];
    out.push_back(std::move(order[i]));
    for (size_t u : users[i])
      if (--pending[u] == 0) ready[device_of[u]].push({hops[u], u});
  }
  return out;
}

}  // namespace ravel::detail
