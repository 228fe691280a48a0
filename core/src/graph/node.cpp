#include "graph/node.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace ravel::detail {

// Note [Hash-consing]
// All non-Buffer nodes live in one table keyed by their structural hash; intern() returns the
// living node equal to the prototype if there is one. Entries hold weak pointers, and a node
// erases its own entry when it dies, so the table never keeps a graph alive. Sources are
// compared by identity (their ids), which is sound because sources are themselves interned.

namespace {

std::mutex g_mutex;  // the table's
std::unordered_multimap<size_t, std::weak_ptr<Node>> g_table;
// Counters need no lock: a Buffer node or a unique alias (an eager collective's result) is then
// made and freed without taking g_mutex (docs/distributed.md, "The core's per-call cost").
std::atomic<uint64_t> g_next_id{1};
std::atomic<size_t> g_live{0};

inline void mix(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

size_t structural_hash(const Node& n) {
  size_t h = static_cast<size_t>(n.kind);
  mix(h, static_cast<size_t>(n.dtype));
  for (int64_t s : n.shape) mix(h, static_cast<size_t>(s));
  mix(h, std::hash<std::string>{}(n.device.backend()));
  mix(h, static_cast<size_t>(n.device.index()));
  for (const auto& s : n.srcs) mix(h, s->id);
  mix(h, static_cast<size_t>(n.alu));
  mix(h, static_cast<size_t>(n.reduce));
  mix(h, n.axes);
  for (int64_t s : n.view.strides) mix(h, static_cast<size_t>(s));
  mix(h, static_cast<size_t>(n.view.offset));
  if (n.view.mask)
    for (auto [lo, hi] : *n.view.mask) mix(h, static_cast<size_t>(lo * 31 + hi));
  mix(h, n.parent ? n.parent->id : 0);
  mix(h, n.detached);
  mix(h, static_cast<size_t>(n.move));
  for (int64_t a : n.move_args) mix(h, static_cast<size_t>(a));
  mix(h, std::hash<double>{}(n.value.f));
  mix(h, static_cast<size_t>(n.value.i));
  return h;
}

bool same_structure(const Node& a, const Node& b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.shape != b.shape || !(a.device == b.device) ||
      a.alu != b.alu || a.reduce != b.reduce || a.axes != b.axes || !(a.view == b.view) ||
      a.srcs.size() != b.srcs.size() || a.parent != b.parent || a.move != b.move || a.move_args != b.move_args ||
      a.detached != b.detached)
    return false;
  // Bitwise comparison of the float value, so that NaN constants intern and -0.0 != 0.0.
  if (std::memcmp(&a.value.f, &b.value.f, sizeof(double)) != 0 || a.value.i != b.value.i) return false;
  for (size_t i = 0; i < a.srcs.size(); ++i)
    if (a.srcs[i] != b.srcs[i]) return false;
  return true;
}

// Deep graphs: destroying the last handle of a 100,000-node chain would recurse 100,000 deep
// through shared_ptr destructors. Instead a dying node moves its sources onto this thread's
// pending list, and only the outermost destructor drains it, so the depth stays constant.
thread_local std::vector<NodePtr>* t_pending = nullptr;

}  // namespace

int64_t Node::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Node::~Node() {
  if (id == 0) return;  // a prototype that was never registered (see intern)
  if (interned) {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto [it, end] = g_table.equal_range(hash);
    for (; it != end; ++it) {
      // Our own entry is the expired one whose id matches; compare by the control block.
      if (it->second.expired()) {
        // Several expired entries may share the hash; erase just one per dying node.
        g_table.erase(it);
        break;
      }
    }
  }
  g_live.fetch_sub(1, std::memory_order_relaxed);
  if (parent) srcs.push_back(std::move(parent));  // view chains can be deep too
  for (auto& c : custom_inputs) srcs.push_back(std::move(c));
  if (grad) srcs.push_back(std::move(grad));
  if (t_pending != nullptr) {
    for (auto& s : srcs) t_pending->push_back(std::move(s));
    return;
  }
  std::vector<NodePtr> pending;
  t_pending = &pending;
  for (auto& s : srcs) pending.push_back(std::move(s));
  while (!pending.empty()) {
    NodePtr last = std::move(pending.back());
    pending.pop_back();
    last.reset();  // may run ~Node, which appends to `pending`
  }
  t_pending = nullptr;
}

NodePtr intern(Node&& proto) {
  proto.hash = structural_hash(proto);
  // Candidates locked but not taken are released after the mutex: if another thread dropped its
  // last handle meanwhile, ours is the last one, and ~Node takes g_mutex itself.
  std::vector<NodePtr> seen;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto [it, end] = g_table.equal_range(proto.hash);
  for (; it != end; ++it) {
    NodePtr existing = it->second.lock();
    if (existing && same_structure(*existing, proto)) return existing;
    if (existing) seen.push_back(std::move(existing));
  }
  auto node = std::make_shared<Node>(std::move(proto));
  node->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  g_live.fetch_add(1, std::memory_order_relaxed);
  g_table.emplace(node->hash, node);
  return node;
}

NodePtr make_unique_node(Node&& proto) {
  auto node = std::make_shared<Node>(std::move(proto));
  node->interned = false;
  node->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  g_live.fetch_add(1, std::memory_order_relaxed);
  return node;
}

NodePtr make_buffer_node(DType dtype, Shape shape, Device device, std::shared_ptr<DeviceBuffer> buffer) {
  auto node = std::make_shared<Node>();
  node->interned = false;
  node->kind = NodeKind::Buffer;
  node->dtype = dtype;
  node->shape = std::move(shape);
  node->device = std::move(device);
  node->buffer = std::move(buffer);
  node->id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  g_live.fetch_add(1, std::memory_order_relaxed);
  return node;
}

Source resolve(const NodePtr& n) {
  if (n->kind == NodeKind::View) return {n->srcs[0], n->view};
  return {n, StridedView::contiguous(n->shape)};
}

bool reads_base_in_place(const Node& n) {
  return n.kind != NodeKind::View || (n.shape == n.srcs[0]->shape && n.view.is_contiguous());
}

std::recursive_mutex& buffer_mutex() {
  static std::recursive_mutex* m = new std::recursive_mutex;  // never destroyed (static teardown)
  return *m;
}

size_t live_node_count() { return g_live.load(std::memory_order_relaxed); }

}  // namespace ravel::detail
