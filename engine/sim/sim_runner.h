// File: engine/sim/sim_runner.h
//
// The simulated-cluster backend (`moe-engine --backend sim`): a ModelRunner
// that computes no numbers. Everything above it (Scheduler, pools' page and
// slot bookkeeping, prefix cache, ExpertMap, EPLB planning and applying, the
// TP <-> EP switch and Algorithm 4 re-homing, telemetry) is the same code as
// under `--backend cpu`; only the kernels are replaced by the cost model of
// a real accelerator (engine/costmodel/cost_model.h), and time by a
// VirtualClock (clock.h) that each Step moves forward by the step's
// simulated duration.
//
// Per Step, per device d, per layer:
//   - attention of the seqs d serves (EP: its home seqs; TP: its 1/P block of
//     every seq's heads or latent columns), priced by their new tokens and
//     their context (start_pos), as the cost model prices a prefill chunk or
//     a decode token;
//   - routed rows from RoutingModel (routing_model.h): each seq's tokens
//     sample top_k experts per MoE layer; under EP device d computes the rows
//     of the experts the live ExpertMap places on it (a replicated expert's
//     rows split evenly over its replicas), so a hot expert makes its device
//     the straggler; under TP every device computes 1/P of every row;
//   - dispatch / combine (EP all-to-all) or all-gather / all-reduce (TP),
//     priced with the hardware's topology (interconnect.h);
//   - a collective starts when the slowest device reaches it, so imbalance
//     shows as idle time before it, exactly what the Kernels view shows.
// The step's duration is the last device's end plus the LM head; the clock
// advances by it. The figures are the cost model's for the same shapes
// (tests compare a uniform-routing Step with EstimateStep).
//
// What it returns, as the CPU runner would:
//   - next_token: a pseudo-random token that is never EOS (output length
//     comes from the workload's max_new_tokens), a pure function of
//     (request_id, position, options.seed);
//   - expert_counts: the sampled counts, [layer][expert] (dense layers zeros);
//   - spans: TraceLevel::kFull: one span per (device, layer, kernel) with
//     simulated start/duration (µs on the virtual clock); kSummary: one span
//     per (device, kernel name) whose duration is that kernel's sum over the
//     layers (layer -1), so kernel statistics match kFull at a fraction of
//     the cost; kOff: none.
//   - comm_bytes: bytes the collectives moved.
// Pools are bookkeeping only (no KV or state storage is allocated: a
// Qwen3-235B KV cache does not fit in this machine); SwitchParallelism,
// MoveRequestState and CommitExpertLayer price the bytes they would move
// (cost model reshard and link time) and advance the clock by the pause.
// StageExpertLayer's copy is priced but overlaps serving (no advance).
// Refusals are the CPU runner's, with one difference: an MHA model whose
// kv_heads divides P but is smaller (Qwen3-235B: 4 KV heads, 8 GPUs) may
// switch to TP, each KV head held by P / kv_heads devices, as the cost model
// prices it (the CPU runner's pools need P | kv_heads).
// KV capacity: kv_pages_per_device counts whole pages (every KV head, the
// whole latent) that a device's KV bytes hold; SimKvPagesPerDevice sizes it
// from the HBM. Attention over T devices (TP: T = P; EP: T = attention_tp)
// gives each of them 1/split of every page of the T homes, split being the
// devices the cache is split over as the step is priced (min(T, kv_heads)
// for MHA, 1 for an MLA latent): when split < T each part is replicated
// T / split times and a home's pool may hold only split/T of its pages
// (KvPool::SetCapacity), which the scheduler's admission and decode growth
// obey through free_pages(). CheckLayoutCapacity (seed 003 §7.1) and
// SwitchParallelism refuse a layout whose capacity a device's used pages
// exceed (FAILED_PRECONDITION, nothing changed).
// Logits: FAILED_PRECONDITION ("the sim backend computes no logits").
// expert_buffer(): nullptr (there are no weights).
//
// Thread-safety: as ModelRunner (model_runner.h).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "engine/costmodel/catalog.h"
#include "engine/costmodel/cost_model.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/sim/clock.h"
#include "engine/sim/routing_model.h"

namespace sy::engine {

struct SimOptions {
  // (The "= {}" let designated initializers omit a field under
  // -Wmissing-field-initializers.)
  costmodel::HardwareSpec hardware = {};
  costmodel::ModelSpec model =
      {};  // what is priced; the runner's ModelConfig is SimModelConfig(model)
  costmodel::Dtype compute_dtype = costmodel::Dtype::kBf16;
  costmodel::Dtype weight_dtype = costmodel::Dtype::kBf16;
  // Fractions of peak reached by real kernels (documented in
  // docs/SIMULATION.md); 1.0 everywhere gives the seeds' lower bounds.
  costmodel::Efficiency efficiency = {.compute = 0.6, .hbm = 0.8, .link = 0.7};
  // Measured rates and floors for attention (mha), router and experts in
  // place of `efficiency` (the hardware's HardwareSpec::measured, which
  // ApplySimFlags copies unless --sim-kernels flat). Empty: flat factors.
  costmodel::KernelProfile kernels = {};
  // Fixed cost of each collective (µs), added to its bandwidth term: the
  // synchronisation and protocol latency that dominates at decode sizes.
  // Not measured here (one GPU cannot); 0 by default, docs/SIMULATION.md
  // shows what it does. All-reduce: TP's attention and combine reductions
  // (and attention groups'); all-to-all: EP's dispatch and combine.
  double allreduce_latency_us = 0;
  double all_to_all_latency_us = 0;
  costmodel::Overlap overlap = costmodel::Overlap::kSerial;
  // EP layout: attention tensor parallel within groups of this many devices
  // and data parallel across the P / attention_tp groups (seed 000's
  // tp = ep = 32, dp = 8 on TPU v7x: attention_tp 4): a request's attention
  // runs on its home's group, 1/T of its FLOPs and of the attention weights
  // on each member, then an all-reduce within the group. 1: plain data-
  // parallel attention. REQUIRES: divides the devices.
  int attention_tp = 1;
  RoutingModelOptions routing = {};
  // Host time per step outside the kernels (scheduling, sampling launch).
  double step_overhead_us = 200;
  // Required; Step and the pauses advance it. Must outlive the runner.
  VirtualClock* clock = nullptr;
};

// The engine-side shape of a catalogue model (scheduler, pool bookkeeping,
// run metadata): layers, heads, KV or MLA latent and linear-attention state
// sizes, experts and top_k as the spec says; vocab and eos from the spec
// (eos = vocab - 1). INVALID_ARGUMENT if the spec is invalid or max_seq < 2.
Result<ModelConfig> SimModelConfig(const costmodel::ModelSpec& spec, int max_seq);

// KV pages of `page_size` tokens per device (EP layout: every KV head) that
// fit in the hardware's HBM after the device's share of the weights (under
// EP: its experts plus the replicated rest; the same weights stay resident
// in TP, as Moebius keeps both layouts' attention), keeping `reserve` of the
// capacity for activations (seed 003 §9.1 serves with a 0.85 memory
// fraction: reserve 0.15).
// INVALID_ARGUMENT (with both sizes) when the weights alone do not fit.
// `state_slots` recurrent-state slots per device (models with linear-
// attention layers) are paid first: each of the attention_tp devices of a
// group holds 1/split of every slot of the group's homes (fp32 state).
Result<int> SimKvPagesPerDevice(const SimOptions& sim, int devices, int page_size,
                                double reserve = 0.1, int state_slots = 0);

// INVALID_ARGUMENT if sim.clock is null, the hardware or model spec is
// invalid, the model has no routed experts, or for the ModelRunnerOptions
// ModelRunner::Create would refuse (expert_phy2log included); `config` must
// equal SimModelConfig(sim.model, config.max_seq).
Result<std::unique_ptr<ModelRunner>> CreateSimRunner(const ModelConfig& config,
                                                     const ModelRunnerOptions& options,
                                                     const SimOptions& sim);

}  // namespace sy::engine
