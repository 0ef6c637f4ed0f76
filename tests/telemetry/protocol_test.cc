#include "telemetry/protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_THAT(topics, ::testing::ElementsAre("meta", "step", "spans", "kstats", "occupancy",
                                             "experts", "request", "event", "heartbeat"));
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

// Every top-level field of every topic is required; removing any one of them
// must be reported by name.
TEST(ProtocolTest, EveryMissingFieldIsNamed) {
  int checked = 0;
  for (const Message& m : Stamped()) {
    const std::string topic(TopicOf(m));
    const json full = ToJson(m);
    for (const auto& [key, value] : full.items()) {
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

TEST(ProtocolTest, ExtraFieldsAreIgnored) {
  json j = ToJson(Stamped()[1]);
  j["added_in_a_later_build"] = {1, 2, 3};
  EXPECT_THAT(FromJson("step", j), IsOk());
}

// ---- Commands ----

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
