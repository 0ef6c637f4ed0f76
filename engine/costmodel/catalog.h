// File: engine/costmodel/catalog.h
//
// The hardware and model catalogue of the cost model (cost_model.h): plain
// specs read from JSON data files, `data/hardware/NAME.json` and
// `data/models/NAME.json` under a catalogue directory (docs/COSTMODEL.md gives
// the format; every figure carries a "source"). The default directory is the
// source tree's data/ (compiled in, so the binary needs no install step).
//
//   ASSIGN_OR_RETURN(HardwareSpec hw, LoadHardware(DefaultCatalogDir(), "tpu-v7x"));
//   ASSIGN_OR_RETURN(ModelSpec m, LoadModel(DefaultCatalogDir(), "ling-2.6-1t"));
//   ASSIGN_OR_RETURN(ModelSpec q, LoadModel(dir, "ckpt/config.json"));  // an HF config
//
// Per-chip figures are stored as published; per-device accessors divide by
// devices_per_chip (a TPU v7x chip is two JAX devices, seed 000 §1).
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/config.h"

namespace sy::engine::costmodel {

// Element types the model knows. Bytes per element: fp8 1, bf16 2.
enum class Dtype { kFp8, kBf16 };
double DtypeBytes(Dtype d);
const char* DtypeName(Dtype d);
// "fp8" | "bf16"; INVALID_ARGUMENT otherwise.
Result<Dtype> ParseDtype(const std::string& name);

enum class Topology {
  kSwitch,  // every device reaches every other in one hop (NVLink + NVSwitch)
  kTorus,   // 3-D torus of chips (TPU ICI); shape from TorusShape()
};

// What a real kernel library reaches on a chip at decode sizes, fitted to
// timings of the chip (scripts/measure-kernels.py; docs/SIMULATION.md
// "Measured kernels"). A covered kernel costs, per layer,
//   floor_us + max(FLOPs / (peak x compute), bytes / (HBM bw x hbm))
// and the routed experts add per_expert_us for each expert with rows on the
// device, reach compute x w / (w + half_width) of peak with w the device's
// share of an expert's intermediate dim (TP's 1/P slices are small GEMMs),
// and with `serial` add the two terms instead of taking the larger.
// The floor is the block's chain of small kernels (norms, RoPE, cache
// writes, softmax/top-k, sort), which the flat Efficiency factors miss.
struct KernelFit {
  double floor_us = 0;
  double hbm = 1;      // fraction of the datasheet HBM bandwidth
  double compute = 1;  // fraction of the datasheet peak (compute dtype)
};
struct KernelProfile {
  KernelFit attention;  // full attention of kind "mha" (GQA), projections included
  KernelFit router;     // router GEMM, softmax, top-k
  KernelFit expert;     // routed experts: sort, gate/up, SiLU, down, weighted sum
  double per_expert_us = 0;
  double half_width = 0;  // 0: compute efficiency independent of the width
  bool serial = false;
  std::string source;

  bool empty() const { return source.empty(); }
};

struct HardwareSpec {
  std::string name;
  std::string description;
  int devices_per_chip = 1;
  double peak_flops_bf16_per_chip = 0;  // FLOP/s, dense
  double peak_flops_fp8_per_chip = 0;
  double hbm_bandwidth_per_chip = 0;  // bytes/s
  double hbm_capacity_per_chip = 0;   // bytes
  Topology topology = Topology::kSwitch;
  int links_per_chip = 0;
  double link_bandwidth_per_direction = 0;  // bytes/s, one link, one way
  // Fixed cost of one collective launch on this fabric (µs), on top of its
  // bandwidth term: "interconnect.collective_latency_us" {"all_reduce",
  // "all_to_all"}, 0 when absent. Only the simulated backend adds them.
  double allreduce_latency_us = 0;
  double all_to_all_latency_us = 0;
  // The file's "measured_kernels", if any (empty() otherwise).
  KernelProfile measured;

  double peak_flops(Dtype d) const;  // per device
  double hbm_bandwidth() const { return hbm_bandwidth_per_chip / devices_per_chip; }
  double hbm_capacity() const { return hbm_capacity_per_chip / devices_per_chip; }
};

// The subset of a model's shape the cost model needs.
struct ModelSpec {
  std::string name;
  std::string description;
  int layers = 0;
  int hidden = 0;
  int vocab = 0;
  // Full-attention layers: "mha" (GQA when kv_heads < heads) or "mla".
  AttentionKind attention = AttentionKind::kMha;
  int heads = 0;
  int kv_heads = 0;     // mha
  int head_dim = 0;     // mha
  int q_lora_rank = 0;  // mla (0: no Q-LoRA)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  // Hybrid models: the last layer of each group of `layer_group_size` is full
  // attention, the others are `linear` (kKda or kGla). 0: no linear layers.
  int layer_group_size = 0;
  AttentionKind linear = AttentionKind::kGla;
  int linear_head_dim = 0;
  // FFN: layers [0, dense_layers) are dense SwiGLU (dense_inter), the rest MoE.
  int experts = 0;
  int top_k = 0;
  int expert_inter = 0;  // one routed expert's SwiGLU intermediate size
  int shared_experts = 0;
  int shared_inter = 0;  // one shared expert's intermediate size
  int dense_layers = 0;
  int dense_inter = 0;

  int moe_layers() const { return layers - dense_layers; }
  int full_attention_layers() const;
  int linear_layers() const { return layers - full_attention_layers(); }
  // INVALID_ARGUMENT naming the first field out of range or inconsistent.
  Status Validate() const;
};

// The data/ directory of the source tree this binary was built from.
std::string DefaultCatalogDir();
// Base names (without .json) of data files in `dir`/hardware or `dir`/models,
// sorted. Empty when the folder is missing.
std::vector<std::string> HardwareNames(const std::string& dir);
std::vector<std::string> ModelNames(const std::string& dir);

// Reads `dir`/hardware/`name`.json. NOT_FOUND listing the known names for an
// unknown name; INVALID_ARGUMENT (with the file) for bad JSON or a field that
// is missing, mistyped or out of range.
Result<HardwareSpec> LoadHardware(const std::string& dir, const std::string& name);
// `name_or_path`: a catalogue name (`dir`/models/NAME.json), else a path to an
// HF config.json or a directory holding one (engine/model_loader/hf_config.h
// reads it; the name is the directory's). NOT_FOUND listing the known names
// when it is neither; errors of the file otherwise.
Result<ModelSpec> LoadModel(const std::string& dir, const std::string& name_or_path);

// Parses one catalogue file's JSON text; `source` names it in errors.
Result<HardwareSpec> ParseHardwareJson(const std::string& text, const std::string& source);
Result<ModelSpec> ParseModelJson(const std::string& text, const std::string& source);

// The cost model's view of an engine ModelConfig (an MoE block in every layer
// past first_k_dense_replace; the shared intermediate is counted as one
// shared expert of that size).
ModelSpec SpecFromModelConfig(const ModelConfig& c);

}  // namespace sy::engine::costmodel
