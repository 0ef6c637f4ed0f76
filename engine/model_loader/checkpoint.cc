#include "engine/model_loader/checkpoint.h"

#include <fcntl.h>   // AT_FDCWD
#include <stdio.h>   // renameat2, RENAME_NOREPLACE
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "engine/model_loader/hf_config.h"

namespace sy::engine {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr uint64_t kMtpSeed = 0x6d7470;  // "mtp": the random MTP layers' generator seed

// How a checkpoint tensor (HF layout) lands in one of our vectors.
enum class Map {
  kCopy,       // same element order; `offset` is an element offset into the vector
  kTranspose,  // HF [out, in] -> our rows [in] x columns [offset, offset + out) of `ld` columns
};

// One checkpoint tensor bound to its place in a ModelWeights (const when writing).
template <typename W>
struct Binding {
  using Vec = std::conditional_t<std::is_const_v<W>, const std::vector<float>, std::vector<float>>;
  std::string name;
  std::vector<int64_t> shape;  // HF shape
  Map map = Map::kCopy;
  Vec* vec = nullptr;
  size_t vec_size = 0;  // our vector's full size (several tensors may share one vector)
  size_t offset = 0;
  size_t ld = 0;
  size_t elements() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
};

template <typename W>
class Planner {
 public:
  using B = Binding<W>;
  using Vec = typename B::Vec;
  explicit Planner(std::vector<B>* out) : out_(out) {}

  void Copy(std::string name, std::vector<int64_t> shape, Vec& v, size_t vec_size,
            size_t offset = 0) {
    out_->push_back(B{std::move(name), std::move(shape), Map::kCopy, &v, vec_size, offset, 0});
  }
  // HF [out, in] into columns [col, col + out) of our [in x ld] matrix.
  void Transpose(std::string name, int64_t out, int64_t in, Vec& v, size_t ld, size_t col = 0) {
    out_->push_back(
        B{std::move(name), {out, in}, Map::kTranspose, &v, static_cast<size_t>(in) * ld, col, ld});
  }
  template <typename S>
  void Swiglu(const std::string& p, int64_t h, int64_t inter, S& s) {
    const size_t ld = static_cast<size_t>(2 * inter);
    Transpose(p + "gate_proj.weight", inter, h, s.gate_up, ld, 0);
    Transpose(p + "up_proj.weight", inter, h, s.gate_up, ld, static_cast<size_t>(inter));
    Transpose(p + "down_proj.weight", h, inter, s.down, static_cast<size_t>(h));
  }

 private:
  std::vector<B>* out_;
};

// The bindings of one decoder layer's tensors. `l` names the layer; the kinds
// are passed so MTP layers (past config.layers) can reuse the naming.
template <typename W, typename L>
void PlanLayer(const ModelConfig& c, int l, AttentionKind kind, bool moe, L& lw,
               const std::vector<bool>* want_expert, Planner<W>& p) {
  const int64_t h = c.hidden, heads = c.heads;
  const std::string pre = "model.layers." + std::to_string(l) + ".";
  const std::string at = pre + "attention.";
  p.Copy(pre + "input_layernorm.weight", {h}, lw.attn_norm, h);
  p.Copy(pre + "post_attention_layernorm.weight", {h}, lw.ffn_norm, h);
  switch (kind) {
    case AttentionKind::kMha: {
      const int64_t q = heads * c.head_dim, kv = static_cast<int64_t>(c.kv_heads) * c.head_dim;
      const size_t ld = static_cast<size_t>(q + 2 * kv);
      p.Transpose(at + "q_proj.weight", q, h, lw.wqkv, ld, 0);
      p.Transpose(at + "k_proj.weight", kv, h, lw.wqkv, ld, q);
      p.Transpose(at + "v_proj.weight", kv, h, lw.wqkv, ld, q + kv);
      p.Transpose(at + "o_proj.weight", h, q, lw.wo, h);
      break;
    }
    case AttentionKind::kMla: {
      auto& m = lw.mla;
      const int64_t qk = heads * c.mla_qk_head_dim(), ql = c.q_lora_rank;
      const int64_t r = c.kv_lora_rank, rope = c.qk_rope_head_dim;
      const int64_t kvb = heads * (c.qk_nope_head_dim + c.v_head_dim);
      if (ql > 0) {
        p.Transpose(at + "q_a_proj.weight", ql, h, m.q_a, ql);
        p.Copy(at + "q_a_layernorm.weight", {ql}, m.q_a_norm, ql);
        p.Transpose(at + "q_b_proj.weight", qk, ql, m.q_b, qk);
      } else {
        p.Transpose(at + "q_proj.weight", qk, h, m.q_b, qk);
      }
      p.Transpose(at + "kv_a_proj_with_mqa.weight", r + rope, h, m.kv_a, r + rope);
      p.Copy(at + "kv_a_layernorm.weight", {r}, m.kv_a_norm, r);
      p.Transpose(at + "kv_b_proj.weight", kvb, r, m.kv_b, kvb);
      // MLA's g_proj is the head-wise gate [heads, H] (KDA's is [D, H]).
      if (c.mla_gate) p.Transpose(at + "g_proj.weight", heads, h, m.gate, heads);
      p.Transpose(at + "dense.weight", h, heads * c.v_head_dim, m.o, h);
      break;
    }
    case AttentionKind::kKda:
    case AttentionKind::kGla: {
      auto& a = lw.linear;
      const int64_t d = c.linear_head_dim, dd = heads * d, k = c.conv_kernel;
      p.Transpose(at + "q_proj.weight", dd, h, a.q, dd);
      p.Transpose(at + "k_proj.weight", dd, h, a.k, dd);
      p.Transpose(at + "v_proj.weight", dd, h, a.v, dd);
      if (kind == AttentionKind::kKda) {
        // [D, 1, K] each; ours is one [3D x K] block: q channels, then k, then v.
        const size_t conv = static_cast<size_t>(3 * dd * k);
        p.Copy(at + "q_conv1d.weight", {dd, 1, k}, a.conv, conv, 0);
        p.Copy(at + "k_conv1d.weight", {dd, 1, k}, a.conv, conv, dd * k);
        p.Copy(at + "v_conv1d.weight", {dd, 1, k}, a.conv, conv, 2 * dd * k);
        p.Transpose(at + "b_proj.weight", heads, h, a.b, heads);
      }
      p.Transpose(at + "f_proj.weight", dd, h, a.f, dd);
      p.Copy(at + "A_log", {heads}, a.a_log, heads);
      p.Copy(at + "dt_bias", {dd}, a.dt_bias, dd);
      p.Transpose(at + "g_proj.weight", dd, h, a.g, dd);  // element-wise output gate
      p.Copy(at + "o_norm.weight", {d}, a.o_norm, d);
      p.Transpose(at + "o_proj.weight", h, dd, a.o, h);
      break;
    }
  }
  if (!moe) {
    p.Swiglu(pre + "mlp.", h, c.dense_inter, lw.dense);
    return;
  }
  const int64_t e = c.experts;
  p.Transpose(pre + "mlp.gate.weight", e, h, lw.router, e);
  if (c.router == RouterKind::kSigmoidGrouped) {
    p.Copy(pre + "mlp.gate.expert_bias", {e}, lw.expert_bias, e);
  }
  for (int x = 0; x < c.experts; ++x) {
    if (want_expert != nullptr && !(*want_expert)[x]) continue;
    p.Swiglu(pre + "mlp.experts." + std::to_string(x) + ".", h, c.expert_inter, lw.experts[x]);
  }
  if (c.shared_inter > 0) p.Swiglu(pre + "mlp.shared_experts.", h, c.shared_inter, lw.shared);
}

// Every checkpoint tensor of the main model, bound into `w`.
// REQUIRES: w.layers.size() == c.layers and, for MoE layers, experts.size() == c.experts.
template <typename W>
std::vector<Binding<W>> Plan(const ModelConfig& c, W& w, const std::vector<bool>* want_expert) {
  std::vector<Binding<W>> out;
  Planner<W> p(&out);
  const int64_t h = c.hidden, v = c.vocab;
  p.Copy("model.word_embeddings.weight", {v, h}, w.embed, v * h);
  for (int l = 0; l < c.layers; ++l) {
    PlanLayer(c, l, c.attention(l), c.is_moe(l), w.layers[l], want_expert, p);
  }
  p.Copy("model.norm.weight", {h}, w.final_norm, h);
  p.Transpose("lm_head.weight", v, h, w.lm_head, v);
  return out;
}

// The layers' vectors exist (empty) so a plan can point at them.
ModelWeights Skeleton(const ModelConfig& c) {
  ModelWeights w;
  w.layers.resize(c.layers);
  for (int l = 0; l < c.layers; ++l) {
    if (c.is_moe(l)) w.layers[l].experts.resize(c.experts);
  }
  return w;
}

// MTP layers' tensors (names and shapes; written with random values).
std::vector<Binding<LayerWeights>> PlanMtp(const ModelConfig& c, LayerWeights& scratch) {
  std::vector<Binding<LayerWeights>> out;
  Planner<LayerWeights> p(&out);
  scratch.experts.resize(c.experts);
  const int64_t h = c.hidden;
  const AttentionKind kind = c.hybrid() ? AttentionKind::kMla : AttentionKind::kMha;
  for (int m = 0; m < c.mtp_layers; ++m) {
    const int l = c.layers + m;
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    p.Transpose(pre + "eh_proj.weight", h, 2 * h, scratch.wo, h);
    for (const char* norm : {"enorm.weight", "hnorm.weight", "final_layernorm.weight"}) {
      p.Copy(pre + norm, {h}, scratch.attn_norm, h);
    }
    PlanLayer<LayerWeights>(c, l, kind, true, scratch, nullptr, p);
  }
  return out;
}

// "model.layers.{i}.<suffix>" with i an MTP layer and suffix on the skip list (seed 001 §3.6).
bool IsMtpKey(const ModelConfig& c, const std::string& key) {
  const std::string pre = "model.layers.";
  if (key.compare(0, pre.size(), pre) != 0) return false;
  size_t pos = pre.size();
  int layer = 0;
  bool digits = false;
  while (pos < key.size() && key[pos] >= '0' && key[pos] <= '9' && layer < 1000000) {
    layer = layer * 10 + (key[pos++] - '0');
    digits = true;
  }
  if (!digits || pos >= key.size() || key[pos] != '.') return false;
  if (layer < c.layers || layer >= c.layers + c.mtp_layers) return false;
  const std::string suffix = key.substr(pos + 1);
  for (const char* skip : {"eh_proj.", "enorm.", "hnorm.", "final_layernorm.", "input_layernorm.",
                           "post_attention_layernorm.", "attention.", "mlp."}) {
    if (suffix.compare(0, std::strlen(skip), skip) == 0) return true;
  }
  return false;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "a, b, c and 12 more": error messages list names without growing unbounded.
std::string ListNames(const std::vector<std::string>& names, size_t max = 12) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += " and " + std::to_string(names.size() - max) + " more";
  return s;
}

// Our [in x ld] columns [col, col + out) <-> HF [out, in], in cache-sized
// blocks. kIn: HF -> ours (loading); otherwise ours -> HF (writing).
template <bool kIn, typename Hf, typename Ours>
void Transpose(Hf* hf, int64_t out, int64_t in, Ours* ours, size_t ld, size_t col) {
  constexpr int64_t kB = 32;
  for (int64_t o0 = 0; o0 < out; o0 += kB) {
    for (int64_t i0 = 0; i0 < in; i0 += kB) {
      for (int64_t o = o0; o < std::min(out, o0 + kB); ++o) {
        for (int64_t i = i0; i < std::min(in, i0 + kB); ++i) {
          if constexpr (kIn) {
            ours[static_cast<size_t>(i) * ld + col + o] = hf[o * in + i];
          } else {
            hf[o * in + i] = ours[static_cast<size_t>(i) * ld + col + o];
          }
        }
      }
    }
  }
}

// The safetensors files of `dir`: those the index names, else every *.safetensors.
Result<std::vector<std::string>> ShardFiles(const std::string& dir, json* weight_map) {
  const fs::path index = fs::path(dir) / kIndexFile;
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    std::stringstream ss;
    ss << in.rdbuf();
    const json j = json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      return DataLoss(index.string() + ": not a JSON object with a 'weight_map' object");
    }
    std::set<std::string> names;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it->is_string())
        return DataLoss(index.string() + ": weight_map['" + it.key() + "'] is not a string");
      const std::string f = it->get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
        return DataLoss(index.string() + ": weight_map['" + it.key() + "'] = '" + f +
                        "' is not a file name in the checkpoint directory");
      }
      names.insert(f);
    }
    *weight_map = j["weight_map"];
    for (const std::string& f : names) files.push_back((fs::path(dir) / f).string());
    return files;
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  }
  if (ec) return Unavailable("cannot list " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) return NotFound("checkpoint " + dir + " has no *.safetensors files");
  return files;
}

// Removes a directory tree unless released: the temporary checkpoint on failure.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return NotFound("checkpoint directory " + dir + " does not exist");
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->dir_ = dir;
  ASSIGN_OR_RETURN(ck->config_, LoadHfConfig((fs::path(dir) / "config.json").string()));
  const ModelConfig& c = ck->config_;

  json weight_map;
  ASSIGN_OR_RETURN(std::vector<std::string> paths, ShardFiles(dir, &weight_map));
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(path));
    for (const auto& [name, view] : f->tensors()) {
      auto [it, inserted] = ck->index_.emplace(name, &view);
      if (!inserted) {
        return DataLoss("checkpoint " + dir + ": tensor '" + name + "' is in both " +
                        fs::path(path).filename().string() + " and another shard");
      }
    }
    ck->files_.push_back(std::move(f));
  }
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const fs::path want = fs::path(dir) / it->get<std::string>();
    auto found = ck->index_.find(it.key());
    bool in_file = false;
    if (found != ck->index_.end()) {
      for (const auto& f : ck->files_) in_file |= f->path() == want.string() && f->Find(it.key());
    }
    if (!in_file) {
      return DataLoss("checkpoint " + dir + ": " + kIndexFile + " puts tensor '" + it.key() +
                      "' in " + it->get<std::string>() + ", which does not hold it");
    }
  }

  ModelWeights skeleton = Skeleton(c);
  const std::vector<Binding<ModelWeights>> plan = Plan(c, skeleton, nullptr);
  std::map<std::string, const Binding<ModelWeights>*> expected;
  for (const auto& b : plan) expected.emplace(b.name, &b);

  std::vector<std::string> unmapped, missing, mismatched;
  for (const auto& [name, view] : ck->index_) {
    if (expected.count(name)) continue;
    (IsMtpKey(c, name) ? ck->skipped_ : unmapped).push_back(name);
  }
  if (!unmapped.empty()) {
    return FailedPrecondition("checkpoint " + dir + " has " + std::to_string(unmapped.size()) +
                              " tensor(s) that map to nothing in a " + c.arch +
                              " model and are not MTP layers: " + ListNames(unmapped));
  }
  for (const auto& b : plan) {
    auto it = ck->index_.find(b.name);
    if (it == ck->index_.end()) {
      missing.push_back(b.name);
    } else if (it->second->shape != b.shape) {
      std::string file;
      for (const auto& f : ck->files_) {
        if (f->Find(b.name) == it->second) file = f->path();
      }
      mismatched.push_back("file " + file + " tensor '" + b.name + "': expected shape " +
                           ShapeString(b.shape) + ", found " + ShapeString(it->second->shape));
    }
  }
  if (!missing.empty()) {
    return NotFound("checkpoint " + dir + " lacks " + std::to_string(missing.size()) +
                    " tensor(s) the config needs: " + ListNames(missing));
  }
  if (!mismatched.empty()) {
    return InvalidArgument("checkpoint " + dir + " has " + std::to_string(mismatched.size()) +
                           " tensor(s) of the wrong shape: " + ListNames(mismatched, 4));
  }
  return ck;
}

Result<ModelWeights> Checkpoint::Load(const std::vector<int>& local_experts) const {
  const ModelConfig& c = config_;
  std::vector<bool> want(c.experts, false);
  for (int e : local_experts) {
    if (e < 0 || e >= c.experts) {
      return InvalidArgument("expert id " + std::to_string(e) + " is outside [0, " +
                             std::to_string(c.experts) + ")");
    }
    want[e] = true;
  }
  ModelWeights w = Skeleton(c);
  for (int l = 0; l < c.layers; ++l) {
    LayerWeights& lw = w.layers[l];
    auto present = [&](SwigluWeights& s, int inter) {
      s.in = c.hidden;
      s.inter = inter;
    };
    if (!c.is_moe(l)) {
      present(lw.dense, c.dense_inter);
      continue;
    }
    for (int e = 0; e < c.experts; ++e) {
      if (want[e]) present(lw.experts[e], c.expert_inter);
    }
    if (c.shared_inter > 0) present(lw.shared, c.shared_inter);
  }
  std::vector<float> buf;
  for (const auto& b : Plan(c, w, &want)) {
    const TensorView& t = *index_.at(b.name);  // Open checked presence and shape
    if (b.vec->size() != b.vec_size) b.vec->assign(b.vec_size, 0.0f);
    if (b.map == Map::kCopy) {
      ToFloat(t, b.vec->data() + b.offset);
      continue;
    }
    buf.resize(b.elements());
    ToFloat(t, buf.data());
    Transpose<true>(buf.data(), b.shape[0], b.shape[1], b.vec->data(), b.ld, b.offset);
  }
  return w;
}

Status WriteCheckpoint(const ModelConfig& config, const ModelWeights& weights,
                       const std::string& dir, DType dtype, int64_t shard_bytes) {
  const ModelConfig& c = config;
  RETURN_IF_ERROR(c.Validate());
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return InvalidArgument(std::string("checkpoint dtype must be F32 or BF16, got ") +
                           DTypeName(dtype));
  }
  if (shard_bytes < 1) return InvalidArgument("shard_bytes must be >= 1");
  if (weights.layers.size() != static_cast<size_t>(c.layers)) {
    return InvalidArgument("weights have " + std::to_string(weights.layers.size()) +
                           " layers, the config " + std::to_string(c.layers));
  }
  for (int l = 0; l < c.layers; ++l) {
    if (c.is_moe(l) && weights.layers[l].experts.size() != static_cast<size_t>(c.experts)) {
      return InvalidArgument("weights layer " + std::to_string(l) + " has " +
                             std::to_string(weights.layers[l].experts.size()) +
                             " experts, the config " + std::to_string(c.experts));
    }
  }
  const std::vector<Binding<const ModelWeights>> plan = Plan(c, weights, nullptr);
  for (const auto& b : plan) {
    if (b.vec->size() != b.vec_size) {
      return InvalidArgument("weights for checkpoint tensor '" + b.name + "' hold " +
                             std::to_string(b.vec->size()) + " floats, the config needs " +
                             std::to_string(b.vec_size) + " (every expert must be present)");
    }
  }
  LayerWeights mtp_scratch;
  const std::vector<Binding<LayerWeights>> mtp = PlanMtp(c, mtp_scratch);

  std::error_code ec;
  if (fs::exists(dir, ec))
    return FailedPrecondition("checkpoint target " + dir + " already exists");
  const fs::path target = fs::absolute(dir, ec);
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    return Unavailable("cannot create " + target.parent_path().string() + ": " + ec.message());
  std::string templ = target.string() + ".tmp.XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    return Unavailable("cannot create a temporary directory beside " + dir + ": " +
                       std::strerror(errno));
  }
  TempDir tmp(templ);

  // One write item per tensor: its name, shape and how to produce HF-layout floats.
  struct Item {
    std::string name;
    std::vector<int64_t> shape;
    size_t elements;
    const Binding<const ModelWeights>* main;  // null: an MTP tensor
  };
  std::vector<Item> items;
  for (const auto& b : plan) items.push_back({b.name, b.shape, b.elements(), &b});
  for (const auto& b : mtp) items.push_back({b.name, b.shape, b.elements(), nullptr});

  // Greedy shards of at most shard_bytes (a larger tensor gets one to itself).
  const size_t esize = DTypeSize(dtype);
  std::vector<std::vector<const Item*>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const Item& it : items) {
    const uint64_t bytes = it.elements * esize;
    if (!shards.back().empty() && in_shard + bytes > static_cast<uint64_t>(shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&it);
    in_shard += bytes;
    total += bytes;
  }
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char fname[64];
    std::snprintf(fname, sizeof fname, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<std::vector<float>> data(shards[s].size());
    std::vector<TensorToWrite> tensors;
    for (size_t i = 0; i < shards[s].size(); ++i) {
      const Item& it = *shards[s][i];
      std::vector<float>& d = data[i];
      d.resize(it.elements);
      if (it.main == nullptr) {
        // Norm gains near 1, projections small: plausible values, never run.
        const bool norm = it.shape.size() == 1;
        FillTensor(kMtpSeed, it.name, norm ? 0.1f : 0.02f, norm ? 1.0f : 0.0f, d.data(), d.size());
      } else if (it.main->map == Map::kCopy) {
        std::copy_n(it.main->vec->data() + it.main->offset, it.elements, d.data());
      } else {
        Transpose<false>(d.data(), it.shape[0], it.shape[1], it.main->vec->data(), it.main->ld,
                         it.main->offset);
      }
      tensors.push_back({it.name, it.shape, d.data()});
      weight_map[it.name] = fname;
    }
    RETURN_IF_ERROR(WriteSafetensors((fs::path(tmp.path()) / fname).string(), tensors, dtype,
                                     {{"format", "pt"}}));
  }
  json cfg = ToHfConfig(c);
  cfg["torch_dtype"] = dtype == DType::kF32 ? "float32" : "bfloat16";
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  for (const auto& [name, j] : {std::pair<const char*, const json*>{"config.json", &cfg},
                                std::pair<const char*, const json*>{kIndexFile, &index}}) {
    const std::string path = (fs::path(tmp.path()) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << j->dump(2) << "\n";
    out.close();
    if (!out) return Unavailable("writing " + path + ": " + std::strerror(errno));
  }
  // RENAME_NOREPLACE: a directory created meanwhile is never replaced.
  if (::renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
    const int err = errno;
    if (err == EEXIST) return FailedPrecondition("checkpoint target " + dir + " already exists");
    return Unavailable("renaming " + tmp.path() + " to " + dir + ": " + std::strerror(err));
  }
  tmp.Release();
  return Status::Ok();
}

}  // namespace sy::engine
