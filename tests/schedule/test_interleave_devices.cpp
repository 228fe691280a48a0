// The launch order of graphs that span devices (Note [Device interleaving] and Note [Cross-device
// work first] in core/src/schedule/interleave.cpp), on hand-built graphs: only the nodes' devices
// and sources matter to the order, so no runtime or plugin is involved.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "graph/node.hpp"
#include "schedule/interleave.hpp"

using ravel::Device;
using ravel::detail::Node;
using ravel::detail::NodeKind;
using ravel::detail::NodePtr;

namespace {

const Device kD0("tbb_cpu", 0), kD1("tbb_cpu", 1);

NodePtr node(NodeKind kind, const Device& d, std::vector<NodePtr> srcs) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->device = d;
  n->srcs = std::move(srcs);
  return n;
}

// Position of each node in `order`, checking it is a topological order of the same nodes.
std::map<const Node*, size_t> positions(const std::vector<NodePtr>& order, size_t expected) {
  std::map<const Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i].get()] = i;
  BOOST_TEST_REQUIRE(pos.size() == expected);
  for (const auto& n : order)
    for (const auto& s : n->srcs)
      if (pos.count(s.get())) BOOST_TEST(pos[s.get()] < pos[n.get()], "a node before its source");
  return pos;
}

}  // namespace

// Device 0 has a long chain of its own (h1..h5) and a short one (s) whose value device 1 waits
// for (a Transfer). The depth-first order lists the long chain first; the interleaved order must
// hand device 1 its input before device 0 starts the long chain, and then run both.
BOOST_AUTO_TEST_CASE(the_value_another_device_waits_for_goes_first) {
  NodePtr a = node(NodeKind::Buffer, kD0, {});
  std::vector<NodePtr> h;
  NodePtr prev = a;
  for (int i = 0; i < 5; ++i) h.push_back(prev = node(NodeKind::Alu, kD0, {prev}));
  NodePtr s = node(NodeKind::Alu, kD0, {a});
  NodePtr t = node(NodeKind::Transfer, kD1, {s});
  NodePtr u = node(NodeKind::Alu, kD1, {t});
  NodePtr v = node(NodeKind::Alu, kD1, {u});
  std::vector<NodePtr> dfs = {a, h[0], h[1], h[2], h[3], h[4], s, t, u, v};
  auto out = ravel::detail::interleave_devices(dfs);
  auto pos = positions(out, dfs.size());
  BOOST_TEST(pos[s.get()] < pos[h[0].get()]);  // the short chain before the long one
  BOOST_TEST(pos[t.get()] < pos[h[1].get()]);  // device 1 has its input early
  BOOST_TEST(pos[u.get()] < pos[h[2].get()]);  // and works while device 0 runs its chain
  // The same graph gives the same order (the kernel cache keys on it).
  auto again = ravel::detail::interleave_devices(dfs);
  for (size_t i = 0; i < out.size(); ++i) BOOST_TEST(out[i].get() == again[i].get());
}

// Nodes at the same distance from another device keep the depth-first order, and the devices
// take turns: two independent chains, one per device, alternate.
BOOST_AUTO_TEST_CASE(independent_chains_alternate_in_depth_first_order) {
  NodePtr a0 = node(NodeKind::Buffer, kD0, {}), a1 = node(NodeKind::Buffer, kD1, {});
  NodePtr b0 = node(NodeKind::Alu, kD0, {a0}), b1 = node(NodeKind::Alu, kD1, {a1});
  NodePtr c0 = node(NodeKind::Alu, kD0, {b0}), c1 = node(NodeKind::Alu, kD1, {b1});
  std::vector<NodePtr> dfs = {a0, b0, c0, a1, b1, c1};
  auto out = ravel::detail::interleave_devices(dfs);
  positions(out, dfs.size());
  std::vector<const Node*> want = {a0.get(), a1.get(), b0.get(), b1.get(), c0.get(), c1.get()};
  for (size_t i = 0; i < out.size(); ++i) BOOST_TEST(out[i].get() == want[i], "position " << i);
}

// One device: the order is returned unchanged.
BOOST_AUTO_TEST_CASE(one_device_keeps_the_order) {
  NodePtr a = node(NodeKind::Buffer, kD0, {});
  NodePtr b = node(NodeKind::Alu, kD0, {a}), c = node(NodeKind::Alu, kD0, {a});
  std::vector<NodePtr> dfs = {a, c, b};
  auto out = ravel::detail::interleave_devices(dfs);
  BOOST_TEST(out[0].get() == a.get());
  BOOST_TEST(out[1].get() == c.get());
  BOOST_TEST(out[2].get() == b.get());
}
