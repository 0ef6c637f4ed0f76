// File: tests/engine/model_loader/test_util.h
//
// Helpers shared by the model_loader tests: a self-removing temporary
// directory, whole-file read/write, field-by-field ModelConfig and
// bit-for-bit ModelWeights equality, and a small hybrid config.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/model_loader/checkpoint.h"

namespace sy::engine::testing {

class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "sy_loader_XXXXXX").string();
    path_ = ::mkdtemp(templ.data()) ? templ : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Every field of ModelConfig (config.h); a new field must be added here too.
inline void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
#define SY_EXPECT_FIELD(f) EXPECT_EQ(a.f, b.f) << "field " #f " of " << a.name
  SY_EXPECT_FIELD(name);
  SY_EXPECT_FIELD(arch);
  SY_EXPECT_FIELD(vocab);
  SY_EXPECT_FIELD(hidden);
  SY_EXPECT_FIELD(layers);
  SY_EXPECT_FIELD(heads);
  SY_EXPECT_FIELD(kv_heads);
  SY_EXPECT_FIELD(head_dim);
  SY_EXPECT_FIELD(max_seq);
  SY_EXPECT_FIELD(rope_theta);
  SY_EXPECT_FIELD(rms_eps);
  SY_EXPECT_FIELD(eos_token);
  SY_EXPECT_FIELD(layer_group_size);
  SY_EXPECT_FIELD(linear_kind);
  SY_EXPECT_FIELD(mtp_layers);
  SY_EXPECT_FIELD(q_lora_rank);
  SY_EXPECT_FIELD(kv_lora_rank);
  SY_EXPECT_FIELD(qk_nope_head_dim);
  SY_EXPECT_FIELD(qk_rope_head_dim);
  SY_EXPECT_FIELD(v_head_dim);
  SY_EXPECT_FIELD(mla_gate);
  SY_EXPECT_FIELD(rope_interleave);
  SY_EXPECT_FIELD(linear_head_dim);
  SY_EXPECT_FIELD(conv_kernel);
  SY_EXPECT_FIELD(kda_has_lower_bound);
  SY_EXPECT_FIELD(kda_lower_bound);
  SY_EXPECT_FIELD(first_k_dense_replace);
  SY_EXPECT_FIELD(dense_inter);
  SY_EXPECT_FIELD(experts);
  SY_EXPECT_FIELD(top_k);
  SY_EXPECT_FIELD(expert_inter);
  SY_EXPECT_FIELD(shared_inter);
  SY_EXPECT_FIELD(router);
  SY_EXPECT_FIELD(n_group);
  SY_EXPECT_FIELD(topk_group);
  SY_EXPECT_FIELD(routed_scaling_factor);
  SY_EXPECT_FIELD(norm_topk_prob);
#undef SY_EXPECT_FIELD
}

inline constexpr uint64_t kSeed = 7;

inline std::vector<int> AllExperts(const ModelConfig& c) {
  std::vector<int> e(c.experts);
  std::iota(e.begin(), e.end(), 0);
  return e;
}

// tiny-hybrid's structure at a fraction of its size, for the error tests.
inline ModelConfig MiniHybrid() {
  ModelConfig c = PresetConfig("tiny-hybrid").value();
  c.hidden = 32;
  c.heads = 2;
  c.q_lora_rank = 16;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 8;
  c.linear_head_dim = 8;
  c.dense_inter = 32;
  c.experts = 8;
  c.expert_inter = 16;
  c.shared_inter = 16;
  c.layers = 4;
  return c;
}

inline void ExpectSameVec(const std::vector<float>& a, const std::vector<float>& b,
                          const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

inline void ExpectSameSwiglu(const SwigluWeights& a, const SwigluWeights& b,
                             const std::string& what) {
  EXPECT_EQ(a.in, b.in) << what;
  EXPECT_EQ(a.inter, b.inter) << what;
  ExpectSameVec(a.gate_up, b.gate_up, what + ".gate_up");
  ExpectSameVec(a.down, b.down, what + ".down");
}

// Bit-identical, member by member (weights.h).
inline void ExpectSameWeights(const ModelWeights& a, const ModelWeights& b) {
  ExpectSameVec(a.embed, b.embed, "embed");
  ExpectSameVec(a.final_norm, b.final_norm, "final_norm");
  ExpectSameVec(a.lm_head, b.lm_head, "lm_head");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerWeights& x = a.layers[l];
    const LayerWeights& y = b.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    ExpectSameVec(x.attn_norm, y.attn_norm, p + "attn_norm");
    ExpectSameVec(x.wqkv, y.wqkv, p + "wqkv");
    ExpectSameVec(x.wo, y.wo, p + "wo");
    ExpectSameVec(x.mla.q_a, y.mla.q_a, p + "mla.q_a");
    ExpectSameVec(x.mla.q_a_norm, y.mla.q_a_norm, p + "mla.q_a_norm");
    ExpectSameVec(x.mla.q_b, y.mla.q_b, p + "mla.q_b");
    ExpectSameVec(x.mla.kv_a, y.mla.kv_a, p + "mla.kv_a");
    ExpectSameVec(x.mla.kv_a_norm, y.mla.kv_a_norm, p + "mla.kv_a_norm");
    ExpectSameVec(x.mla.kv_b, y.mla.kv_b, p + "mla.kv_b");
    ExpectSameVec(x.mla.gate, y.mla.gate, p + "mla.gate");
    ExpectSameVec(x.mla.o, y.mla.o, p + "mla.o");
    const LinearAttnWeights& la = x.linear;
    const LinearAttnWeights& lb = y.linear;
    ExpectSameVec(la.q, lb.q, p + "linear.q");
    ExpectSameVec(la.k, lb.k, p + "linear.k");
    ExpectSameVec(la.v, lb.v, p + "linear.v");
    ExpectSameVec(la.conv, lb.conv, p + "linear.conv");
    ExpectSameVec(la.f, lb.f, p + "linear.f");
    ExpectSameVec(la.b, lb.b, p + "linear.b");
    ExpectSameVec(la.a_log, lb.a_log, p + "linear.a_log");
    ExpectSameVec(la.dt_bias, lb.dt_bias, p + "linear.dt_bias");
    ExpectSameVec(la.g, lb.g, p + "linear.g");
    ExpectSameVec(la.o_norm, lb.o_norm, p + "linear.o_norm");
    ExpectSameVec(la.o, lb.o, p + "linear.o");
    ExpectSameVec(x.ffn_norm, y.ffn_norm, p + "ffn_norm");
    ExpectSameSwiglu(x.dense, y.dense, p + "dense");
    ExpectSameVec(x.router, y.router, p + "router");
    ExpectSameVec(x.expert_bias, y.expert_bias, p + "expert_bias");
    ASSERT_EQ(x.experts.size(), y.experts.size()) << p;
    for (size_t e = 0; e < x.experts.size(); ++e) {
      ExpectSameSwiglu(x.experts[e], y.experts[e], p + "expert " + std::to_string(e));
    }
    ExpectSameSwiglu(x.shared, y.shared, p + "shared");
  }
}

inline std::unique_ptr<Checkpoint> OpenOk(const std::string& dir) {
  Result<std::unique_ptr<Checkpoint>> ck = Checkpoint::Open(dir);
  EXPECT_THAT(ck, IsOk());
  return ck.ok() ? std::move(ck).value() : nullptr;
}

}  // namespace sy::engine::testing
