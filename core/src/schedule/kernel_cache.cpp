#include "schedule/kernel_cache.hpp"

#include <algorithm>
#include <cstring>
#include <list>
#include <mutex>
#include <string_view>

namespace ravel::detail {

// Note [Kernel cache]
// A training loop builds the same graph every step, around new buffers (the updated weights, the
// next batch). Planning (Note [Fusion]) and lowering (KernelBuilder) depend only on the graph's
// *structure*, so make_schedule keys a Recipe — the plan's kernels lowered to rvl_program /
// rvl_contraction with every buffer handle left NULL plus, per operand, which node's buffer
// binds to it (schedule/recipe.hpp) — by a serialisation of that structure, and a later
// realization with the same key only allocates outputs, binds buffers and runs.
//
// The key (make_graph_key) spells, in topological order, every unrealized node below the targets
// and every leaf they read:
//   * unrealized node: kind, dtype, device, shape, op (Alu op; Reduce op and axes; View: strides,
//     offset and validity mask), and its sources as references to earlier local indices;
//   * leaf, at its first reference: whether it is a Const (then its dtype and exact value bits:
//     constants are lowered into instructions) or a realized buffer (dtype, device, shape — never
//     its identity, so new weights hit);
//   * the targets (as references: they get buffers and are never freed), the fusion options and
//     whether the device has contractions.
// Local indices are assigned in the order of that walk, so the key also records the *sharing*
// pattern: add(x, x) and add(x, y) differ; two graphs with equal keys are isomorphic, and the
// isomorphism is "same local index". Hence a recipe made for one applies to the other once its
// local indices are bound to the new nodes.
// Invariants: (1) the key is a complete serialisation, compared in full on lookup, so different
// structure never hits (a hash collision only costs a miss); (2) a Recipe holds no NodePtr and
// no buffer handle, so the cache never keeps a graph or a buffer alive; (3) everything the
// planner and the builder read is in the key — if they start to read something new (a node
// field, an option), it must be added here; (4) the cache is bounded (entries and bytes, LRU).

namespace {

struct KeyWriter {
  std::string& s;
  void word(int64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void shape(const Shape& sh) {
    word(static_cast<int64_t>(sh.size()));
    for (int64_t d : sh) word(d);
  }
  void device(const Device& d) {
    word(d.index());
    word(static_cast<int64_t>(d.backend().size()));
    s.append(d.backend());
  }
};

}  // namespace

GraphKey make_graph_key(const std::vector<NodePtr>& order, const std::vector<NodePtr>& targets,
                        const FusionOptions& o, int device_has_contraction) {
  GraphKey g;
  g.key.reserve(order.size() * 96 + 64);
  g.locals.reserve(order.size() * 2);
  g.index.reserve(order.size() * 2);
  KeyWriter w{g.key};
  w.word(static_cast<int64_t>(o.policy));
  w.word(o.max_instructions);
  w.word(o.max_inputs);
  w.word(o.max_recompute_instructions);
  w.word(device_has_contraction);
  auto number = [&](const NodePtr& n) {
    g.index.emplace(n.get(), static_cast<int32_t>(g.locals.size()));
    g.locals.push_back(n);
  };
  // A reference to a node: its local index, or (first time) a leaf's description.
  auto ref = [&](const NodePtr& n) {
    if (auto it = g.index.find(n.get()); it != g.index.end()) {
      w.word('R');
      w.word(it->second);
      return;
    }
    // Not numbered yet: a leaf (unrealized nodes are numbered before their consumers).
    w.word(n->kind == NodeKind::Const ? 'C' : 'B');
    w.word(static_cast<int64_t>(n->dtype));
    w.device(n->device);
    w.shape(n->shape);
    if (n->kind == NodeKind::Const) {
      int64_t bits;
      std::memcpy(&bits, &n->value.f, sizeof bits);
      w.word(bits);
      w.word(n->value.i);
    }
    number(n);
  };
  for (const auto& n : order) {
    w.word('N');
    w.word(static_cast<int64_t>(n->kind));
    w.word(static_cast<int64_t>(n->dtype));
    w.device(n->device);
    w.shape(n->shape);
    switch (n->kind) {
      case NodeKind::Alu: w.word(static_cast<int64_t>(n->alu)); break;
      case NodeKind::Reduce:
        w.word(static_cast<int64_t>(n->reduce));
        w.word(n->axes);
        break;
      case NodeKind::View: {
        const StridedView& v = n->view;
        w.shape(v.strides);
        w.word(v.offset);
        w.word(v.has_mask());
        if (v.mask)
          for (auto [lo, hi] : *v.mask) w.word(lo), w.word(hi);
        break;
      }
      default: break;
    }
    w.word(static_cast<int64_t>(n->srcs.size()));
    for (const auto& s : n->srcs) ref(s);
    number(n);
  }
  w.word('T');
  w.word(static_cast<int64_t>(targets.size()));
  for (const auto& t : targets) ref(t);
  return g;
}

namespace {

struct Entry {
  std::string key;
  std::shared_ptr<const Recipe> recipe;
};

struct Cache {
  std::mutex mutex;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> map;  // views into lru keys
  size_t bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // leaked on purpose: realizations may run during static teardown
  return *c;
}

constexpr size_t kMaxBytes = size_t{64} << 20;  // keys + recipes

void evict_to(Cache& c, size_t entries) {
  while (!c.lru.empty() && (c.lru.size() > entries || c.bytes > kMaxBytes)) {
    Entry& e = c.lru.back();
    c.bytes -= e.key.size() + e.recipe->bytes;
    c.map.erase(e.key);
    c.lru.pop_back();
  }
}

}  // namespace

std::shared_ptr<const Recipe> kernel_cache_find(const std::string& key) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.map.find(key);
  if (it == c.map.end()) return nullptr;
  c.lru.splice(c.lru.begin(), c.lru, it->second);  // iterators (and the key view) stay valid
  return it->second->recipe;
}

void kernel_cache_insert(const std::string& key, std::shared_ptr<const Recipe> recipe, const FusionOptions& o) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.map.count(key)) return;  // another thread made the same recipe first
  c.bytes += key.size() + recipe->bytes;
  c.lru.push_front(Entry{key, std::move(recipe)});
  c.map.emplace(std::string_view(c.lru.front().key), c.lru.begin());
  evict_to(c, static_cast<size_t>(std::max(0, o.kernel_cache_entries)));
}

bool kernel_cache_enabled(const FusionOptions& o) { return o.cache_kernels && o.kernel_cache_entries > 0; }

void kernel_cache_clear() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  evict_to(c, 0);
}

size_t kernel_cache_entries() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.lru.size();
}

}  // namespace ravel::detail
