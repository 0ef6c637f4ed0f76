// File: engine/server/scenario_cli.h
//
// `moe-engine scenario [NAME] [--variants tp,ep,auto] [--time-scale X]
//  [--t-high N] [--json FILE] [--live VARIANT --speed S]`: lists the scenarios
// (data/scenarios/), runs one headless to its results table
// (scenario_results.h), or serves one variant live for the console.
#pragma once

#include <functional>

#include "engine/server/engine.h"

namespace sy::engine {

// `serve_live` runs an engine until it stops (main.cc's, with its signal
// handling) and returns the process exit code.
int ScenarioMain(int argc, char** argv, const std::function<int(EngineOptions)>& serve_live);

}  // namespace sy::engine
