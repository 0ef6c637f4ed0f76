// File: engine/model_executor/runner_checks.h
//
// What every ModelRunner refuses (model_runner.h): options at Create and a
// batch at Step; and the expert map Create starts from. The CPU runner
// (model_runner.cc) and the simulated cluster's SimRunner (engine/sim) call
// these same functions, so what one refuses the other refuses with the same
// message, and a check added here guards both.
//
// The checks only read their arguments, so a runner calls them before it
// builds or touches any pool, and a refused batch leaves no trace.
//
// Thread-safety: pure functions.
#pragma once

#include "base/status.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/moe/expert_map.h"

namespace sy::engine {

// OK, or the model config's own error (ModelConfig::Validate), or
// INVALID_ARGUMENT naming the first bad option: fewer than one device, KV
// page or position per page, no state slot for a model with linear-attention
// layers, a router skew that is negative or not finite, a negative drift
// period.
Status ValidateRunnerOptions(const ModelConfig& config, const ModelRunnerOptions& options);

// The expert map a runner starts with: ExpertMap::RoundRobin, or
// ExpertMap::DeviceMajor over options.expert_phy2log when it is given (its
// refusal, INVALID_ARGUMENT, is Create's). REQUIRES: ValidateRunnerOptions
// passed.
Result<ExpertMap> StartingExpertMap(const ModelConfig& config, const ModelRunnerOptions& options);

// OK, or INVALID_ARGUMENT naming the first bad seq (its index in the batch
// and its request id) and field: a device, token, position, page or state
// slot out of range, a page table too short for the seq's positions,
// inconsistent prefix-cache fields, a temperature that is negative or not
// finite, a request id twice in the batch, or (with linear-attention layers)
// a state slot written by two seqs or copied from while it is written.
Status ValidateBatch(const BatchInput& batch, const ModelConfig& config,
                     const ModelRunnerOptions& options);

}  // namespace sy::engine
