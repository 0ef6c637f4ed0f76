#include "engine/trace/span_recorder.h"

#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

TEST(SpanRecorderTest, OffRecordsNothingFullRecordsEverySpan) {
  SpanRecorder rec(2, SpanRecorder::Clock::now());
  rec.Reset(TraceLevel::kOff);
  { SpanRecorder::Scope s(&rec, "attention", 0, 4, 100, 200); }
  EXPECT_TRUE(rec.spans().empty());
  rec.Reset(TraceLevel::kFull);
  { SpanRecorder::Scope s(&rec, "attention", 0, 4, 100, 200); }
  { SpanRecorder::Scope s(&rec, "attention", 1, 4, 100, 200); }
  { SpanRecorder::Scope s(&rec, "dispatch", 1, 4, 0, 64, "comm"); }
  ASSERT_EQ(rec.spans().size(), 3u);
  EXPECT_EQ(rec.spans()[0].device, 2);
  EXPECT_EQ(rec.spans()[2].kind, "comm");
  auto stats = Summarize(rec.spans());
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].name, "attention");
  EXPECT_EQ(stats[0].count, 2);
  EXPECT_EQ(stats[0].flops, 200);
  EXPECT_EQ(stats[1].bytes, 64);
}

TEST(SpanRecorderTest, TraceLevelsParseAndRejectUnknown) {
  EXPECT_EQ(ParseTraceLevel("full").value(), TraceLevel::kFull);
  EXPECT_EQ(TraceLevelName(TraceLevel::kSummary), "summary");
  EXPECT_THAT(ParseTraceLevel("verbose"),
              StatusIs(StatusCode::kInvalidArgument, testing::HasSubstr("off, summary or full")));
}

}  // namespace
}  // namespace sy::engine
