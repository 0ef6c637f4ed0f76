#include "engine/model_loader/hf_config.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>

namespace sy::engine {

namespace {

using nlohmann::json;

constexpr const char* kModelTypeHybrid = "bailing_hybrid";
constexpr const char* kModelTypeMoe = "switchyard_moe";

std::string Short(const json& v) {
  std::string s = v.dump();
  return s.size() > 48 ? s.substr(0, 45) + "..." : s;
}

// Reads typed fields with a sticky first error, so the parser reads as a list
// of fields rather than a ladder of early returns. Every error names the field.
class Reader {
 public:
  explicit Reader(const json& j) : j_(j) {}
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  void Fail(const std::string& field, const std::string& why) {
    if (status_.ok()) status_ = InvalidArgument("config.json field '" + field + "' " + why);
  }

  // The value of the first present alias; two present aliases must agree.
  // name() is then the alias that was present, for error messages.
  const json* Find(std::initializer_list<const char*> names) {
    const json* found = nullptr;
    const char* found_name = *names.begin();
    for (const char* n : names) {
      auto it = j_.find(n);
      if (it == j_.end()) continue;
      if (found != nullptr && *found != *it) {
        if (status_.ok()) {
          status_ = InvalidArgument(std::string("config.json fields '") + found_name + "' (" +
                                    Short(*found) + ") and '" + n + "' (" + Short(*it) +
                                    ") are aliases but contradict each other");
        }
        continue;
      }
      if (found == nullptr) {
        found = &*it;
        found_name = n;
      }
    }
    name_ = found_name;
    return found;
  }
  const char* name() const { return name_; }

  std::optional<int> OptInt(std::initializer_list<const char*> names) {
    const json* v = Find(names);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer()) {
      Fail(name(), "must be an integer, got " + Short(*v));
      return std::nullopt;
    }
    // An unsigned above INT64_MAX would wrap to a negative int64 below.
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT_MAX)) {
      Fail(name(), "is out of range: " + Short(*v));
      return std::nullopt;
    }
    const int64_t x = v->get<int64_t>();
    if (x < INT_MIN || x > INT_MAX) {
      Fail(name(), "is out of range: " + std::to_string(x));
      return std::nullopt;
    }
    return static_cast<int>(x);
  }
  int Int(std::initializer_list<const char*> names) {
    auto v = OptInt(names);
    if (!v && !Has(names)) Fail(*names.begin(), "is missing");
    return v.value_or(0);
  }
  int Int(std::initializer_list<const char*> names, int def) { return OptInt(names).value_or(def); }

  std::optional<float> OptFloat(std::initializer_list<const char*> names) {
    const json* v = Find(names);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(name(), "must be a number, got " + Short(*v));
      return std::nullopt;
    }
    // A JSON number beyond the float range (1e39) would become an infinity,
    // which ToHfConfig cannot write back (JSON has none).
    const float f = static_cast<float>(v->get<double>());
    if (!std::isfinite(f)) {
      Fail(name(), "is out of range for a float: " + Short(*v));
      return std::nullopt;
    }
    return f;
  }
  float Float(std::initializer_list<const char*> names) {
    auto v = OptFloat(names);
    if (!v && !Has(names)) Fail(*names.begin(), "is missing");
    return v.value_or(0.0f);
  }
  float Float(std::initializer_list<const char*> names, float def) {
    return OptFloat(names).value_or(def);
  }

  bool Bool(std::initializer_list<const char*> names, bool def) {
    const json* v = Find(names);
    if (v == nullptr) return def;
    if (!v->is_boolean()) {
      Fail(name(), "must be true or false, got " + Short(*v));
      return def;
    }
    return v->get<bool>();
  }

  std::optional<std::string> OptString(std::initializer_list<const char*> names) {
    const json* v = Find(names);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      Fail(name(), "must be a string, got " + Short(*v));
      return std::nullopt;
    }
    return v->get<std::string>();
  }

  bool Has(std::initializer_list<const char*> names) const {
    for (const char* n : names) {
      if (j_.contains(n)) return true;
    }
    return false;
  }

 private:
  const json& j_;
  Status status_;
  const char* name_ = "";
};

// ModelConfig field -> config.json field, to point Validate's errors at the file.
const char* HfFieldFor(const std::string& field, bool hybrid) {
  static constexpr std::pair<const char*, const char*> kMap[] = {
      {"vocab", "vocab_size"},
      {"hidden", "hidden_size"},
      {"layers", "num_hidden_layers"},
      {"heads", "num_attention_heads"},
      {"kv_heads", "num_key_value_heads"},
      {"max_seq", "max_position_embeddings"},
      {"rms_eps", "rms_norm_eps"},
      {"eos_token", "eos_token_id"},
      {"mtp_layers", "num_nextn_predict_layers"},
      {"linear_head_dim", "head_dim"},
      {"conv_kernel", "short_conv_kernel_size"},
      {"dense_inter", "intermediate_size"},
      {"experts", "num_experts"},
      {"top_k", "num_experts_per_tok"},
      {"expert_inter", "moe_intermediate_size"},
      {"linear_kind", "linear_attn_type"},
  };
  if (field == "shared_inter") {
    return hybrid ? "moe_shared_expert_intermediate_size" : "shared_expert_intermediate_size";
  }
  for (const auto& [ours, hf] : kMap) {
    if (field == ours) return hf;
  }
  return nullptr;
}

// Appends the config.json name of the ModelConfig field a Validate error names.
Status PointAtHfField(const Status& s, bool hybrid) {
  const std::string& m = s.message();
  const std::string marker = "field '";
  const size_t a = m.find(marker);
  if (a == std::string::npos) return s;
  const size_t b = m.find('\'', a + marker.size());
  if (b == std::string::npos) return s;
  const char* hf = HfFieldFor(m.substr(a + marker.size(), b - a - marker.size()), hybrid);
  if (hf == nullptr) return s;
  return Status(s.code(), m + " (config.json field '" + std::string(hf) + "')");
}

int32_t ReadEos(Reader& r, const json& j) {
  auto it = j.find("eos_token_id");
  if (it == j.end()) {
    r.Fail("eos_token_id", "is missing");
    return 0;
  }
  const json* v = &*it;
  if (v->is_array()) {
    if (v->empty()) {
      r.Fail("eos_token_id", "is an empty list");
      return 0;
    }
    v = &(*v)[0];  // the first of several stop tokens is the model's EOS
  }
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) ||
      v->get<int64_t>() < INT32_MIN || v->get<int64_t>() > INT32_MAX) {
    r.Fail("eos_token_id", "must be an integer or a list of integers, got " + Short(*it));
    return 0;
  }
  return static_cast<int32_t>(v->get<int64_t>());
}

void ParseCommon(Reader& r, const json& j, ModelConfig& c) {
  if (auto name = r.OptString({"_name_or_path"})) {
    c.name = std::filesystem::path(*name).filename().string();
  }
  c.vocab = r.Int({"vocab_size"});
  c.hidden = r.Int({"hidden_size"});
  c.layers = r.Int({"num_hidden_layers"});
  c.heads = r.Int({"num_attention_heads"});
  c.max_seq = r.Int({"max_position_embeddings"});
  c.rope_theta = r.Float({"rope_theta"});
  c.rms_eps = r.Float({"rms_norm_eps"});
  c.eos_token = ReadEos(r, j);
  c.mtp_layers = r.Int({"num_nextn_predict_layers"}, 0);
  c.experts = r.Int({"num_experts"});
  c.top_k = r.Int({"num_experts_per_tok", "num_experts_per_token"});
  c.expert_inter = r.Int({"moe_intermediate_size"});
  c.norm_topk_prob = r.Bool({"norm_topk_prob", "moe_renormalize"}, true);
  c.routed_scaling_factor = r.Float({"routed_scaling_factor"}, 1.0f);
  if (r.Bool({"tie_word_embeddings"}, false)) {
    r.Fail("tie_word_embeddings", "must be false: lm_head is a separate tensor here");
  }
}

void ParseMoe(Reader& r, ModelConfig& c) {
  c.arch = std::string(kArchMoe);
  c.kv_heads = r.Int({"num_key_value_heads"}, c.heads);
  const int default_head_dim = c.heads > 0 ? c.hidden / c.heads : 0;
  c.head_dim = r.Int({"head_dim"}, default_head_dim);
  c.shared_inter = r.Int({"shared_expert_intermediate_size"}, 0);
  c.router = RouterKind::kSoftmax;
}

// linear_attn_config (seed 001 §3.2), when present, must say what the top-level
// fields say; it is derived data, so a disagreement is a broken config.
void CheckLinearAttnConfig(Reader& r, const json& lac, const ModelConfig& c) {
  if (!lac.is_object()) {
    r.Fail("linear_attn_config", "must be an object");
    return;
  }
  // The layer lists are built from their length, which is checked first, so
  // a config claiming billions of layers costs no more than its own lists.
  auto check_list = [&](const char* key, bool full) {
    auto it = lac.find(key);
    if (it == lac.end()) return;
    const int64_t layers = c.layers, group = c.layer_group_size;
    if (layers < 0 || group <= 0) return;  // Validate refuses these
    const int64_t whole = layers / group * group;
    const int64_t n_full = whole / group + (layers - whole);
    const int64_t n = full ? n_full : layers - n_full;
    if (!it->is_array() || static_cast<int64_t>(it->size()) != n) {
      r.Fail(std::string("linear_attn_config.") + key,
             "is " + Short(*it) + " but num_hidden_layers and layer_group_size give " +
                 std::to_string(n) + " layers");
      return;
    }
    std::vector<int64_t> want;  // 1-based, as in the checkpoint's config
    want.reserve(static_cast<size_t>(n));
    if (full) {
      for (int64_t l = group; l <= whole; l += group) want.push_back(l);
      for (int64_t l = whole + 1; l <= layers; ++l) want.push_back(l);
    } else {
      for (int64_t l = 1; l <= whole; ++l) {
        if (l % group != 0) want.push_back(l);
      }
    }
    if (*it != json(want)) {
      r.Fail(std::string("linear_attn_config.") + key,
             "is " + Short(*it) + " but num_hidden_layers and layer_group_size give " +
                 Short(json(want)));
    }
  };
  check_list("kda_layers", /*full=*/false);
  check_list("full_attn_layers", /*full=*/true);
  auto check_int = [&](const char* key, int want, const char* top) {
    auto it = lac.find(key);
    if (it == lac.end()) return;
    if (!it->is_number_integer() || it->get<int64_t>() != want) {
      r.Fail(std::string("linear_attn_config.") + key,
             "is " + Short(*it) + " but " + top + " is " + std::to_string(want));
    }
  };
  check_int("head_dim", c.linear_head_dim, "head_dim");
  check_int("num_heads", c.heads, "num_attention_heads");
  check_int("short_conv_kernel_size", c.conv_kernel, "short_conv_kernel_size");
}

void ParseHybrid(Reader& r, const json& j, ModelConfig& c) {
  c.arch = std::string(kArchBailingHybrid);
  c.kv_heads = 0;  // num_key_value_heads is MHA-only: accepted and ignored
  c.head_dim = 0;
  c.router = RouterKind::kSigmoidGrouped;
  c.layer_group_size = r.Int({"layer_group_size"});
  const std::string kind = r.OptString({"linear_attn_type"}).value_or("kda");
  if (kind == "kda") {
    c.linear_kind = AttentionKind::kKda;
  } else if (kind == "gla") {
    c.linear_kind = AttentionKind::kGla;
  } else {
    r.Fail("linear_attn_type", "must be \"kda\" or \"gla\", got \"" + kind.substr(0, 32) + "\"");
  }
  const bool kda = c.linear_kind == AttentionKind::kKda;

  // --- MLA ---
  if (!r.Has({"q_lora_rank"})) {
    r.Fail("q_lora_rank", "is missing (null means no Q-LoRA)");
  } else if (!j["q_lora_rank"].is_null()) {
    c.q_lora_rank = r.Int({"q_lora_rank"});
  }
  c.kv_lora_rank = r.Int({"kv_lora_rank"});
  c.qk_nope_head_dim = r.Int({"qk_nope_head_dim"});
  c.qk_rope_head_dim = r.Int({"qk_rope_head_dim"});
  c.v_head_dim = r.Int({"v_head_dim"});
  // Summed in 64 bits: the two ints are the file's, and may be near INT_MAX.
  const int64_t qk_sum = int64_t{c.qk_nope_head_dim} + c.qk_rope_head_dim;
  if (auto qk = r.OptInt({"qk_head_dim"}); qk && *qk != qk_sum) {
    r.Fail("qk_head_dim", "is " + std::to_string(*qk) +
                              " but qk_nope_head_dim + qk_rope_head_dim is " +
                              std::to_string(qk_sum));
  } else if (qk_sum > INT_MAX) {
    r.Fail("qk_nope_head_dim", "plus qk_rope_head_dim is out of range: " + std::to_string(qk_sum));
  }
  c.rope_interleave = r.Bool({"rope_interleave"}, true);
  if (r.Bool({"use_mla_nope", "mla_use_nope"}, false)) {
    r.Fail(r.name(), "must be false: MLA here always applies RoPE");
  }
  if (auto g = r.OptString({"gated_attention_proj_granularity_type"})) {
    if (*g != "head_wise") {
      r.Fail("gated_attention_proj_granularity_type",
             "must be \"head_wise\", got \"" + g->substr(0, 32) + "\"");
    }
    c.mla_gate = true;
  } else {
    c.mla_gate = false;  // no gate named: MLA without the output gate
  }

  // --- linear attention: head_dim is the KDA/GLA head dim (seed 001 §3.2) ---
  const json* lac = j.contains("linear_attn_config") && !j["linear_attn_config"].is_null()
                        ? &j["linear_attn_config"]
                        : nullptr;
  if (auto hd = r.OptInt({"head_dim"})) {
    c.linear_head_dim = *hd;
  } else if (lac != nullptr && lac->is_object() && lac->contains("head_dim") &&
             (*lac)["head_dim"].is_number_integer()) {
    c.linear_head_dim = (*lac)["head_dim"].get<int>();
  } else if (!r.Has({"head_dim"})) {
    r.Fail("head_dim", "is missing (the KDA/GLA head dim, or linear_attn_config.head_dim)");
  }
  c.conv_kernel = kda ? r.Int({"short_conv_kernel_size"}) : r.Int({"short_conv_kernel_size"}, 0);
  c.kda_has_lower_bound = r.Bool({"kda_safe_gate"}, false);
  c.kda_lower_bound =
      c.kda_has_lower_bound ? r.Float({"kda_lower_bound"}) : r.Float({"kda_lower_bound"}, -5.0f);
  if (!r.Bool({"no_kda_lora"}, true)) {
    r.Fail("no_kda_lora", "must be true: f_proj/g_proj are direct projections (no f_a/f_b LoRA)");
  }
  if (auto f = r.OptFloat({"partial_rotary_factor"})) {
    const long rope = std::lround(static_cast<double>(c.linear_head_dim) * *f);
    if (rope != c.qk_rope_head_dim) {
      r.Fail("partial_rotary_factor", "gives round(head_dim * factor) = " + std::to_string(rope) +
                                          " but qk_rope_head_dim is " +
                                          std::to_string(c.qk_rope_head_dim));
    }
  }

  // --- FFN and router ---
  c.first_k_dense_replace = r.Int({"first_k_dense_replace"}, 0);
  c.dense_inter =
      c.first_k_dense_replace > 0 ? r.Int({"intermediate_size"}) : r.Int({"intermediate_size"}, 0);
  const int shared_experts = r.Int({"num_shared_experts"}, 0);
  const int shared_each = r.Int({"moe_shared_expert_intermediate_size"}, c.expert_inter);
  const int64_t shared_inter = int64_t{shared_experts} * shared_each;
  if (shared_inter < INT_MIN || shared_inter > INT_MAX) {
    r.Fail("num_shared_experts", "times moe_shared_expert_intermediate_size is out of range: " +
                                     std::to_string(shared_inter));
  } else {
    c.shared_inter = static_cast<int>(shared_inter);
  }
  c.n_group = r.Int({"n_group", "num_expert_group"}, 1);
  c.topk_group = r.Int({"topk_group"}, 1);
  if (auto f = r.OptString({"score_function", "scoring_func", "moe_router_activation_func"});
      f && *f != "sigmoid") {
    r.Fail(r.name(), "must be \"sigmoid\", got \"" + f->substr(0, 32) + "\"");
  }
  if (auto d = r.OptString({"router_dtype"}); d && *d != "fp32" && *d != "float32") {
    r.Fail("router_dtype", "must be \"fp32\", got \"" + d->substr(0, 32) + "\"");
  }
  if (!r.Bool({"moe_router_enable_expert_bias"}, true)) {
    r.Fail("moe_router_enable_expert_bias", "must be true: the sigmoid router selects with a bias");
  }
  if (lac != nullptr && r.ok()) CheckLinearAttnConfig(r, *lac, c);
}

// Shortest decimal that reads back as the same float: 1e-06, not 9.99999997e-07.
double ShortestDouble(float f) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::stod(std::string(buf, res.ptr));
}

}  // namespace

Result<ModelConfig> ParseHfConfig(const json& j) {
  if (!j.is_object()) return InvalidArgument("config.json must be a JSON object");
  Reader r(j);
  const std::optional<std::string> type = r.OptString({"model_type"});
  if (!r.ok()) return r.status();
  if (!type) return InvalidArgument("config.json field 'model_type' is missing");
  const bool hybrid = *type == kModelTypeHybrid;
  if (!hybrid && *type != kModelTypeMoe) {
    return InvalidArgument("config.json field 'model_type' must be \"" +
                           std::string(kModelTypeHybrid) + "\" or \"" + kModelTypeMoe +
                           "\", got \"" + type->substr(0, 64) + "\"");
  }
  ModelConfig c;
  c.name.clear();
  ParseCommon(r, j, c);
  if (r.ok()) hybrid ? ParseHybrid(r, j, c) : ParseMoe(r, c);
  if (!r.ok()) return r.status();
  if (Status s = c.Validate(); !s.ok()) return PointAtHfField(s, hybrid);
  return c;
}

Result<ModelConfig> LoadHfConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      return NotFound("config file " + path + " does not exist");
    return Unavailable("cannot read config file " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not valid JSON");
  Result<ModelConfig> c = ParseHfConfig(j);
  if (!c.ok()) return c.status().WithContext(path);
  // Normalised so that "ckpt//config.json" is still named "ckpt".
  const std::filesystem::path dir =
      std::filesystem::absolute(path).lexically_normal().parent_path();
  c->name = dir.filename().string();
  return c;
}

json ToHfConfig(const ModelConfig& c) {
  json j;
  j["_name_or_path"] = c.name;
  j["vocab_size"] = c.vocab;
  j["hidden_size"] = c.hidden;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["max_position_embeddings"] = c.max_seq;
  j["rope_theta"] = ShortestDouble(c.rope_theta);
  j["rms_norm_eps"] = ShortestDouble(c.rms_eps);
  j["eos_token_id"] = c.eos_token;
  j["num_nextn_predict_layers"] = c.mtp_layers;
  j["num_experts"] = c.experts;
  j["num_experts_per_tok"] = c.top_k;
  j["moe_intermediate_size"] = c.expert_inter;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = ShortestDouble(c.routed_scaling_factor);
  j["tie_word_embeddings"] = false;
  if (!c.hybrid()) {
    j["model_type"] = kModelTypeMoe;
    j["architectures"] = {"SwitchyardMoeForCausalLM"};
    j["num_key_value_heads"] = c.kv_heads;
    j["head_dim"] = c.head_dim;
    j["shared_expert_intermediate_size"] = c.shared_inter;
    return j;
  }
  j["model_type"] = kModelTypeHybrid;
  j["architectures"] = {"BailingMoeV3ForCausalLM"};
  j["layer_group_size"] = c.layer_group_size;
  j["linear_attn_type"] = c.linear_kind == AttentionKind::kGla ? "gla" : "kda";
  j["q_lora_rank"] = c.q_lora_rank > 0 ? json(c.q_lora_rank) : json(nullptr);
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["qk_head_dim"] = c.mla_qk_head_dim();
  j["v_head_dim"] = c.v_head_dim;
  j["rope_interleave"] = c.rope_interleave;
  if (c.mla_gate) j["gated_attention_proj_granularity_type"] = "head_wise";
  j["head_dim"] = c.linear_head_dim;
  j["short_conv_kernel_size"] = c.conv_kernel;
  j["no_kda_lora"] = true;
  j["kda_safe_gate"] = c.kda_has_lower_bound;
  j["kda_lower_bound"] = ShortestDouble(c.kda_lower_bound);
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  if (c.dense_inter > 0) j["intermediate_size"] = c.dense_inter;
  j["num_shared_experts"] = c.shared_inter > 0 ? 1 : 0;
  if (c.shared_inter > 0) j["moe_shared_expert_intermediate_size"] = c.shared_inter;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["score_function"] = "sigmoid";
  j["router_dtype"] = "fp32";
  j["moe_router_enable_expert_bias"] = true;
  std::vector<int> linear, full;
  for (int l = 0; l < c.layers; ++l) (c.is_full_attention(l) ? full : linear).push_back(l + 1);
  j["linear_attn_config"] = {{"kda_layers", linear},
                             {"full_attn_layers", full},
                             {"head_dim", c.linear_head_dim},
                             {"num_heads", c.heads},
                             {"short_conv_kernel_size", c.conv_kernel}};
  return j;
}

}  // namespace sy::engine
