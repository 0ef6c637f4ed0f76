// The `experts` message's EPLB fields (phy2log, slot_device, balancedness):
// optional on the wire, strictly typed when present.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "base/status_matchers.h"
#include "telemetry/protocol.h"
#include "tests/telemetry/samples.h"

namespace sy::telemetry {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

ExpertLoad SampleLoad() {
  for (const Message& m : testing::SampleMessages()) {
    if (const auto* load = std::get_if<ExpertLoad>(&m)) {
      ExpertLoad out = *load;
      out.env.run = "run-42";
      out.env.seq = 8;
      return out;
    }
  }
  return {};
}

// The placement and balancedness fields of `experts` (EPLB): present they
// round-trip exactly, absent (an engine before EPLB, a stored v3 run) they
// decode as empty, mistyped they are refused with their path.
TEST(ExpertLoadProtocolTest, ExpertPlacementRoundTripsAndIsOptional) {
  const ExpertLoad sent = SampleLoad();
  WireMessage w = Encode(sent);
  json j = json::parse(w.body);
  EXPECT_EQ(j["phy2log"], json::parse("[[0,1,2,2,3,0],[0,1,1,2,3,1]]"));
  EXPECT_EQ(j["slot_device"], json::parse("[0,0,0,1,1,1]"));
  ASSERT_EQ(j["balancedness"].size(), 2u);
  Result<Message> back = Decode(w.topic, w.body);
  ASSERT_THAT(back.status(), IsOk());
  const ExpertLoad& got = std::get<ExpertLoad>(*back);
  EXPECT_EQ(got.phy2log, sent.phy2log);
  EXPECT_EQ(got.slot_device, sent.slot_device);
  EXPECT_EQ(got.balancedness, sent.balancedness);  // bit-exact doubles
  EXPECT_EQ(got.balancedness[1], 105.0 / 145.0);

  json old = j;
  for (const char* k : {"phy2log", "slot_device", "balancedness"}) old.erase(k);
  back = FromJson("experts", old);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_TRUE(std::get<ExpertLoad>(*back).phy2log.empty());
  EXPECT_TRUE(std::get<ExpertLoad>(*back).slot_device.empty());
  EXPECT_TRUE(std::get<ExpertLoad>(*back).balancedness.empty());
  EXPECT_EQ(std::get<ExpertLoad>(*back).counts, sent.counts);

  json bad = j;
  bad["phy2log"][1][2] = "x";
  EXPECT_THAT(FromJson("experts", bad), StatusIs(StatusCode::kInvalidArgument,
                                                 HasSubstr("'phy2log[1][2]' must be an integer")));
  bad = j;
  bad["phy2log"] = json::array({1, 2});
  EXPECT_THAT(FromJson("experts", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'phy2log[0]' must be an array")));
  bad = j;
  bad["slot_device"][0] = 1.5;
  EXPECT_THAT(FromJson("experts", bad), StatusIs(StatusCode::kInvalidArgument,
                                                 HasSubstr("'slot_device[0]' must be an integer")));
  bad = j;
  bad["balancedness"][0] = nullptr;
  EXPECT_THAT(FromJson("experts", bad), StatusIs(StatusCode::kInvalidArgument,
                                                 HasSubstr("'balancedness[0]' must be a number")));
  bad = j;
  bad["balancedness"] = 0.5;
  EXPECT_THAT(FromJson("experts", bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'balancedness' must be an array")));
}

TEST(ExpertLoadProtocolTest, NonFiniteBalancednessIsSentAsZero) {
  ExpertLoad load = SampleLoad();
  load.balancedness = {std::numeric_limits<double>::quiet_NaN(), 0.5,
                       -std::numeric_limits<double>::infinity()};
  WireMessage w = Encode(load);
  Result<Message> back = Decode(w.topic, w.body);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(std::get<ExpertLoad>(*back).balancedness, (std::vector<double>{0.0, 0.5, 0.0}));
}

}  // namespace
}  // namespace sy::telemetry
