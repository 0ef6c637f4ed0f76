// File: tests/engine/server/engine_fixture.h
//
// The engine tests' shared fixture: a small model, real ZeroMQ sockets on
// ipc:// endpoints in a private temp dir, a ControlClient for commands and a
// Subscriber for the streams.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "base/status_matchers.h"
#include "engine/server/engine.h"
#include "telemetry/control.h"
#include "telemetry/subscriber.h"

namespace sy::engine {

using nlohmann::json;
using namespace std::chrono_literals;

inline constexpr auto kPatience = 30s;  // upper bound for "eventually"; never a speed claim

inline ModelConfig SmallModel() {
  ModelConfig c;
  c.name = "test";
  c.hidden = 64;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.experts = 8;
  c.top_k = 2;
  c.expert_inter = 64;
  c.shared_inter = 64;
  c.max_seq = 256;
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;  // unique dirs within one test binary
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("sy-engine-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    pub_ = "ipc://" + (dir_ / "pub").string();
    ctl_ = "ipc://" + (dir_ / "ctl").string();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  EngineOptions Options() const {
    EngineOptions o;
    o.model = SmallModel();
    o.runner = {.devices = 2, .seed = 3, .kv_pages_per_device = 64, .page_size = 16};
    o.scheduler.max_batch_tokens = 64;
    o.scheduler.max_running = 16;
    o.workload.rate = 40;
    o.workload.max_requests = 12;
    o.workload.prompt_len = {LengthDist::Kind::kUniform, 8, 40};
    o.workload.output_len = {LengthDist::Kind::kUniform, 4, 12};
    o.publisher.endpoint = pub_;
    o.publisher.heartbeat_ms = 50;
    o.control_endpoint = ctl_;
    o.trace_level = TraceLevel::kSummary;
    o.run_id = "engine-test";
    return o;
  }

  telemetry::CommandReply Call(telemetry::ControlClient& c, const std::string& cmd,
                               json args = json::object()) {
    telemetry::CommandRequest req;
    req.cmd = cmd;
    req.args = std::move(args);
    Result<telemetry::CommandReply> r = c.Call(req, 10s);
    EXPECT_THAT(r.status(), IsOk()) << cmd;
    return r.ok() ? *r : telemetry::CommandReply{};
  }

  // Receives until `pred` holds for a message or the patience runs out.
  bool WaitFor(telemetry::Subscriber& sub,
               const std::function<bool(const telemetry::Message&)>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (std::chrono::steady_clock::now() < deadline) {
      auto m = sub.Receive(100ms);
      if (!m.ok()) {
        ADD_FAILURE() << "malformed message: " << m.status().ToString();
        continue;
      }
      if (!m->has_value()) continue;
      on_message_(**m);
      if (pred(**m)) return true;
    }
    return false;
  }

  std::filesystem::path dir_;
  std::string pub_, ctl_;
  std::function<void(const telemetry::Message&)> on_message_ = [](const telemetry::Message&) {};
};

inline int64_t StatusStep(const telemetry::CommandReply& r) {
  return r.result.value("step", int64_t{-1});
}

}  // namespace sy::engine
