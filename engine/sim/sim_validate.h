// File: engine/sim/sim_validate.h
//
// The batch checks ModelRunner::Step promises (model_runner.h), for the
// SimRunner: the same conditions in the same order with the same messages
// as the CPU runner's Validate (engine/model_executor/model_runner.cc),
// of which this is a copy: that function is private to model_runner.cc,
// which the sim may not edit. Moving both to one shared helper (e.g.
// engine/model_executor/batch_check.h) is the lead's call; the sim tests
// compare the two runners' messages, so a drift shows.
//
// Thread-safety: a pure function.
#pragma once

#include "base/status.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"

namespace sy::engine {

// OK, or INVALID_ARGUMENT naming the first bad seq and field.
Status ValidateSimBatch(const BatchInput& batch, const ModelConfig& config,
                        const ModelRunnerOptions& options);

}  // namespace sy::engine
