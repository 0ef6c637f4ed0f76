// File: engine/sim/sim_runner.cc
#include "engine/sim/sim_runner.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <utility>

#include "engine/costmodel/interconnect.h"
#include "engine/costmodel/kernels.h"
#include "engine/model_executor/runner_checks.h"
#include "engine/sim/sim_runner_impl.h"

namespace sy::engine {

namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Status CheckHardware(const costmodel::HardwareSpec& hw, int devices) {
  const std::string what = "sim: hardware '" + hw.name + "': ";
  if (hw.devices_per_chip < 1) return InvalidArgument(what + "devices_per_chip must be >= 1");
  for (costmodel::Dtype d : {costmodel::Dtype::kBf16, costmodel::Dtype::kFp8}) {
    if (!(hw.peak_flops(d) > 0) || !std::isfinite(hw.peak_flops(d))) {
      return InvalidArgument(what + "peak FLOP/s (" + costmodel::DtypeName(d) +
                             ") must be finite and > 0");
    }
  }
  if (!(hw.hbm_bandwidth() > 0) || !(hw.hbm_capacity() > 0)) {
    return InvalidArgument(what + "HBM bandwidth and capacity must be > 0");
  }
  if (devices > 1 && !(costmodel::DescribeInterconnect(hw, devices).injection_bandwidth > 0)) {
    return InvalidArgument(what + "no interconnect bandwidth between " + std::to_string(devices) +
                           " devices");
  }
  return Status::Ok();
}

// FAILED unless `config` has the shape SimModelConfig gives (the first field
// that differs is named).
Status CheckSameShape(const ModelConfig& got, const ModelConfig& want) {
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"vocab", {got.vocab, want.vocab}},
      {"hidden", {got.hidden, want.hidden}},
      {"layers", {got.layers, want.layers}},
      {"heads", {got.heads, want.heads}},
      {"kv_heads", {got.kv_heads, want.kv_heads}},
      {"head_dim", {got.head_dim, want.head_dim}},
      {"layer_group_size", {got.layer_group_size, want.layer_group_size}},
      {"linear_kind", {int(got.linear_kind), int(want.linear_kind)}},
      {"q_lora_rank", {got.q_lora_rank, want.q_lora_rank}},
      {"kv_lora_rank", {got.kv_lora_rank, want.kv_lora_rank}},
      {"qk_nope_head_dim", {got.qk_nope_head_dim, want.qk_nope_head_dim}},
      {"qk_rope_head_dim", {got.qk_rope_head_dim, want.qk_rope_head_dim}},
      {"v_head_dim", {got.v_head_dim, want.v_head_dim}},
      {"linear_head_dim", {got.linear_head_dim, want.linear_head_dim}},
      {"first_k_dense_replace", {got.first_k_dense_replace, want.first_k_dense_replace}},
      {"dense_inter", {got.dense_inter, want.dense_inter}},
      {"experts", {got.experts, want.experts}},
      {"top_k", {got.top_k, want.top_k}},
      {"expert_inter", {got.expert_inter, want.expert_inter}},
      {"shared_inter", {got.shared_inter, want.shared_inter}},
      {"eos_token", {got.eos_token, want.eos_token}},
  };
  if (got.arch != want.arch) {
    return InvalidArgument("sim: config arch '" + got.arch + "' differs from SimModelConfig's '" +
                           want.arch + "'");
  }
  for (const auto& [name, v] : fields) {
    if (v.first != v.second) {
      return InvalidArgument(std::string("sim: config field ") + name + " is " +
                             std::to_string(v.first) + ", SimModelConfig(sim.model) has " +
                             std::to_string(v.second));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> SimModelConfig(const costmodel::ModelSpec& spec, int max_seq) {
  RETURN_IF_ERROR(spec.Validate());
  if (max_seq < 2)
    return InvalidArgument("sim: max_seq must be >= 2, got " + std::to_string(max_seq));
  if (spec.vocab < 2) {
    return InvalidArgument("sim: model '" + spec.name + "' needs a vocab of >= 2 (one is EOS)");
  }
  ModelConfig c;
  c.name = spec.name;
  c.vocab = spec.vocab;
  c.eos_token = spec.vocab - 1;
  c.hidden = spec.hidden;
  c.layers = spec.layers;
  c.heads = spec.heads;
  c.max_seq = max_seq;
  if (spec.attention == AttentionKind::kMla || spec.layer_group_size > 0) {
    if (spec.attention != AttentionKind::kMla) {
      return InvalidArgument("sim: model '" + spec.name +
                             "': linear-attention layers need MLA full attention "
                             "(the engine's bailing_hybrid architecture)");
    }
    c.arch = std::string(kArchBailingHybrid);
    // Group size 1: every layer is MLA full attention (DeepSeek-V3).
    c.layer_group_size = spec.layer_group_size > 0 ? spec.layer_group_size : 1;
    c.linear_kind = spec.linear;
    c.q_lora_rank = spec.q_lora_rank;
    c.kv_lora_rank = spec.kv_lora_rank;
    c.qk_nope_head_dim = spec.qk_nope_head_dim;
    c.qk_rope_head_dim = spec.qk_rope_head_dim;
    c.v_head_dim = spec.v_head_dim;
    // Unused without linear layers, but the hybrid config requires one.
    c.linear_head_dim = spec.linear_head_dim > 0 ? spec.linear_head_dim : 128;
    c.kv_heads = spec.heads;
    c.head_dim = spec.qk_nope_head_dim + spec.qk_rope_head_dim;
    c.router = RouterKind::kSigmoidGrouped;
  } else {
    c.kv_heads = spec.kv_heads;
    c.head_dim = spec.head_dim;
  }
  c.first_k_dense_replace = spec.dense_layers;
  c.dense_inter = spec.dense_inter;
  c.experts = spec.experts;
  c.top_k = spec.top_k;
  c.expert_inter = spec.expert_inter;
  c.shared_inter = spec.shared_experts * spec.shared_inter;
  Status s = c.Validate();
  if (!s.ok()) return s.WithContext("sim: model '" + spec.name + "'");
  return c;
}

Result<int> SimKvPagesPerDevice(const SimOptions& sim, int devices, int page_size, double reserve,
                                int state_slots) {
  if (devices < 1 || page_size < 1 || state_slots < 0) {
    return InvalidArgument("sim: devices and page_size must be >= 1, state_slots >= 0");
  }
  if (sim.attention_tp < 1 || devices % sim.attention_tp != 0) {
    return InvalidArgument("sim: attention_tp " + std::to_string(sim.attention_tp) +
                           " must be >= 1 and divide the " + std::to_string(devices) + " devices");
  }
  if (!(reserve >= 0 && reserve < 1)) {
    return InvalidArgument("sim: reserve must be in [0, 1), got " + std::to_string(reserve));
  }
  // The cost model's resident weights per device: attention whole (DP),
  // experts 1/P each (EP), the rest replicated.
  costmodel::StepOptions o;
  o.tokens = 1;
  o.devices = devices;
  o.tp = sim.attention_tp;  // attention weights 1/T per device
  o.weight_dtype = sim.weight_dtype;
  ASSIGN_OR_RETURN(costmodel::StepCost cost, costmodel::EstimateStep(sim.hardware, sim.model, o));
  const double capacity = sim.hardware.hbm_capacity() * (1 - reserve);
  double state_bytes = 0;
  if (state_slots > 0 && sim.model.linear_layers() > 0) {
    const costmodel::AttentionTerms l =
        costmodel::AttentionTermsOf(sim.model, sim.model.linear, sim.attention_tp);
    state_bytes = double(state_slots) * sim.attention_tp / l.cache_split *
                  sim.model.linear_layers() * l.state_bytes_per_seq;
  }
  const double free_bytes = capacity - cost.weight_bytes_per_device - state_bytes;
  if (!(free_bytes > 0)) {
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "sim: model '%s' needs %.1f GB of weights and %.1f GB of recurrent state "
                  "(%d slots) per device on %d devices, more than the %.1f GB of '%s' HBM left "
                  "after a %.0f%% reserve",
                  sim.model.name.c_str(), cost.weight_bytes_per_device / 1e9, state_bytes / 1e9,
                  state_slots, devices, capacity / 1e9, sim.hardware.name.c_str(), reserve * 100);
    return InvalidArgument(buf);
  }
  const costmodel::AttentionTerms a =
      costmodel::AttentionTermsOf(sim.model, sim.model.attention, 1);
  const double page = double(page_size) * sim.model.full_attention_layers() * a.kv_bytes_per_token;
  const double pages = page > 0 ? std::floor(free_bytes / page) : double(INT_MAX);
  return static_cast<int>(std::clamp(pages, 1.0, double(INT_MAX)));
}

Result<std::unique_ptr<ModelRunner>> CreateSimRunner(const ModelConfig& config,
                                                     const ModelRunnerOptions& options,
                                                     const SimOptions& sim) {
  if (sim.clock == nullptr) return InvalidArgument("sim: SimOptions::clock is required");
  RETURN_IF_ERROR(sim.model.Validate());
  if (sim.model.moe_layers() < 1 || sim.model.experts < 1) {
    return InvalidArgument("sim: model '" + sim.model.name + "' has no routed experts");
  }
  for (double f : {sim.efficiency.compute, sim.efficiency.hbm, sim.efficiency.link}) {
    if (!(f > 0 && f <= 1)) return InvalidArgument("sim: efficiency factors must be in (0, 1]");
  }
  if (!(sim.allreduce_latency_us >= 0 && sim.all_to_all_latency_us >= 0)) {
    return InvalidArgument("sim: collective latencies must be >= 0 µs");
  }
  if (sim.attention_tp < 1 || options.devices % sim.attention_tp != 0) {
    return InvalidArgument("sim: attention_tp " + std::to_string(sim.attention_tp) +
                           " must be >= 1 and divide the " + std::to_string(options.devices) +
                           " devices");
  }
  if (!std::isfinite(sim.step_overhead_us) || sim.step_overhead_us < 0) {
    return InvalidArgument("sim: step_overhead_us must be finite and >= 0");
  }
  // ModelRunner::Create's refusals (runner_checks.h).
  RETURN_IF_ERROR(ValidateRunnerOptions(config, options));
  RETURN_IF_ERROR(CheckHardware(sim.hardware, options.devices));
  ASSIGN_OR_RETURN(ModelConfig want, SimModelConfig(sim.model, config.max_seq));
  RETURN_IF_ERROR(CheckSameShape(config, want));
  ASSIGN_OR_RETURN(ExpertMap map, StartingExpertMap(config, options));
  ASSIGN_OR_RETURN(RoutingModel routing,
                   RoutingModel::Create(config.layers, config.experts, config.top_k, sim.routing));
  return std::unique_ptr<ModelRunner>(
      std::make_unique<SimRunner>(config, options, sim, std::move(map), std::move(routing)));
}

SimRunner::SimRunner(const ModelConfig& config, const ModelRunnerOptions& options,
                     const SimOptions& sim, ExpertMap map, RoutingModel routing)
    : config_(config),
      options_(options),
      sim_(sim),
      epoch_(SpanRecorder::Clock::now()),
      map_(std::move(map)),
      routing_(std::move(routing)),
      pricer_(sim, config, options.devices) {
  for (int d = 0; d < options.devices; ++d) {
    KvPoolOptions po{.num_pages = options.kv_pages_per_device,
                     .page_size = options.page_size,
                     .layers = config.full_attention_layers(),
                     .allocate_storage = false};
    if (config.hybrid()) {
      po.latent_dim = config.mla_latent_dim();
    } else {
      po.kv_heads = config.kv_heads;
      po.head_dim = config.head_dim;
    }
    kv_.push_back(std::make_unique<KvPool>(po));
    // Attention groups replicating the cache hold fewer pages per home.
    (void)kv_.back()->SetCapacity(KvCapacity(ParallelMode::kEP));
    StatePoolOptions so{
        .slots = options.state_slots_per_device,
        .layers = config.linear_layers(),
        .state_floats = config.state_floats_per_layer() - config.conv_state_floats(),
        .conv_floats = config.conv_state_floats(),
        .allocate_storage = false};
    so.conv_groups = so.conv_floats > 0 ? 3 * (config.conv_kernel - 1) : 0;
    state_.push_back(std::make_unique<StatePool>(so));
  }
  loads_.resize(options.devices);
  counts_.assign(config.layers, std::vector<int64_t>(config.experts, 0));
}

Result<StepOutput> SimRunner::Step(const BatchInput& batch, TraceLevel level) {
  RETURN_IF_ERROR(ValidateBatch(batch, config_, options_));
  std::fill(loads_.begin(), loads_.end(), DeviceLoad{});
  int64_t tokens = 0;
  for (const SeqInput& s : batch.seqs) {
    const double n = double(s.tokens.size()), p = s.start_pos;
    DeviceLoad& l = loads_[s.device];
    l.tokens += n;
    l.seqs += 1;
    l.logit_rows += s.sample ? 1 : 0;
    l.keys += n * p + n * (n + 1) / 2;
    l.kv_tokens += p + n;
    tokens += static_cast<int64_t>(s.tokens.size());
  }
  const int64_t t0 = sim_.clock->NowUs();
  for (int layer = 0; layer < config_.layers; ++layer) {
    if (config_.is_moe(layer)) {
      routing_.Sample(layer, tokens, t0, &counts_[layer]);
    } else {
      std::fill(counts_[layer].begin(), counts_[layer].end(), 0);
    }
  }
  StepOutput out;
  const StepTiming timing = pricer_.Price(loads_, counts_, map_, mode_, level, t0, &out.spans);
  sim_.clock->Advance(std::llround(timing.duration_us + sim_.step_overhead_us));
  out.outputs.resize(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    out.outputs[i].request_id = s.request_id;
    if (!s.sample) continue;
    // Never EOS (= vocab - 1): output length is the workload's max_new_tokens.
    const uint64_t pos = static_cast<uint64_t>(s.start_pos) + s.tokens.size();
    const uint64_t h =
        Mix(options_.seed ^ Mix(static_cast<uint64_t>(s.request_id)) ^ Mix(pos << 1));
    out.outputs[i].next_token = static_cast<int32_t>(h % static_cast<uint64_t>(config_.vocab - 1));
  }
  out.expert_counts = counts_;
  out.comm_bytes = timing.comm_bytes;
  return out;
}

Result<std::vector<std::vector<float>>> SimRunner::Logits(const BatchInput&) {
  return FailedPrecondition("the sim backend computes no logits");
}

std::vector<int> SimRunner::expert_device() const {
  const int layer = std::min(map_.first_moe(), map_.layers() - 1);
  std::vector<int> out(config_.experts);
  for (int e = 0; e < config_.experts; ++e) out[e] = map_.slot_device(map_.replicas(layer, e)[0]);
  return out;
}

}  // namespace sy::engine
