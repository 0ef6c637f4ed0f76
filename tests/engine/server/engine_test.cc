// The engine loop end to end, in process: a small model, real ZeroMQ sockets
// on ipc:// endpoints in a private temp dir, a ControlClient for commands and
// a Subscriber for the streams.
#include "engine/server/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <thread>
#include <zmq.hpp>

#include "base/status_matchers.h"
#include "telemetry/control.h"
#include "telemetry/subscriber.h"
#include "tests/engine/server/engine_fixture.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

TEST_F(EngineTest, ServesCommandsAndStreamsUntilStopped) {
  auto engine = Engine::Create(Options());
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });

  std::vector<telemetry::RequestDone> done;
  std::vector<telemetry::Event> commands;
  bool saw_spans = false, saw_stop_event = false, saw_paused_meta = false;
  bool saw_busy_occupancy = false;
  // One page: 2 layers x 16 tokens x K and V of kv_heads x head_dim floats.
  const ModelConfig model = SmallModel();
  const int64_t page_bytes = int64_t{2} * 16 * 2 * model.kv_heads * model.head_dim * 4;
  on_message_ = [&](const telemetry::Message& m) {
    if (auto* o = std::get_if<telemetry::Occupancy>(&m)) {
      for (const telemetry::DeviceOccupancy& dev : o->devices) {
        EXPECT_EQ(dev.kv_bytes_total, dev.kv_pages_total * page_bytes);
        EXPECT_EQ(dev.kv_bytes_used, dev.kv_pages_used * page_bytes);
        EXPECT_EQ(dev.state_slots_total, 0);
        EXPECT_EQ(dev.state_bytes_used, 0);
        if (dev.kv_pages_used > 0 && dev.kv_bytes_used > 0) saw_busy_occupancy = true;
      }
    }
    if (auto* r = std::get_if<telemetry::RequestDone>(&m)) done.push_back(*r);
    if (std::holds_alternative<telemetry::Spans>(m)) saw_spans = true;
    if (auto* meta = std::get_if<telemetry::Meta>(&m); meta && meta->paused) saw_paused_meta = true;
    if (auto* e = std::get_if<telemetry::Event>(&m)) {
      if (e->kind == "lifecycle" && e->name == "stop") saw_stop_event = true;
      if (e->kind == "command") commands.push_back(*e);
    }
  };

  // describe: the Meta body without the stream envelope.
  telemetry::CommandReply d = Call(**client, "describe");
  ASSERT_TRUE(d.ok) << d.error_message;
  EXPECT_EQ(d.result["model"]["preset"], "test");
  EXPECT_EQ(d.result["devices"], 2);
  EXPECT_EQ(d.result["layout"], "EP");
  EXPECT_EQ(d.result["trace_level"], "summary");
  EXPECT_EQ(d.result["expert_device"].size(), 8u);
  EXPECT_EQ(d.result["kv_pages_per_device"], 64);
  for (const char* envelope : {"v", "run", "seq", "t"}) EXPECT_FALSE(d.result.contains(envelope));
  // A model without linear layers: every layer MHA, no state pool.
  EXPECT_EQ(d.result["model"]["arch"], "moe");
  EXPECT_EQ(d.result["model"]["attention"], json::array({"mha", "mha"}));
  EXPECT_EQ(d.result["state_slots_per_device"], 0);
  EXPECT_EQ(d.result["pools"]["kv_page_bytes"], page_bytes);
  EXPECT_EQ(d.result["pools"]["kv_bytes_per_device"], 64 * page_bytes);
  EXPECT_EQ(d.result["pools"]["kv_pages_per_device"], 64);
  EXPECT_EQ(d.result["pools"]["state_slots_per_device"], 0);
  EXPECT_EQ(d.result["pools"]["state_slot_bytes"], 0);

  // The engine serves: steps arrive on the stream.
  ASSERT_TRUE(
      WaitFor(**sub, [](const auto& m) { return std::holds_alternative<telemetry::Step>(m); }));

  // pause: steps stop advancing; a second pause is harmless.
  telemetry::CommandReply p = Call(**client, "pause");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.result["state"], "paused");
  EXPECT_TRUE(Call(**client, "pause").ok);
  const int64_t paused_at = StatusStep(Call(**client, "status"));
  std::this_thread::sleep_for(300ms);
  telemetry::CommandReply st = Call(**client, "status");
  EXPECT_EQ(st.result["state"], "paused");
  EXPECT_EQ(StatusStep(st), paused_at);
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return saw_paused_meta; }));

  // resume, then trace full: spans flow.
  telemetry::CommandReply r = Call(**client, "resume");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.result["state"], "running");
  telemetry::CommandReply t = Call(**client, "trace", {{"level", "full"}});
  ASSERT_TRUE(t.ok) << t.error_message;
  EXPECT_EQ(t.result["level"], "full");
  EXPECT_EQ(t.result["previous"], "summary");
  EXPECT_TRUE(WaitFor(**sub, [&](const auto&) { return saw_spans; }));

  // Bad commands are refused and change nothing.
  telemetry::CommandReply bad = Call(**client, "trace", {{"level", "verbose"}});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.error_code, "INVALID_ARGUMENT");
  EXPECT_THAT(bad.error_message, HasSubstr("summary"));
  telemetry::CommandReply missing = Call(**client, "trace");
  EXPECT_EQ(missing.error_code, "INVALID_ARGUMENT");
  telemetry::CommandReply unknown = Call(**client, "explode");
  EXPECT_FALSE(unknown.ok);
  EXPECT_EQ(unknown.error_code, "NOT_FOUND");
  EXPECT_THAT(unknown.error_message, HasSubstr("describe"));
  EXPECT_EQ(Call(**client, "status").result["trace_level"], "full");

  // Every request of the bounded workload completes with sane latencies.
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return done.size() >= 12; }))
      << "only " << done.size() << " requests done";
  for (const telemetry::RequestDone& q : done) {
    EXPECT_GE(q.ttft_us, 0);
    EXPECT_LE(q.ttft_us, q.e2e_us);
    EXPECT_GE(q.output_tokens, 1);
    EXPECT_GE(q.prompt_tokens, 8);
    EXPECT_TRUE(q.finish == "eos" || q.finish == "length") << q.finish;
  }
  telemetry::CommandReply fin = Call(**client, "status");
  EXPECT_EQ(fin.result["finished"], 12);
  EXPECT_EQ(fin.result["running"], 0);
  // status shows both pools of every device; drained now, so only the
  // prefix cache holds pages.
  ASSERT_EQ(fin.result["pools"].size(), 2u);
  for (const json& dev : fin.result["pools"]) {
    EXPECT_EQ(dev["kv_pages_used"].get<int64_t>() * 16, dev["cache_tokens"].get<int64_t>());
    EXPECT_EQ(dev["kv_pages_total"], 64);
    EXPECT_EQ(dev["kv_bytes_used"].get<int64_t>(),
              dev["kv_pages_used"].get<int64_t>() * page_bytes);
    EXPECT_EQ(dev["kv_bytes_total"], 64 * page_bytes);
    EXPECT_EQ(dev["state_slots_used"], 0);
    EXPECT_EQ(dev["state_slots_total"], 0);
    EXPECT_EQ(dev["state_bytes_total"], 0);
    EXPECT_EQ(dev["running"], 0);
  }
  // The occupancy stream carried bytes consistent with the pages.
  EXPECT_TRUE(saw_busy_occupancy);

  telemetry::CommandReply s = Call(**client, "stop");
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.result["state"], "stopping");
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_TRUE(WaitFor(**sub, [&](const auto&) { return saw_stop_event; }));
  EXPECT_EQ((*engine)->stats().finished, 12);

  // Every command was mirrored on the event stream: received, then done or failed.
  auto find = [&](const std::string& name, const std::string& phase) -> const telemetry::Event* {
    for (const telemetry::Event& e : commands) {
      if (e.name == name && e.phase == phase) return &e;
    }
    return nullptr;
  };
  EXPECT_NE(find("pause", "received"), nullptr);
  const telemetry::Event* paused = find("pause", "done");
  ASSERT_NE(paused, nullptr);
  EXPECT_EQ(paused->detail["result"]["state"], "paused");
  const telemetry::Event* failed = find("explode", "failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->detail["error"]["code"], "NOT_FOUND");
  EXPECT_TRUE(failed->detail.contains("id"));
}

TEST_F(EngineTest, BoundedBurstDrainsAndExits) {
  EngineOptions o = Options();
  o.workload.burst = true;
  o.workload.max_requests = 6;
  o.workload.ignore_eos = true;
  o.workload.output_len = {LengthDist::Kind::kFixed, 5, 5};
  o.exit_when_done = true;
  o.trace_level = TraceLevel::kOff;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  ASSERT_THAT((*engine)->Run(), IsOk());
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.finished, 6);
  EXPECT_EQ(st.generated, 30);
  EXPECT_EQ(st.rejected, 0);
}

// Ten requests of up to 80 positions on 2 x 128: decode growth must retract.
EngineOptions PressureOptions(EngineOptions o) {
  o.runner.kv_pages_per_device = 8;  // 128 positions per device, 2 devices
  o.scheduler.admission_reserve_pages = 0;
  o.workload.burst = true;
  o.workload.max_requests = 10;
  o.workload.ignore_eos = true;
  o.workload.prompt_len = {LengthDist::Kind::kUniform, 20, 40};
  o.workload.output_len = {LengthDist::Kind::kFixed, 40, 40};
  return o;
}

TEST_F(EngineTest, KvPressurePreemptsButCompletesEveryRequest) {
  EngineOptions o = PressureOptions(Options());
  o.exit_when_done = true;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  ASSERT_THAT((*engine)->Run(), IsOk());
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.finished, 10);
  EXPECT_EQ(st.generated, 400);
  EXPECT_GT(st.preempted, 0);
}

TEST_F(EngineTest, RetractionsArePublishedAsEvents) {
  EngineOptions o = PressureOptions(Options());
  o.start_paused = true;  // resumed once the subscriber hears the engine
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  ASSERT_TRUE(WaitFor(**sub, [](const telemetry::Message& m) {
    return std::holds_alternative<telemetry::Heartbeat>(m);
  }));
  ASSERT_TRUE(Call(**client, "resume").ok);
  bool retracted = false;
  EXPECT_TRUE(WaitFor(**sub, [&](const telemetry::Message& m) {
    auto* e = std::get_if<telemetry::Event>(&m);
    if (e && e->kind == "scheduler" && e->name == "retract") {
      EXPECT_TRUE(e->detail.contains("id"));
      EXPECT_GE(e->detail.value("device", -1), 0);
      EXPECT_GT(e->detail.value("computed", 0), 0);
      retracted = true;
    }
    return retracted;
  }));
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
}

TEST_F(EngineTest, CancelFlushCacheExpertStatsAndRequestProgress) {
  EngineOptions o = Options();
  o.start_paused = true;  // arrivals queue up, nothing runs yet
  o.workload.burst = true;
  o.workload.max_requests = 4;
  o.workload.ignore_eos = true;
  o.workload.output_len = {LengthDist::Kind::kFixed, 20, 20};
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto sub = telemetry::Subscriber::Connect({.endpoint = pub_});
  ASSERT_THAT(sub.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  std::map<int64_t, std::string> finish;
  bool saw_progress = false;
  on_message_ = [&](const telemetry::Message& m) {
    if (auto* r = std::get_if<telemetry::RequestDone>(&m)) finish[r->id] = r->finish;
    if (auto* q = std::get_if<telemetry::Requests>(&m); q && q->running_total > 0) {
      EXPECT_EQ(q->running.size(), static_cast<size_t>(q->running_total));
      for (const telemetry::RequestProgress& p : q->running) EXPECT_GE(p.device, 0);
      saw_progress = true;
    }
  };
  // Waiting (paused), then cancelled: it leaves with finish "cancelled".
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) {
    return Call(**client, "status").result.value("waiting", 0) == 4;
  }));
  telemetry::CommandReply c = Call(**client, "cancel", {{"id", 1}});
  ASSERT_TRUE(c.ok) << c.error_message;
  EXPECT_EQ(c.result["finish"], "cancelled");
  EXPECT_EQ(Call(**client, "cancel", {{"id", 1}}).error_code, "NOT_FOUND");
  EXPECT_EQ(Call(**client, "cancel", {{"id", "one"}}).error_code, "INVALID_ARGUMENT");
  ASSERT_TRUE(Call(**client, "resume").ok);
  ASSERT_TRUE(WaitFor(**sub, [&](const auto&) { return finish.size() == 4 && saw_progress; }));
  EXPECT_EQ(finish[1], "cancelled");
  for (int64_t id = 2; id <= 4; ++id) EXPECT_EQ(finish[id], "length") << id;

  // Drained: only the prefix cache holds pages; flush_cache returns them all.
  json pools = Call(**client, "status").result["pools"];
  int64_t cached = 0;
  for (const json& d : pools) cached += d["cache_tokens"].get<int64_t>();
  EXPECT_GT(cached, 0);
  telemetry::CommandReply f = Call(**client, "flush_cache");
  ASSERT_TRUE(f.ok) << f.error_message;
  EXPECT_GT(f.result["freed_pages"].get<int>(), 0);
  const telemetry::CommandReply pools_status = Call(**client, "status");  // outlives the loop
  for (const json& d : pools_status.result["pools"]) {
    EXPECT_EQ(d["kv_pages_used"], 0);
    EXPECT_EQ(d["cache_tokens"], 0);
  }

  // Routed-token statistics of the run, and a dump `moe-engine eplb` reads.
  const std::string dump = (dir_ / "experts.json").string();
  telemetry::CommandReply es = Call(**client, "expert_stats", {{"window", 0}, {"path", dump}});
  ASSERT_TRUE(es.ok) << es.error_message;
  EXPECT_EQ(es.result["balancedness"].size(), 2u);  // one per layer
  EXPECT_GT(es.result["balancedness_mean"].get<double>(), 0.0);
  EXPECT_LE(es.result["balancedness_mean"].get<double>(), 1.0);
  EXPECT_FALSE(es.result["hottest"].empty());
  std::ifstream in(dump);
  const json written = json::parse(in);
  EXPECT_EQ(written["load"].size(), 2u);
  EXPECT_EQ(written["load"][0].size(), 8u);  // experts
  EXPECT_EQ(Call(**client, "expert_stats", {{"window", "all"}}).error_code, "INVALID_ARGUMENT");
  EXPECT_EQ(Call(**client, "expert_stats", {{"window", 5000}}).error_code, "INVALID_ARGUMENT");
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_EQ((*engine)->stats().cancelled, 1);
}

TEST_F(EngineTest, StartsPausedAndStopsOnRequestStop) {
  EngineOptions o = Options();
  o.start_paused = true;
  auto engine = Engine::Create(std::move(o));
  ASSERT_THAT(engine.status(), IsOk());
  auto client = telemetry::ControlClient::Connect(ctl_);
  ASSERT_THAT(client.status(), IsOk());
  std::future<Status> run = std::async(std::launch::async, [&] { return (*engine)->Run(); });
  telemetry::CommandReply st = Call(**client, "status");
  EXPECT_EQ(st.result["state"], "paused");
  EXPECT_EQ(StatusStep(st), 0);
  EXPECT_EQ(Call(**client, "describe").result["paused"], true);
  (*engine)->RequestStop();
  ASSERT_EQ(run.wait_for(kPatience), std::future_status::ready);
  EXPECT_THAT(run.get(), IsOk());
  EXPECT_EQ((*engine)->stats().steps, 0);
}

TEST_F(EngineTest, BindFailureNamesTheEndpoint) {
  // ipc:// binds take over a stale path, so occupy a TCP port instead.
  zmq::context_t ctx;
  zmq::socket_t holder(ctx, zmq::socket_type::router);
  holder.bind("tcp://127.0.0.1:*");
  const std::string taken = holder.get(zmq::sockopt::last_endpoint);
  EngineOptions o = Options();
  o.control_endpoint = taken;
  EXPECT_THAT(Engine::Create(o).status(), StatusIs(StatusCode::kUnavailable, HasSubstr(taken)));
  o = Options();
  o.publisher.endpoint = taken;
  EXPECT_THAT(Engine::Create(o).status(), StatusIs(StatusCode::kUnavailable, HasSubstr(taken)));
}

TEST_F(EngineTest, RejectsBadOptions) {
  EngineOptions o = Options();
  o.scheduler.max_running = 1000;
  EXPECT_THAT(Engine::Create(o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_running")));
  o = Options();
  o.workload.rate = -1;
  EXPECT_THAT(Engine::Create(o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("rate")));
}

}  // namespace
}  // namespace sy::engine
