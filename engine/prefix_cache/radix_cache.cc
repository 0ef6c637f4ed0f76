#include "engine/prefix_cache/radix_cache.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <map>
#include <queue>
#include <tuple>

namespace sy::engine {
namespace {

// Orders children by the tokens of their first page. Transparent, so a span
// into the caller's tokens finds a child without building a key vector.
struct PageLess {
  using is_transparent = void;
  bool operator()(std::span<const int32_t> a, std::span<const int32_t> b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
};

}  // namespace

struct RadixCache::Impl {
  // One radix-tree node: the edge from its parent, a run of whole pages.
  struct Node {
    NodeId parent = -1;
    std::vector<int32_t> tokens;  // pages.size() * page_size tokens
    std::vector<int32_t> pages;   // tree-owned KvPool pages for `tokens`
    int checkpoint = -1;          // StatePool slot: state after `end` tokens
    int lock = 0;                 // path locks: locks of this node and its descendants
    uint64_t access = 0;          // LRU tick of the last match/insert through it
    int end = 0;                  // tokens from the root to the end of this edge
    bool live = false;
    std::map<std::vector<int32_t>, NodeId, PageLess> children;  // by first page
  };

  // Eviction order: least recently used first; on a tie (only nodes on one
  // root path can share a tick) the deeper node first, then the lower id.
  using HeapKey = std::tuple<uint64_t, int, NodeId>;
  using MinHeap = std::priority_queue<HeapKey, std::vector<HeapKey>, std::greater<HeapKey>>;

  RadixCacheOptions opt;
  KvPool* kv = nullptr;
  StatePool* state = nullptr;
  std::vector<Node> nodes;  // nodes[kRoot] is the root; dead entries wait in free_ids
  std::vector<NodeId> free_ids;
  uint64_t tick = 0;
  RadixCacheStats st;  // kept incrementally so stats() is O(1)

  Impl(const RadixCacheOptions& o, KvPool* k, StatePool* s) : opt(o), kv(k), state(s) {
    nodes.emplace_back();
    nodes[kRoot].live = true;
  }

  int ps() const { return opt.page_size; }

  std::span<const int32_t> Page(std::span<const int32_t> tokens, size_t page) const {
    return tokens.subspan(page * ps(), ps());
  }
  std::span<const int32_t> FirstPage(const Node& n) const {
    return std::span<const int32_t>(n.tokens).first(ps());
  }

  HeapKey Key(NodeId id) const { return {nodes[id].access, -nodes[id].end, id}; }

  NodeId NewNode() {
    NodeId id;
    if (!free_ids.empty()) {
      id = free_ids.back();
      free_ids.pop_back();
    } else {
      id = static_cast<NodeId>(nodes.size());
      nodes.emplace_back();
    }
    nodes[id].live = true;
    ++st.nodes;
    return id;
  }

  // How many whole pages of `edge` (starting at its first page) equal the
  // pages of `tokens` starting at page `pos`, looking at most at `max` pages.
  int CommonPages(const Node& node, std::span<const int32_t> tokens, int pos, int max) const {
    const int limit = std::min(static_cast<int>(node.pages.size()), max);
    int m = 0;
    std::span<const int32_t> edge(node.tokens);
    while (m < limit) {
      std::span<const int32_t> a = Page(edge, m), b = Page(tokens, pos + m);
      if (!std::equal(a.begin(), a.end(), b.begin())) break;
      ++m;
    }
    return m;
  }

  // Splits node `id` after its first k pages (0 < k < pages). The upper part
  // gets a new id; `id` keeps the deeper part, its end and its checkpoint, so
  // a handle still denotes the node ending where it did. The upper part
  // inherits the lock count (every lock below `id` passes through it).
  NodeId Split(NodeId id, int k) {
    assert(k > 0 && k < static_cast<int>(nodes[id].pages.size()));
    const NodeId up = NewNode();
    Node& n = nodes[id];
    Node& u = nodes[up];
    const auto cut = static_cast<std::ptrdiff_t>(k) * ps();
    u.parent = n.parent;
    u.tokens.assign(n.tokens.begin(), n.tokens.begin() + cut);
    u.pages.assign(n.pages.begin(), n.pages.begin() + k);
    u.lock = n.lock;
    u.access = n.access;
    u.end = n.end - static_cast<int>(n.tokens.size() - cut);
    n.tokens.erase(n.tokens.begin(), n.tokens.begin() + cut);
    n.pages.erase(n.pages.begin(), n.pages.begin() + k);
    n.parent = up;
    nodes[u.parent].children.find(FirstPage(u))->second = up;
    u.children.emplace(std::vector<int32_t>(FirstPage(n).begin(), FirstPage(n).end()), id);
    return up;
  }

  NodeId AddLeaf(NodeId parent, std::span<const int32_t> tokens, std::span<const int32_t> pages) {
    const NodeId id = NewNode();
    Node& n = nodes[id];
    n.parent = parent;
    n.tokens.assign(tokens.begin(), tokens.end());
    n.pages.assign(pages.begin(), pages.end());
    n.end = nodes[parent].end + static_cast<int>(tokens.size());
    n.access = tick;
    nodes[parent].children.emplace(std::vector<int32_t>(FirstPage(n).begin(), FirstPage(n).end()),
                                   id);
    st.cached_pages += static_cast<int>(pages.size());
    st.evictable_pages += static_cast<int>(pages.size());
    return id;
  }

  void AttachCheckpoint(NodeId id, int slot) {
    Node& n = nodes[id];
    if (n.checkpoint == slot) return;
    if (id == kRoot || n.checkpoint >= 0) {
      state->Free(slot);  // the root holds no state; a duplicate goes back
      return;
    }
    n.checkpoint = slot;
    ++st.checkpoint_slots;
    if (n.lock == 0) ++st.evictable_slots;
  }

  // Frees the checkpoint of an unlocked node to the StatePool.
  void DropCheckpoint(NodeId id) {
    Node& n = nodes[id];
    assert(n.checkpoint >= 0 && n.lock == 0);
    state->Free(n.checkpoint);
    n.checkpoint = -1;
    --st.checkpoint_slots;
    --st.evictable_slots;
    ++st.evicted_slots;
  }

  // Evicts an unlocked leaf: its pages and checkpoint go back to the pools.
  // Returns the pages freed.
  int RemoveLeaf(NodeId id) {
    Node& n = nodes[id];
    assert(id != kRoot && n.live && n.children.empty() && n.lock == 0);
    if (n.checkpoint >= 0) DropCheckpoint(id);
    const int freed = static_cast<int>(n.pages.size());
    kv->Free(n.pages);
    st.cached_pages -= freed;
    st.evictable_pages -= freed;
    st.evicted_pages += freed;
    nodes[n.parent].children.erase(nodes[n.parent].children.find(FirstPage(n)));
    n = Node{};
    free_ids.push_back(id);
    --st.nodes;
    return freed;
  }

  void Touch(NodeId id) {
    for (; id != kRoot; id = nodes[id].parent) nodes[id].access = tick;
  }

  std::vector<int32_t> PathPages(NodeId id) const {
    std::vector<NodeId> path;
    for (; id != kRoot; id = nodes[id].parent) path.push_back(id);
    std::vector<int32_t> pages;
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      pages.insert(pages.end(), nodes[*it].pages.begin(), nodes[*it].pages.end());
    }
    return pages;
  }
};

RadixCache::RadixCache(const RadixCacheOptions& options, KvPool* kv, StatePool* state)
    : options_(options), impl_(std::make_unique<Impl>(options, kv, state)) {
  assert(options.page_size >= 1 && kv != nullptr && kv->page_size() == options.page_size);
  assert(!options.needs_state || state != nullptr);
}

RadixCache::~RadixCache() { Clear(); }

RadixCache::Match RadixCache::MatchPrefix(std::span<const int32_t> tokens, int limit) {
  Impl& t = *impl_;
  assert(limit <= static_cast<int>(tokens.size()));
  const int max_pages = std::max(limit, 0) / t.ps();
  NodeId cur = kRoot;
  int pos = 0;  // pages matched
  while (pos < max_pages) {
    auto it = t.nodes[cur].children.find(t.Page(tokens, pos));
    if (it == t.nodes[cur].children.end()) break;
    NodeId child = it->second;
    const int m = t.CommonPages(t.nodes[child], tokens, pos, max_pages - pos);
    if (m < static_cast<int>(t.nodes[child].pages.size())) {
      // The match ends inside this edge. Without state, split so the handle
      // ends exactly there; with state nothing inside an edge can serve (a
      // checkpoint sits only at a node's end), so stop above it.
      if (!options_.needs_state) cur = t.Split(child, m);
      break;
    }
    cur = child;
    pos += m;
  }
  if (options_.needs_state) {
    while (cur != kRoot && t.nodes[cur].checkpoint < 0) cur = t.nodes[cur].parent;
  }
  if (cur == kRoot) return Match{};
  ++t.tick;
  t.Touch(cur);
  Match m;
  m.tokens = t.nodes[cur].end;
  m.pages = t.PathPages(cur);
  m.checkpoint_slot = t.nodes[cur].checkpoint;
  m.node = cur;
  return m;
}

int RadixCache::CachedPrefix(std::span<const int32_t> tokens, int limit) const {
  const Impl& t = *impl_;
  assert(limit <= static_cast<int>(tokens.size()));
  const int max_pages = std::max(limit, 0) / t.ps();
  NodeId cur = kRoot;
  int pos = 0;
  while (pos < max_pages) {
    auto it = t.nodes[cur].children.find(t.Page(tokens, pos));
    if (it == t.nodes[cur].children.end()) break;
    const NodeId child = it->second;
    const int m = t.CommonPages(t.nodes[child], tokens, pos, max_pages - pos);
    if (m < static_cast<int>(t.nodes[child].pages.size())) {
      // Where MatchPrefix would split, the hit ends inside the edge; with
      // state it stops above the edge (see there).
      if (!options_.needs_state) return (pos + m) * t.ps();
      break;
    }
    cur = child;
    pos += m;
  }
  if (options_.needs_state) {
    while (cur != kRoot && t.nodes[cur].checkpoint < 0) cur = t.nodes[cur].parent;
  }
  return cur == kRoot ? 0 : t.nodes[cur].end;
}

RadixCache::Inserted RadixCache::Insert(std::span<const int32_t> tokens,
                                        std::span<const int32_t> pages, int checkpoint_slot) {
  Impl& t = *impl_;
  const int n = static_cast<int>(pages.size());
  assert(tokens.size() >= pages.size() * static_cast<size_t>(t.ps()));
  assert(checkpoint_slot < 0 || t.state != nullptr);
  ++t.tick;
  Inserted ins;
  NodeId cur = kRoot;
  int pos = 0;
  std::vector<int32_t> duplicates;
  while (pos < n) {
    auto it = t.nodes[cur].children.find(t.Page(tokens, pos));
    if (it == t.nodes[cur].children.end()) {
      cur = t.AddLeaf(cur, tokens.subspan(pos * t.ps(), (n - pos) * t.ps()), pages.subspan(pos));
      ins.new_pages = n - pos;
      break;
    }
    NodeId child = it->second;
    const Impl::Node& c = t.nodes[child];
    const int m = t.CommonPages(c, tokens, pos, n - pos);
    // The caller may hand back the tree's own pages (a page table rewritten
    // from an earlier Inserted::pages); only real duplicates are freed.
    for (int i = 0; i < m; ++i) {
      if (pages[pos + i] != c.pages[i]) duplicates.push_back(pages[pos + i]);
    }
    if (m < static_cast<int>(c.pages.size())) child = t.Split(child, m);
    t.nodes[child].access = t.tick;
    cur = child;
    pos += m;
  }
  if (!duplicates.empty()) t.kv->Free(duplicates);
  if (checkpoint_slot >= 0) t.AttachCheckpoint(cur, checkpoint_slot);
  ins.node = cur;
  ins.pages = t.PathPages(cur);
  return ins;
}

void RadixCache::Lock(NodeId node) {
  Impl& t = *impl_;
  assert(node >= 0 && node < static_cast<NodeId>(t.nodes.size()) && t.nodes[node].live);
  for (; node != kRoot; node = t.nodes[node].parent) {
    Impl::Node& n = t.nodes[node];
    if (n.lock++ == 0) {
      t.st.evictable_pages -= static_cast<int>(n.pages.size());
      if (n.checkpoint >= 0) --t.st.evictable_slots;
    }
  }
}

void RadixCache::Unlock(NodeId node) {
  Impl& t = *impl_;
  assert(node >= 0 && node < static_cast<NodeId>(t.nodes.size()) && t.nodes[node].live);
  for (; node != kRoot; node = t.nodes[node].parent) {
    Impl::Node& n = t.nodes[node];
    assert(n.lock > 0 && "Unlock without a matching Lock");
    if (--n.lock == 0) {
      t.st.evictable_pages += static_cast<int>(n.pages.size());
      if (n.checkpoint >= 0) ++t.st.evictable_slots;
    }
  }
}

int RadixCache::EvictPages(int free_pages) {
  Impl& t = *impl_;
  if (t.kv->free_pages() >= free_pages) return 0;
  Impl::MinHeap heap;
  for (NodeId id = 1; id < static_cast<NodeId>(t.nodes.size()); ++id) {
    const Impl::Node& n = t.nodes[id];
    if (n.live && n.children.empty() && n.lock == 0) heap.push(t.Key(id));
  }
  int freed = 0;
  // Nothing else changes ticks or locks meanwhile, so the keys stay valid; a
  // parent joins the heap once its last child is gone.
  while (t.kv->free_pages() < free_pages && !heap.empty()) {
    const NodeId id = std::get<2>(heap.top());
    heap.pop();
    const NodeId parent = t.nodes[id].parent;
    freed += t.RemoveLeaf(id);
    const Impl::Node& p = t.nodes[parent];
    if (parent != kRoot && p.children.empty() && p.lock == 0) heap.push(t.Key(parent));
  }
  return freed;
}

int RadixCache::EvictSlots(int free_slots) {
  Impl& t = *impl_;
  if (t.state == nullptr || t.state->free_slots() >= free_slots) return 0;
  Impl::MinHeap heap;
  for (NodeId id = 1; id < static_cast<NodeId>(t.nodes.size()); ++id) {
    const Impl::Node& n = t.nodes[id];
    if (n.live && n.checkpoint >= 0 && n.lock == 0) heap.push(t.Key(id));
  }
  int freed = 0;
  while (t.state->free_slots() < free_slots && !heap.empty()) {
    NodeId id = std::get<2>(heap.top());
    heap.pop();
    t.DropCheckpoint(id);
    ++freed;
    if (!options_.needs_state) continue;
    // A leaf without a checkpoint can serve no hit: its pages go too, and so
    // do ancestors left the same way. Only checkpoint-less nodes are removed,
    // so no entry still in the heap dies here.
    while (id != kRoot && t.nodes[id].children.empty() && t.nodes[id].checkpoint < 0 &&
           t.nodes[id].lock == 0) {
      const NodeId parent = t.nodes[id].parent;
      t.RemoveLeaf(id);
      id = parent;
    }
  }
  return freed;
}

void RadixCache::Clear() {
  Impl& t = *impl_;
  std::vector<int32_t> pages;
  for (NodeId id = 1; id < static_cast<NodeId>(t.nodes.size()); ++id) {
    const Impl::Node& n = t.nodes[id];
    if (!n.live) continue;
    assert(n.lock == 0 && "Clear or destruction with a locked node");
    pages.insert(pages.end(), n.pages.begin(), n.pages.end());
    if (n.checkpoint >= 0) t.state->Free(n.checkpoint);
  }
  if (!pages.empty()) t.kv->Free(pages);
  t.nodes.resize(1);
  t.nodes[kRoot].children.clear();
  t.free_ids.clear();
  t.st.nodes = 0;
  t.st.cached_pages = 0;
  t.st.checkpoint_slots = 0;
  t.st.evictable_pages = 0;
  t.st.evictable_slots = 0;
}

RadixCacheStats RadixCache::stats() const {
  RadixCacheStats s = impl_->st;
  s.cached_tokens = static_cast<int64_t>(s.cached_pages) * options_.page_size;
  return s;
}

}  // namespace sy::engine
