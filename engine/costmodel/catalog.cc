#include "engine/costmodel/catalog.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/model_loader/hf_config.h"

#ifndef SY_COSTMODEL_DATA_DIR
#error "SY_COSTMODEL_DATA_DIR must name the catalogue directory (engine/costmodel/CMakeLists.txt)"
#endif

namespace sy::engine::costmodel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Join(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "(none)" : s;
}

std::vector<std::string> JsonBaseNames(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Field readers: INVALID_ARGUMENT "`source`: field 'f' ..." on any problem.
class Fields {
 public:
  Fields(const json& j, const std::string& source) : j_(j), source_(source) {}

  Status Error(const std::string& field, const std::string& why) const {
    return InvalidArgument(source_ + ": field '" + field + "' " + why);
  }
  Result<double> Positive(const std::string& path) const {
    const json* v = Find(path);
    if (v == nullptr) return Error(path, "is missing");
    if (!v->is_number()) return Error(path, "must be a number");
    const double d = v->get<double>();
    if (!(d > 0)) return Error(path, "must be > 0, got " + v->dump());
    return d;
  }
  // An integer >= `min`; `def` when absent (nullopt: required).
  Result<int> Int(const std::string& path, int min, std::optional<int> def = std::nullopt) const {
    const json* v = Find(path);
    if (v == nullptr) {
      if (def) return *def;
      return Error(path, "is missing");
    }
    if (!v->is_number_integer()) return Error(path, "must be an integer");
    const int64_t i = v->get<int64_t>();
    if (i < min || i > (int64_t{1} << 30)) {
      return Error(path, "must be >= " + std::to_string(min) + ", got " + v->dump());
    }
    return static_cast<int>(i);
  }
  // A number in (0, 1]; `def` when absent.
  Result<double> Fraction(const std::string& path, double def) const {
    const json* v = Find(path);
    if (v == nullptr) return def;
    if (!v->is_number()) return Error(path, "must be a number");
    const double d = v->get<double>();
    if (!(d > 0 && d <= 1)) return Error(path, "must be in (0, 1], got " + v->dump());
    return d;
  }
  // A number >= 0; 0 when absent.
  Result<double> NonNegative(const std::string& path) const {
    const json* v = Find(path);
    if (v == nullptr) return 0.0;
    if (!v->is_number()) return Error(path, "must be a number");
    const double d = v->get<double>();
    if (!(d >= 0 && std::isfinite(d))) return Error(path, "must be >= 0, got " + v->dump());
    return d;
  }
  bool Has(const std::string& path) const { return Find(path) != nullptr; }
  Result<std::string> String(const std::string& path, std::optional<std::string> def) const {
    const json* v = Find(path);
    if (v == nullptr) {
      if (def) return *def;
      return Error(path, "is missing");
    }
    if (!v->is_string()) return Error(path, "must be a string");
    return v->get<std::string>();
  }

 private:
  // "a.b" looks up j["a"]["b"].
  const json* Find(const std::string& path) const {
    const json* cur = &j_;
    size_t start = 0;
    while (true) {
      const size_t dot = path.find('.', start);
      const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
      if (!cur->is_object() || !cur->contains(key)) return nullptr;
      cur = &(*cur)[key];
      if (dot == std::string::npos) return cur;
      start = dot + 1;
    }
  }
  const json& j_;
  const std::string& source_;
};

Result<KernelFit> ParseFit(const Fields& f, const std::string& at) {
  KernelFit k;
  ASSIGN_OR_RETURN(k.floor_us, f.NonNegative(at + ".floor_us"));
  ASSIGN_OR_RETURN(k.hbm, f.Fraction(at + ".hbm", 1.0));
  ASSIGN_OR_RETURN(k.compute, f.Fraction(at + ".compute", 1.0));
  return k;
}

// "measured_kernels": {"source", "attention", "router", "expert_ffn"}.
Result<KernelProfile> ParseProfile(const Fields& f) {
  KernelProfile p;
  const std::string at = "measured_kernels";
  ASSIGN_OR_RETURN(p.source, f.String(at + ".source", std::nullopt));
  if (p.source.empty()) return f.Error(at + ".source", "must not be empty");
  ASSIGN_OR_RETURN(p.attention, ParseFit(f, at + ".attention"));
  ASSIGN_OR_RETURN(p.router, ParseFit(f, at + ".router"));
  ASSIGN_OR_RETURN(p.expert, ParseFit(f, at + ".expert_ffn"));
  ASSIGN_OR_RETURN(p.per_expert_us, f.NonNegative(at + ".expert_ffn.per_expert_us"));
  ASSIGN_OR_RETURN(p.half_width, f.NonNegative(at + ".expert_ffn.half_width"));
  ASSIGN_OR_RETURN(std::string overlap, f.String(at + ".expert_ffn.overlap", "max"));
  if (overlap != "max" && overlap != "serial") {
    return f.Error(at + ".expert_ffn.overlap",
                   "must be \"max\" or \"serial\", got \"" + overlap + "\"");
  }
  p.serial = overlap == "serial";
  return p;
}

Result<json> ParseObject(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(source + ": not valid JSON");
  if (!j.is_object()) return InvalidArgument(source + ": must be a JSON object");
  return j;
}

}  // namespace

double DtypeBytes(Dtype d) { return d == Dtype::kFp8 ? 1.0 : 2.0; }
const char* DtypeName(Dtype d) { return d == Dtype::kFp8 ? "fp8" : "bf16"; }
Result<Dtype> ParseDtype(const std::string& name) {
  if (name == "fp8") return Dtype::kFp8;
  if (name == "bf16") return Dtype::kBf16;
  return InvalidArgument("unknown dtype '" + name + "' (known: fp8, bf16)");
}

double HardwareSpec::peak_flops(Dtype d) const {
  return (d == Dtype::kFp8 ? peak_flops_fp8_per_chip : peak_flops_bf16_per_chip) / devices_per_chip;
}

int ModelSpec::full_attention_layers() const {
  // A trailing partial group is all full attention, as ModelConfig has it.
  return layer_group_size > 0 ? layers / layer_group_size + layers % layer_group_size : layers;
}

Status ModelSpec::Validate() const {
  auto bad = [&](const char* f, const std::string& why) {
    return InvalidArgument("model '" + name + "': field '" + f + "' " + why);
  };
  if (layers < 1 || hidden < 1 || vocab < 1 || heads < 1) {
    return bad("layers/hidden/vocab/heads", "must all be >= 1");
  }
  if (attention == AttentionKind::kMha && (kv_heads < 1 || head_dim < 1 || heads % kv_heads)) {
    return bad("kv_heads", "must be >= 1 and divide heads, with head_dim >= 1 (mha)");
  }
  if (attention == AttentionKind::kMla &&
      (kv_lora_rank < 1 || qk_nope_head_dim < 1 || qk_rope_head_dim < 0 || v_head_dim < 1)) {
    return bad("kv_lora_rank", "and the MLA head dims must be >= 1 (mla)");
  }
  if (layer_group_size > 0 && linear_head_dim < 1) {
    return bad("linear_head_dim", "must be >= 1 when layer_group_size > 0");
  }
  if (experts < 1 || top_k < 1 || top_k > experts || expert_inter < 1) {
    return bad("experts", "must be >= 1 with 1 <= top_k <= experts and expert_inter >= 1");
  }
  if (dense_layers < 0 || dense_layers >= layers || (dense_layers > 0 && dense_inter < 1)) {
    return bad("dense_layers", "must be in [0, layers) with dense_inter >= 1 when > 0");
  }
  if (shared_experts > 0 && shared_inter < 1) return bad("shared_inter", "must be >= 1");
  return Status::Ok();
}

std::string DefaultCatalogDir() { return SY_COSTMODEL_DATA_DIR; }

std::vector<std::string> HardwareNames(const std::string& dir) {
  return JsonBaseNames(fs::path(dir) / "hardware");
}
std::vector<std::string> ModelNames(const std::string& dir) {
  return JsonBaseNames(fs::path(dir) / "models");
}

Result<HardwareSpec> ParseHardwareJson(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, source));
  Fields f(j, source);
  HardwareSpec h;
  ASSIGN_OR_RETURN(h.name, f.String("name", std::nullopt));
  ASSIGN_OR_RETURN(h.description, f.String("description", std::string()));
  ASSIGN_OR_RETURN(h.devices_per_chip, f.Int("devices_per_chip", 1));
  ASSIGN_OR_RETURN(h.peak_flops_bf16_per_chip, f.Positive("peak_flops_per_chip.bf16"));
  ASSIGN_OR_RETURN(h.peak_flops_fp8_per_chip, f.Positive("peak_flops_per_chip.fp8"));
  ASSIGN_OR_RETURN(h.hbm_bandwidth_per_chip, f.Positive("hbm_bandwidth_per_chip"));
  ASSIGN_OR_RETURN(h.hbm_capacity_per_chip, f.Positive("hbm_capacity_per_chip"));
  ASSIGN_OR_RETURN(std::string kind, f.String("interconnect.kind", std::nullopt));
  if (kind == "switch") {
    h.topology = Topology::kSwitch;
  } else if (kind == "torus") {
    h.topology = Topology::kTorus;
  } else {
    return f.Error("interconnect.kind", "must be \"switch\" or \"torus\", got \"" + kind + "\"");
  }
  ASSIGN_OR_RETURN(h.links_per_chip, f.Int("interconnect.links_per_chip", 1));
  ASSIGN_OR_RETURN(h.link_bandwidth_per_direction,
                   f.Positive("interconnect.link_bandwidth_per_direction"));
  ASSIGN_OR_RETURN(h.allreduce_latency_us,
                   f.NonNegative("interconnect.collective_latency_us.all_reduce"));
  ASSIGN_OR_RETURN(h.all_to_all_latency_us,
                   f.NonNegative("interconnect.collective_latency_us.all_to_all"));
  if (f.Has("measured_kernels")) {
    ASSIGN_OR_RETURN(h.measured, ParseProfile(f));
  }
  return h;
}

Result<ModelSpec> ParseModelJson(const std::string& text, const std::string& source) {
  ASSIGN_OR_RETURN(json j, ParseObject(text, source));
  Fields f(j, source);
  ModelSpec m;
  ASSIGN_OR_RETURN(m.name, f.String("name", std::nullopt));
  ASSIGN_OR_RETURN(m.description, f.String("description", std::string()));
  ASSIGN_OR_RETURN(m.layers, f.Int("layers", 1));
  ASSIGN_OR_RETURN(m.hidden, f.Int("hidden", 1));
  ASSIGN_OR_RETURN(m.vocab, f.Int("vocab", 1));
  ASSIGN_OR_RETURN(m.heads, f.Int("heads", 1));
  ASSIGN_OR_RETURN(std::string attn, f.String("attention", std::nullopt));
  if (attn == "mha") {
    m.attention = AttentionKind::kMha;
    ASSIGN_OR_RETURN(m.kv_heads, f.Int("kv_heads", 1));
    ASSIGN_OR_RETURN(m.head_dim, f.Int("head_dim", 1));
  } else if (attn == "mla") {
    m.attention = AttentionKind::kMla;
    ASSIGN_OR_RETURN(m.q_lora_rank, f.Int("q_lora_rank", 0, 0));
    ASSIGN_OR_RETURN(m.kv_lora_rank, f.Int("kv_lora_rank", 1));
    ASSIGN_OR_RETURN(m.qk_nope_head_dim, f.Int("qk_nope_head_dim", 1));
    ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.Int("qk_rope_head_dim", 0));
    ASSIGN_OR_RETURN(m.v_head_dim, f.Int("v_head_dim", 1));
  } else {
    return f.Error("attention", "must be \"mha\" or \"mla\", got \"" + attn + "\"");
  }
  ASSIGN_OR_RETURN(std::string linear, f.String("linear_attention", std::string("none")));
  if (linear == "gla" || linear == "kda") {
    m.linear = linear == "gla" ? AttentionKind::kGla : AttentionKind::kKda;
    ASSIGN_OR_RETURN(m.layer_group_size, f.Int("layer_group_size", 2));
    ASSIGN_OR_RETURN(m.linear_head_dim, f.Int("linear_head_dim", 1));
  } else if (linear != "none") {
    return f.Error("linear_attention", "must be \"none\", \"gla\" or \"kda\"");
  }
  ASSIGN_OR_RETURN(m.experts, f.Int("experts", 1));
  ASSIGN_OR_RETURN(m.top_k, f.Int("top_k", 1));
  ASSIGN_OR_RETURN(m.expert_inter, f.Int("expert_inter", 1));
  ASSIGN_OR_RETURN(m.shared_experts, f.Int("shared_experts", 0, 0));
  ASSIGN_OR_RETURN(m.shared_inter, f.Int("shared_inter", 0, 0));
  ASSIGN_OR_RETURN(m.dense_layers, f.Int("dense_layers", 0, 0));
  ASSIGN_OR_RETURN(m.dense_inter, f.Int("dense_inter", 0, 0));
  Status s = m.Validate();
  if (!s.ok()) return s.WithContext(source);
  return m;
}

Result<HardwareSpec> LoadHardware(const std::string& dir, const std::string& name) {
  const fs::path path = fs::path(dir) / "hardware" / (name + ".json");
  const std::vector<std::string> known = HardwareNames(dir);
  if (name.empty() || name.find('/') != std::string::npos ||
      std::find(known.begin(), known.end(), name) == known.end()) {
    return NotFound("unknown hardware '" + name + "' (known: " + Join(known) + "; catalogue " +
                    (fs::path(dir) / "hardware").string() + ")");
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  ASSIGN_OR_RETURN(HardwareSpec h, ParseHardwareJson(text, path.string()));
  if (h.name != name) {
    return InvalidArgument(path.string() + ": field 'name' is \"" + h.name +
                           "\", the file is named \"" + name + "\"");
  }
  return h;
}

Result<ModelSpec> LoadModel(const std::string& dir, const std::string& name_or_path) {
  const std::vector<std::string> known = ModelNames(dir);
  if (std::find(known.begin(), known.end(), name_or_path) != known.end()) {
    const fs::path path = fs::path(dir) / "models" / (name_or_path + ".json");
    ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    ASSIGN_OR_RETURN(ModelSpec m, ParseModelJson(text, path.string()));
    if (m.name != name_or_path) {
      return InvalidArgument(path.string() + ": field 'name' is \"" + m.name +
                             "\", the file is named \"" + name_or_path + "\"");
    }
    return m;
  }
  std::error_code ec;
  fs::path p(name_or_path);
  if (fs::is_directory(p, ec)) p /= "config.json";
  if (name_or_path.empty() || !fs::is_regular_file(p, ec)) {
    return NotFound("unknown model '" + name_or_path + "' (known: " + Join(known) +
                    "; or a path to an HF config.json or its directory)");
  }
  ASSIGN_OR_RETURN(ModelConfig c, LoadHfConfig(p.string()));
  ModelSpec m = SpecFromModelConfig(c);
  Status s = m.Validate();
  if (!s.ok()) return s.WithContext(p.string());
  return m;
}

ModelSpec SpecFromModelConfig(const ModelConfig& c) {
  ModelSpec m;
  m.name = c.name;
  m.description = "from ModelConfig (arch " + c.arch + ")";
  m.layers = c.layers;
  m.hidden = c.hidden;
  m.vocab = c.vocab;
  m.heads = c.heads;
  if (c.hybrid()) {
    m.attention = AttentionKind::kMla;
    m.q_lora_rank = c.q_lora_rank;
    m.kv_lora_rank = c.kv_lora_rank;
    m.qk_nope_head_dim = c.qk_nope_head_dim;
    m.qk_rope_head_dim = c.qk_rope_head_dim;
    m.v_head_dim = c.v_head_dim;
    m.layer_group_size = c.layer_group_size;
    m.linear = c.linear_kind;
    m.linear_head_dim = c.linear_head_dim;
  } else {
    m.attention = AttentionKind::kMha;
    m.kv_heads = c.kv_heads;
    m.head_dim = c.head_dim;
  }
  m.experts = c.experts;
  m.top_k = c.top_k;
  m.expert_inter = c.expert_inter;
  m.shared_experts = c.shared_inter > 0 ? 1 : 0;
  m.shared_inter = c.shared_inter;
  m.dense_layers = c.first_k_dense_replace;
  m.dense_inter = c.dense_inter;
  return m;
}

}  // namespace sy::engine::costmodel
