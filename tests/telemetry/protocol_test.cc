#include "telemetry/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>

#include "base/status_matchers.h"
#include "tests/telemetry/samples.h"

namespace sy::telemetry {
namespace {

using ::nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<Message> Stamped() {
  std::vector<Message> msgs = testing::SampleMessages();
  uint64_t seq = 3;
  for (Message& m : msgs) {
    Envelope& env = MutableEnvelopeOf(m);
    env.run = "run-42";
    env.seq = seq++;
    env.t_us = 123456;
  }
  return msgs;
}

TEST(ProtocolTest, EveryTopicRoundTrips) {
  std::vector<std::string> topics;
  for (const Message& m : Stamped()) {
    WireMessage w = Encode(m);
    topics.push_back(w.topic);
    Result<Message> back = Decode(w.topic, w.body);
    ASSERT_THAT(back, IsOk()) << w.topic;
    EXPECT_EQ(back->index(), m.index());
    EXPECT_EQ(TopicOf(*back), w.topic);
    EXPECT_EQ(ToJson(*back), ToJson(m)) << w.topic;
    EXPECT_EQ(EnvelopeOf(*back).run, "run-42");
    EXPECT_EQ(EnvelopeOf(*back).seq, EnvelopeOf(m).seq);
  }
  EXPECT_THAT(topics,
              ::testing::ElementsAre("meta", "step", "spans", "kstats", "occupancy", "experts",
                                     "request", "event", "heartbeat", "requests"));
}

TEST(ProtocolTest, EnvelopeUsesWireNames) {
  json j = ToJson(Stamped()[1]);
  EXPECT_EQ(j["v"], kSchemaVersion);
  EXPECT_EQ(j["run"], "run-42");
  EXPECT_EQ(j["seq"], 4);
  EXPECT_EQ(j["t"], 123456);
  EXPECT_FALSE(j.contains("env"));
}

TEST(ProtocolTest, LargestSeqRoundTrips) {
  Message m = Stamped()[1];
  MutableEnvelopeOf(m).seq = std::numeric_limits<uint64_t>::max();
  WireMessage w = Encode(m);
  Result<Message> back = Decode(w.topic, w.body);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(EnvelopeOf(*back).seq, std::numeric_limits<uint64_t>::max());
}

TEST(ProtocolTest, InvalidJsonAndNonObjectNameTheTopic) {
  EXPECT_THAT(Decode("step", "{\"v\":1,"), StatusIs(StatusCode::kInvalidArgument,
                                                    AllOf(HasSubstr("'step'"), HasSubstr("JSON"))));
  EXPECT_THAT(Decode("meta", "[1,2]"),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'meta'"), HasSubstr("not a JSON object"))));
  EXPECT_THAT(Decode("event", ""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'event'")));
  EXPECT_THAT(Decode("step", "\"\xff\xfe\""), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ProtocolTest, UnknownTopic) {
  EXPECT_THAT(Decode("gossip", "{}"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown topic 'gossip'")));
  EXPECT_THAT(Decode("", "{}"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("unknown topic")));
}

TEST(ProtocolTest, WrongSchemaVersionIsReportedAsSuch) {
  json j = ToJson(Stamped()[0]);
  j["v"] = kSchemaVersion + 1;
  j.erase("model");  // the version is checked before any other field
  EXPECT_THAT(FromJson("meta", j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("schema version 2"), HasSubstr("'meta'"))));
  j["v"] = "1";
  EXPECT_THAT(FromJson("meta", j), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'v'")));
}

// Fields added to a message after its first release; absent, they decode as
// 0 (OptionalFieldsDecodeAsZeroWhenAbsent).
bool IsOptional(const std::string& topic, const std::string& key) {
  return (topic == "request" && (key == "cached_tokens" || key == "preemptions")) ||
         (topic == "meta" && (key == "policy" || key == "backend")) ||
         (topic == "experts" &&
          (key == "phy2log" || key == "slot_device" || key == "balancedness" || key == "steps"));
}

// Every other top-level field of every topic is required; removing any one of
// them must be reported by name.
TEST(ProtocolTest, EveryMissingFieldIsNamed) {
  int checked = 0;
  for (const Message& m : Stamped()) {
    const std::string topic(TopicOf(m));
    const json full = ToJson(m);
    for (const auto& [key, value] : full.items()) {
      if (IsOptional(topic, key)) continue;
      json j = full;
      j.erase(key);
      EXPECT_THAT(FromJson(topic, j),
                  StatusIs(StatusCode::kInvalidArgument,
                           AllOf(HasSubstr("'" + topic + "'"), HasSubstr("'" + key + "'"))))
          << topic << "." << key;
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

// A value of the wrong JSON type is refused and named, never coerced.
TEST(ProtocolTest, EveryMistypedFieldIsNamed) {
  for (const Message& m : Stamped()) {
    const std::string topic(TopicOf(m));
    const json full = ToJson(m);
    for (const auto& [key, value] : full.items()) {
      json j = full;
      j[key] = value.is_string() ? json(5) : json("x");
      EXPECT_THAT(FromJson(topic, j),
                  StatusIs(StatusCode::kInvalidArgument, HasSubstr("'" + key + "'")))
          << topic << "." << key;
    }
  }
}

TEST(ProtocolTest, NumbersAreNotCoerced) {
  json step = ToJson(Stamped()[1]);
  json j = step;
  j["dur_us"] = 2.5;
  EXPECT_THAT(FromJson("step", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'dur_us' must be an integer")));
  j = step;
  j["running"] = true;
  EXPECT_THAT(FromJson("step", j), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'running'")));
  j = step;
  j["seq"] = -1;
  EXPECT_THAT(FromJson("step", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'seq' must not be negative")));
  j = step;
  j["running"] = int64_t{1} << 40;  // does not fit the int field
  EXPECT_THAT(FromJson("step", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'running' is out of range")));
}

TEST(ProtocolTest, NestedErrorsCarryTheirPath) {
  std::vector<Message> msgs = Stamped();
  json meta = ToJson(msgs[0]);
  meta["model"].erase("vocab");
  EXPECT_THAT(FromJson("meta", meta),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'model.vocab'")));

  json spans = ToJson(msgs[2]);
  spans["spans"][1]["dur_us"] = "long";
  EXPECT_THAT(FromJson("spans", spans),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'spans[1].dur_us'")));

  json experts = ToJson(msgs[5]);
  experts["counts"][1][2] = nullptr;
  EXPECT_THAT(FromJson("experts", experts),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'counts[1][2]'")));

  json occ = ToJson(msgs[4]);
  occ["devices"][0] = 3;
  EXPECT_THAT(FromJson("occupancy", occ),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'devices[0]' must be an object")));

  json hb = ToJson(msgs[8]);
  hb["dropped"]["spans"] = "many";
  EXPECT_THAT(FromJson("heartbeat", hb),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'dropped.spans'")));

  json ev = ToJson(msgs[7]);
  ev["detail"] = json::array();
  EXPECT_THAT(FromJson("event", ev),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'detail' must be an object")));
}

TEST(ProtocolTest, HybridPoolFieldsRoundTripAndAreChecked) {
  std::vector<Message> msgs = Stamped();
  json meta = ToJson(msgs[0]);
  EXPECT_EQ(meta["model"]["arch"], "bailing_hybrid");
  EXPECT_EQ(meta["model"]["attention"], json({"kda", "mla"}));
  EXPECT_EQ(meta["state_slots_per_device"], 8);
  json occ = ToJson(msgs[4]);
  const json& d0 = occ["devices"][0];
  EXPECT_EQ(d0["state_slots_used"], 2);
  EXPECT_EQ(d0["state_slots_total"], 8);
  EXPECT_EQ(d0["kv_bytes_used"], 10 * 20480);
  EXPECT_EQ(d0["kv_bytes_total"], 64 * 20480);
  EXPECT_EQ(d0["state_bytes_used"], 2 * 74752);
  EXPECT_EQ(d0["state_bytes_total"], 8 * 74752);

  // Byte counts beyond 32 bits (a real device pool) survive the trip.
  json big = occ;
  big["devices"][1]["kv_bytes_total"] = int64_t{80} << 30;
  Result<Message> m = FromJson("occupancy", big);
  ASSERT_THAT(m.status(), IsOk());
  EXPECT_EQ(std::get<Occupancy>(*m).devices[1].kv_bytes_total, int64_t{80} << 30);
  big["devices"][1]["state_slots_total"] = int64_t{1} << 40;
  EXPECT_THAT(FromJson("occupancy", big),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'devices[1].state_slots_total' is out of range")));

  json j = meta;
  j["model"]["attention"][1] = "rnn";
  EXPECT_THAT(FromJson("meta", j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'model.attention[1]'"), HasSubstr("\"rnn\""))));
  j = meta;
  j["model"]["attention"] = {"mla"};
  EXPECT_THAT(FromJson("meta", j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'model.attention'"), HasSubstr("one per layer"))));
  j = meta;
  j["model"]["attention"] = "kda";
  EXPECT_THAT(FromJson("meta", j), StatusIs(StatusCode::kInvalidArgument,
                                            HasSubstr("'model.attention' must be an array")));
  j = meta;
  j["model"].erase("arch");
  EXPECT_THAT(FromJson("meta", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'model.arch'")));
  j = occ;
  j["devices"][0].erase("state_bytes_used");
  EXPECT_THAT(FromJson("occupancy", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'devices[0].state_bytes_used'")));
}

TEST(ProtocolTest, PrefixCacheAndRequestFieldsRoundTrip) {
  std::vector<Message> msgs = Stamped();
  json occ = ToJson(msgs[4]);
  const json& d0 = occ["devices"][0];
  EXPECT_EQ(d0["cache_tokens"], 96);
  EXPECT_EQ(d0["cache_nodes"], 5);
  EXPECT_EQ(d0["cache_slots"], 1);
  EXPECT_EQ(d0["cache_hit_rate"], 0.375);
  EXPECT_EQ(d0["cache_evicted_pages"], 12);
  json req = ToJson(msgs[6]);
  EXPECT_EQ(req["cached_tokens"], 16);
  EXPECT_EQ(req["preemptions"], 1);

  Result<Message> back = FromJson("occupancy", occ);
  ASSERT_THAT(back.status(), IsOk());
  const DeviceOccupancy& d = std::get<Occupancy>(*back).devices[0];
  EXPECT_EQ(d.cache_tokens, 96);
  EXPECT_EQ(d.cache_hit_rate, 0.375);
  // A hit rate of exactly 1 may arrive written as an integer.
  occ["devices"][0]["cache_hit_rate"] = 1;
  back = FromJson("occupancy", occ);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(std::get<Occupancy>(*back).devices[0].cache_hit_rate, 1.0);
  back = FromJson("request", req);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(std::get<RequestDone>(*back).cached_tokens, 16);
  EXPECT_EQ(std::get<RequestDone>(*back).preemptions, 1);
}

// Older engines and stored runs lack the prefix-cache and preemption fields.
TEST(ProtocolTest, OptionalFieldsDecodeAsZeroWhenAbsent) {
  std::vector<Message> msgs = Stamped();
  json occ = ToJson(msgs[4]);
  for (const char* k :
       {"cache_tokens", "cache_nodes", "cache_slots", "cache_hit_rate", "cache_evicted_pages"}) {
    occ["devices"][0].erase(k);
  }
  Result<Message> back = FromJson("occupancy", occ);
  ASSERT_THAT(back.status(), IsOk());
  const DeviceOccupancy& d = std::get<Occupancy>(*back).devices[0];
  EXPECT_EQ(d.cache_tokens, 0);
  EXPECT_EQ(d.cache_nodes, 0);
  EXPECT_EQ(d.cache_slots, 0);
  EXPECT_EQ(d.cache_hit_rate, 0.0);
  EXPECT_EQ(d.cache_evicted_pages, 0);
  EXPECT_EQ(std::get<Occupancy>(*back).devices[1].cache_nodes, 1);

  json req = ToJson(msgs[6]);
  req.erase("cached_tokens");
  req.erase("preemptions");
  back = FromJson("request", req);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(std::get<RequestDone>(*back).cached_tokens, 0);
  EXPECT_EQ(std::get<RequestDone>(*back).preemptions, 0);

  // Not every optional field means 0: an old engine's `experts` is one step.
  for (const Message& m : msgs) {
    if (!std::holds_alternative<ExpertLoad>(m)) continue;
    json ex = ToJson(m);
    ex.erase("steps");
    back = FromJson("experts", ex);
    ASSERT_THAT(back.status(), IsOk());
    EXPECT_EQ(std::get<ExpertLoad>(*back).steps, 1);
  }
}

// Optional is not lax: present, a field is checked like any other.
TEST(ProtocolTest, OptionalFieldsAreStillTyped) {
  std::vector<Message> msgs = Stamped();
  json occ = ToJson(msgs[4]);
  json j = occ;
  j["devices"][1]["cache_hit_rate"] = "high";
  EXPECT_THAT(FromJson("occupancy", j),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'devices[1].cache_hit_rate' must be a number")));
  j = occ;
  j["devices"][0]["cache_nodes"] = 2.5;
  EXPECT_THAT(FromJson("occupancy", j),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'devices[0].cache_nodes' must be an integer")));
  j = occ;
  j["devices"][0]["cache_evicted_pages"] = nullptr;
  EXPECT_THAT(FromJson("occupancy", j), StatusIs(StatusCode::kInvalidArgument,
                                                 HasSubstr("'devices[0].cache_evicted_pages'")));
  json req = ToJson(msgs[6]);
  req["preemptions"] = -1.0;
  EXPECT_THAT(FromJson("request", req), StatusIs(StatusCode::kInvalidArgument,
                                                 HasSubstr("'preemptions' must be an integer")));
}

TEST(ProtocolTest, NonFiniteHitRateIsSentAsZero) {
  Occupancy occ = std::get<Occupancy>(Stamped()[4]);
  occ.devices[0].cache_hit_rate = std::numeric_limits<double>::quiet_NaN();
  occ.devices[1].cache_hit_rate = std::numeric_limits<double>::infinity();
  WireMessage w = Encode(occ);
  Result<Message> back = Decode(w.topic, w.body);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(std::get<Occupancy>(*back).devices[0].cache_hit_rate, 0.0);
  EXPECT_EQ(std::get<Occupancy>(*back).devices[1].cache_hit_rate, 0.0);
}

TEST(ProtocolTest, RequestsSnapshotRoundTripsAndIsChecked) {
  const Message m = Stamped()[9];
  ASSERT_TRUE(std::holds_alternative<Requests>(m));
  const json full = ToJson(m);
  EXPECT_EQ(full["running"][1]["preemptions"], 1);
  EXPECT_EQ(full["waiting"][0]["device"], -1);
  EXPECT_EQ(full["waiting"][0]["first_token_us"], -1);
  Result<Message> back = FromJson("requests", full);
  ASSERT_THAT(back.status(), IsOk());
  const Requests& r = std::get<Requests>(*back);
  ASSERT_EQ(r.running.size(), 2u);
  EXPECT_EQ(r.running[0].computed, 40);
  EXPECT_EQ(r.running[1].prompt_tokens, 36);
  EXPECT_EQ(r.waiting_total, 3);

  // Every field of a listed request is required and named with its path.
  for (const auto& [key, value] : full["running"][0].items()) {
    json j = full;
    j["running"][0].erase(key);
    EXPECT_THAT(FromJson("requests", j),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("'running[0]." + key + "'")))
        << key;
  }
  json j = full;
  j["waiting"][0]["computed"] = "none";
  EXPECT_THAT(FromJson("requests", j),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("'waiting[0].computed' must be an integer")));
  j = full;
  j["running"] = json::object();
  EXPECT_THAT(FromJson("requests", j),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'running' must be an array")));
  // A total below its (capped) list contradicts itself.
  j = full;
  j["running_total"] = 1;
  EXPECT_THAT(FromJson("requests", j),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'running_total' is 1"), HasSubstr("2 entries"))));
  j = full;
  j["waiting"] = json::array();
  j["waiting_total"] = 0;
  EXPECT_THAT(FromJson("requests", j), IsOk());
}

TEST(ProtocolTest, ExtraFieldsAreIgnored) {
  json j = ToJson(Stamped()[1]);
  j["added_in_a_later_build"] = {1, 2, 3};
  EXPECT_THAT(FromJson("step", j), IsOk());
}

// ---- Commands ----

TEST(CommandCodecTest, CancelAndFlushCacheAreKnownCommands) {
  for (std::string_view c :
       {"cancel", "flush_cache", "expert_stats", "rebalance", "rebalance_auto"}) {
    EXPECT_NE(std::find(std::begin(kCommands), std::end(kCommands), c), std::end(kCommands)) << c;
  }
}

TEST(CommandCodecTest, RequestRoundTrip) {
  CommandRequest r{.id = 7, .cmd = "trace", .args = {{"level", "full"}}};
  Result<CommandRequest> back = DecodeRequest(EncodeRequest(r));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->id, 7);
  EXPECT_EQ(back->cmd, "trace");
  EXPECT_EQ(back->args, json({{"level", "full"}}));
}

TEST(CommandCodecTest, RequestDefaults) {
  Result<CommandRequest> r = DecodeRequest(R"({"cmd":"status"})");
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->id.is_null());
  EXPECT_EQ(r->args, json::object());

  r = DecodeRequest(R"({"id":"abc","cmd":"status","args":null})");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->id, "abc");
  EXPECT_EQ(r->args, json::object());
}

TEST(CommandCodecTest, MalformedRequests) {
  EXPECT_THAT(DecodeRequest("{"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("JSON")));
  EXPECT_THAT(DecodeRequest(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("JSON")));
  EXPECT_THAT(DecodeRequest("[]"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("object")));
  EXPECT_THAT(DecodeRequest(R"({"id":1})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'cmd'")));
  EXPECT_THAT(DecodeRequest(R"({"cmd":3})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'cmd' must be a string")));
  EXPECT_THAT(DecodeRequest(R"({"cmd":"trace","args":"full"})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'args' must be an object")));
  EXPECT_THAT(DecodeRequest(R"({"id":{"a":1},"cmd":"status"})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'id'")));
}

TEST(CommandCodecTest, ReplyRoundTrip) {
  CommandReply ok = OkReply(9, {{"state", "paused"}});
  Result<CommandReply> back = DecodeReply(EncodeReply(ok));
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(back->ok);
  EXPECT_EQ(back->id, 9);
  EXPECT_EQ(back->result, json({{"state", "paused"}}));
  EXPECT_EQ(json::parse(EncodeReply(ok)),
            json::parse(R"({"id":9,"ok":true,"result":{"state":"paused"}})"));

  CommandReply err = ErrorReply("x1", NotFound("no command 'fly'"));
  EXPECT_EQ(
      json::parse(EncodeReply(err)),
      json::parse(
          R"({"id":"x1","ok":false,"error":{"code":"NOT_FOUND","message":"no command 'fly'"}})"));
  back = DecodeReply(EncodeReply(err));
  ASSERT_THAT(back, IsOk());
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->error_code, "NOT_FOUND");
  EXPECT_EQ(back->error_message, "no command 'fly'");
}

TEST(CommandCodecTest, MalformedReplies) {
  EXPECT_THAT(DecodeReply("nope"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(DecodeReply(R"({"id":1})"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("ok")));
  EXPECT_THAT(DecodeReply(R"({"id":1,"ok":false})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("error")));
  EXPECT_THAT(DecodeReply(R"({"id":1,"ok":false,"error":{"code":"X"}})"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("message")));
}

}  // namespace
}  // namespace sy::telemetry
