// File: engine/model_executor/model_runner.h
//
// ModelRunner: runs one forward step of the MoE transformer over P virtual
// devices, each a worker thread that owns its shard of the weights and its own
// KvPool. Attention is data-parallel (a request's KV lives on exactly one
// device, the one the scheduler assigned); the MoE is expert-parallel: device d
// owns experts {e : e % P == d}; each token is dispatched (all-to-all) to the
// devices owning its top-k experts, computed there, and combined back
// (all-to-all) to its home device. Embedding, attention, norms, router, the
// shared expert and the LM head are replicated on every device.
//
//   auto runner = ModelRunner::Create(config, {.devices = 4, .seed = 1});
//   StepOutput out = runner->Step(batch, TraceLevel::kFull).value();
//
// Output for a request does not depend on P, nor on which device holds it,
// beyond float summation-order noise (tested in model_runner_test).
//
// Thread-safety: Step and the pool accessors are called from one thread (the
// scheduler's). Step blocks until all device workers finish the step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/attention/linear_attention.h"
#include "engine/model/config.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"
#include "engine/trace/span_recorder.h"
#include "telemetry/protocol.h"

namespace sy::engine {

class Checkpoint;

struct ModelRunnerOptions {
  int devices = 4;
  uint64_t seed = 1;  // built weights are a pure function of (config, seed)
  // When set, weights are loaded from it instead (its config must equal the
  // runner's); it must outlive Create.
  const Checkpoint* checkpoint = nullptr;
  int kv_pages_per_device = 512;
  int page_size = 16;
  // Recurrent-state slots per device (hybrid models; ignored otherwise):
  // the most requests a device can hold at once.
  int state_slots_per_device = 64;
  // KDA/GLA layers: tokens per chunk of the chunk-wise prefill, and whether
  // prefill uses it or the token-by-token recurrence (benchmarks compare).
  int linear_chunk = 64;
  PrefillMode linear_prefill = PrefillMode::kChunked;
};

// One request's slice of a step: a prompt chunk (prefill) or one token (decode).
struct SeqInput {
  int64_t request_id = 0;
  int device = 0;               // home device (DP attention rank)
  std::vector<int32_t> tokens;  // the new tokens, positions start_pos.. start_pos+n-1
  int start_pos = 0;            // tokens already in the KV cache for this request
  std::vector<int32_t> pages;   // page table; covers start_pos + tokens.size() positions
  int state_slot = -1;          // recurrent-state slot on `device` (hybrid models), else -1
  // Prefix cache, hybrid models only (seed 002 §2.1; -1 / 0 otherwise). The
  // scheduler decides, the runner copies tensor contents on the device's
  // worker before the first layer:
  // state_copy_from: before this step, copy this slot (a prefix-cache
  //   checkpoint on `device`, holding the state after exactly start_pos
  //   tokens) into state_slot, which it overwrites whole; the checkpoint is
  //   only read. REQUIRES: start_pos > 0 (a seq at 0 starts from zeros).
  int state_copy_from = -1;
  // checkpoint_slot: snapshot the linear-attention state after the first
  //   `checkpoint_len` tokens of the sequence (recurrent and conv state of
  //   every linear layer) into this slot on `device`, overwriting it whole.
  //   The seq's own outputs and state_slot are unchanged by this (up to float
  //   rounding). REQUIRES: start_pos < checkpoint_len <= start_pos + tokens.size().
  int checkpoint_slot = -1;
  int checkpoint_len = 0;
  bool sample = true;        // produce a next token (false for a non-final prefill chunk)
  float temperature = 0.0f;  // 0: greedy
  uint64_t sample_seed = 0;  // temperature sampling RNG seed for this position
};

struct BatchInput {
  int64_t step = 0;
  std::vector<SeqInput> seqs;
};

struct SeqOutput {
  int64_t request_id = 0;
  int32_t next_token = -1;  // -1 when !sample
};

struct StepOutput {
  std::vector<SeqOutput> outputs;                   // same order as BatchInput::seqs
  std::vector<std::vector<int64_t>> expert_counts;  // [layer][expert] routed tokens this step
  std::vector<telemetry::Span> spans;               // all devices; empty at TraceLevel::kOff
  int64_t comm_bytes = 0;                           // bytes moved by collectives this step
};

class ModelRunner {
 public:
  // INVALID_ARGUMENT if the config is invalid or devices < 1.
  static Result<std::unique_ptr<ModelRunner>> Create(const ModelConfig& config,
                                                     const ModelRunnerOptions& options);
  virtual ~ModelRunner() = default;

  // INVALID_ARGUMENT if a seq names a bad device, a token outside the vocab,
  // a page table too short for its positions, or (hybrid models) no valid
  // state slot; or if its prefix-cache fields are wrong: state_copy_from or
  // checkpoint_slot set on a model without linear layers, outside the
  // device's slots, equal to its state_slot or to each other,
  // state_copy_from with start_pos == 0, checkpoint_len outside
  // (start_pos, start_pos + tokens.size()] or set without a checkpoint_slot;
  // or if, on one device, a slot is written by two seqs (state_slot or
  // checkpoint_slot) or a copy source is written in the same step. Nothing
  // is written then. A seq with start_pos == 0 starts from a zeroed state
  // slot; one with state_copy_from from a copy of that slot.
  virtual Result<StepOutput> Step(const BatchInput& batch, TraceLevel level) = 0;

  // Full next-token logits of the last token of each seq (for tests and
  // sampling checks), also for seqs with sample=false. This is a full forward:
  // it writes K/V exactly as Step does. Same validation as Step.
  virtual Result<std::vector<std::vector<float>>> Logits(const BatchInput& batch) = 0;

  virtual const ModelConfig& config() const = 0;
  virtual int devices() const = 0;
  virtual KvPool& kv_pool(int device) = 0;
  // Recurrent-state pool of `device`; empty (0 slots) for models without linear layers.
  virtual StatePool& state_pool(int device) = 0;
  // expert id -> owning device.
  virtual std::vector<int> expert_device() const = 0;
  virtual SpanRecorder::Clock::time_point epoch() const = 0;
};

}  // namespace sy::engine
