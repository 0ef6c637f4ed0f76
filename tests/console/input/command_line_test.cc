#include "console/input/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::console {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ConsoleCommandParse, EngineCommandsBuildRequests) {
  auto c = ParseCommand("  pause ");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name, "pause");
  EXPECT_EQ(c->request.cmd, "pause");
  EXPECT_EQ(c->request.args, nlohmann::json::object());
  EXPECT_TRUE(c->request.id.is_null());
  EXPECT_FALSE(c->local);
  EXPECT_FALSE(c->needs_confirm);

  c = ParseCommand("trace full");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (nlohmann::json{{"level", "full"}}));
  EXPECT_EQ(c->text, "trace full");
  for (const char* cmd : {"resume", "status", "describe"}) {
    ASSERT_THAT(ParseCommand(cmd), IsOk()) << cmd;
  }
}

TEST(ConsoleCommandParse, UnknownCommandListsKnownOnes) {
  EXPECT_THAT(ParseCommand("explode"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("unknown command 'explode' (try: pause, resume, trace")));
  EXPECT_THAT(ParseCommand(""), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty command")));
  EXPECT_THAT(ParseCommand("PAUSE"), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ConsoleCommandParse, TraceLevelIsValidated) {
  EXPECT_THAT(
      ParseCommand("trace loud"),
      StatusIs(StatusCode::kInvalidArgument, "bad trace level 'loud': expected off|summary|full"));
  EXPECT_THAT(ParseCommand("trace"),
              StatusIs(StatusCode::kInvalidArgument, "trace needs a level: off|summary|full"));
  EXPECT_THAT(ParseCommand("trace full now"), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ConsoleCommandParse, ExtraArgumentsAreRefused) {
  EXPECT_THAT(ParseCommand("pause 5"),
              StatusIs(StatusCode::kInvalidArgument, "pause takes no arguments (got '5')"));
}

TEST(ConsoleCommandParse, StopAsksUnlessBang) {
  auto c = ParseCommand("stop");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->needs_confirm);
  c = ParseCommand("stop!");
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->needs_confirm);
  EXPECT_EQ(c->request.cmd, "stop");
  EXPECT_EQ(c->text, "stop!");
  EXPECT_THAT(ParseCommand("pause!"), StatusIs(StatusCode::kInvalidArgument, HasSubstr("'!'")));
}

TEST(ConsoleCommandParse, CancelTakesARequestIdAndAsks) {
  auto c = ParseCommand("cancel 42");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->needs_confirm);
  EXPECT_EQ(c->request.cmd, "cancel");
  EXPECT_EQ(c->request.args["id"], 42);
  EXPECT_EQ(c->text, "cancel 42");
  c = ParseCommand("cancel! 7");
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->needs_confirm);
  EXPECT_EQ(c->text, "cancel! 7");
  EXPECT_THAT(ParseCommand("cancel"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("cancel ID")));
  EXPECT_THAT(ParseCommand("cancel x1"),
              StatusIs(StatusCode::kInvalidArgument, "bad request id 'x1': expected a number"));
  EXPECT_THAT(ParseCommand("cancel 1 2"), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ConsoleCommandParse, FlushCacheAsks) {
  auto c = ParseCommand("flush_cache");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->needs_confirm);
  EXPECT_EQ(c->request.cmd, "flush_cache");
  EXPECT_THAT(ParseCommand("flush_cache now"), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ConsoleCommandParse, LocalCommands) {
  auto c = ParseCommand("quit");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->local);
  ASSERT_THAT(ParseCommand("help"), IsOk());
}

TEST(ConsoleCommandParse, RebalanceIsADryRunFirst) {
  Result<ParsedCommand> c = ParseCommand("rebalance");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.cmd, "rebalance");
  EXPECT_EQ(c->request.args, nlohmann::json::parse(R"({"dry_run":true})"));
  EXPECT_TRUE(c->preview);
  EXPECT_FALSE(c->needs_confirm);  // the plan is the question
  EXPECT_EQ(c->text, "rebalance");

  c = ParseCommand("  rebalance hierarchical 200 ");  // either order
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args,
            nlohmann::json::parse(R"({"dry_run":true,"window":200,"policy":"hierarchical"})"));
  EXPECT_EQ(c->text, "rebalance 200 hierarchical");

  const ParsedCommand apply = ConfirmedRebalance(*c);
  EXPECT_FALSE(apply.preview);
  EXPECT_EQ(apply.text, "rebalance! 200 hierarchical");
  EXPECT_EQ(apply.request.args,
            nlohmann::json::parse(R"({"dry_run":false,"window":200,"policy":"hierarchical"})"));

  c = ParseCommand("rebalance! global");  // straight to applying
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->preview);
  EXPECT_FALSE(c->needs_confirm);
  EXPECT_EQ(c->request.args, nlohmann::json::parse(R"({"dry_run":false,"policy":"global"})"));
  EXPECT_EQ(c->text, "rebalance! global");
}

TEST(ConsoleCommandParse, RebalanceArgumentsAreChecked) {
  EXPECT_THAT(ParseCommand("rebalance sideways"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("bad rebalance argument 'sideways': expected a window in steps "
                                 "or auto|global|hierarchical")));
  EXPECT_THAT(ParseCommand("rebalance 0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("at least 1 step")));
  EXPECT_THAT(ParseCommand("rebalance 10 20"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("one window")));
  EXPECT_THAT(ParseCommand("rebalance global auto"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("one policy")));
  EXPECT_THAT(ParseCommand("rebalance -5"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCommand("pause!"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("only applies to cancel, flush_cache, rebalance, switch, stop")));
}

TEST(ConsoleCommandParse, RebalanceAuto) {
  Result<ParsedCommand> c = ParseCommand("rebalance_auto 500 0.05");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->name, "rebalance_auto");
  EXPECT_EQ(c->request.cmd, "rebalance_auto");  // the engine's name
  EXPECT_EQ(c->request.args, nlohmann::json::parse(R"({"every":500,"min_gain":0.05})"));
  EXPECT_EQ(c->text, "rebalance_auto 500 0.05");
  EXPECT_FALSE(c->needs_confirm);

  c = ParseCommand("rebalance_auto 1000");  // the engine keeps its min gain
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, nlohmann::json::parse(R"({"every":1000})"));
  c = ParseCommand("rebalance_auto off");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, nlohmann::json::parse(R"({"every":0})"));
  EXPECT_EQ(c->text, "rebalance_auto off");

  for (const char* bad :
       {"rebalance_auto", "rebalance_auto soon", "rebalance_auto -1", "rebalance_auto 10 lots",
        "rebalance_auto 10 1.5", "rebalance_auto 10 0.1 x", "rebalance_auto off 0.1",
        "rebalance_auto 10 nan"}) {
    EXPECT_THAT(ParseCommand(bad), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ParseCommand("rebalance_auto 10 1.5"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected a number from 0 to 1")));
  EXPECT_THAT(ParseCommand("rebalance_auto! 10"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'!' only applies")));
}

TEST(ConsoleCommandComplete, RebalanceNamesPoliciesAndOff) {
  Completion c = Complete("reb");
  EXPECT_EQ(c.line, "rebalance");  // common prefix of rebalance, rebalance_auto
  EXPECT_THAT(c.candidates, ::testing::ElementsAre("rebalance", "rebalance_auto"));
  c = Complete("rebalance_a");
  EXPECT_EQ(c.line, "rebalance_auto ");
  c = Complete("rebalance h");
  EXPECT_EQ(c.line, "rebalance hierarchical");
  c = Complete("rebalance 100 gl");  // the word being typed, after a window
  EXPECT_EQ(c.line, "rebalance 100 global");
  c = Complete("rebalance ");
  EXPECT_THAT(c.candidates, ::testing::ElementsAre("auto", "global", "hierarchical"));
  c = Complete("rebalance_auto o");
  EXPECT_EQ(c.line, "rebalance_auto off");
  c = Complete("rebalance_auto 10 o");  // GAIN is a number: nothing to offer
  EXPECT_EQ(c.line, "rebalance_auto 10 o");
  EXPECT_TRUE(c.candidates.empty());
}

TEST(ConsoleCommandComplete, CommandNames) {
  Completion c = Complete("pa");
  EXPECT_EQ(c.line, "pause");
  EXPECT_THAT(c.candidates, ElementsAre("pause"));
  c = Complete("tr");
  EXPECT_EQ(c.line, "trace ");  // takes an argument: trailing space
  c = Complete("s");
  EXPECT_EQ(c.line, "s");  // status, switch, stop, seek: nothing in common to add
  EXPECT_THAT(c.candidates, ElementsAre("status", "switch", "stop", "seek"));
  c = Complete("st");
  EXPECT_EQ(c.line, "st");
  EXPECT_THAT(c.candidates, ElementsAre("status", "stop"));
  c = Complete("");
  EXPECT_EQ(c.candidates.size(), CommandTable().size());
  c = Complete("zz");
  EXPECT_EQ(c.line, "zz");
  EXPECT_THAT(c.candidates, IsEmpty());
}

TEST(ConsoleCommandComplete, TraceLevels) {
  EXPECT_EQ(Complete("trace f").line, "trace full");
  EXPECT_EQ(Complete("trace s").line, "trace summary");
  Completion c = Complete("trace ");
  EXPECT_THAT(c.candidates, ElementsAre("off", "summary", "full"));
  EXPECT_EQ(Complete("pause x").line, "pause x");
}

Key K(const char* name) { return Key{name}; }

void Type(CommandLineEditor& e, const std::string& s) {
  for (char c : s) e.HandleKey(c == ' ' ? K("Space") : Key{std::string(1, c)});
}

TEST(ConsoleCommandEditor, TypingEditingAndSubmit) {
  CommandLineEditor e;
  e.Open();
  Type(e, "pase");
  e.HandleKey(K("Left"));
  e.HandleKey(K("Left"));
  Type(e, "u");
  EXPECT_EQ(e.text(), "pause");
  EXPECT_EQ(e.cursor(), 3);
  e.HandleKey(K("End"));
  e.HandleKey(K("Backspace"));
  EXPECT_EQ(e.text(), "paus");
  e.HandleKey(K("Home"));
  e.HandleKey(K("Delete"));
  EXPECT_EQ(e.text(), "aus");
  e.HandleKey(K("F5"));  // unknown named keys are ignored
  EXPECT_EQ(e.text(), "aus");
  EXPECT_EQ(e.HandleKey(K("Enter")), CommandLineEditor::Outcome::kSubmit);
  EXPECT_EQ(e.HandleKey(K("Esc")), CommandLineEditor::Outcome::kCancel);
}

TEST(ConsoleCommandEditor, TabCompletesAndShowsCandidates) {
  CommandLineEditor e;
  e.Open();
  Type(e, "st");
  e.HandleKey(K("Tab"));
  EXPECT_EQ(e.text(), "st");
  EXPECT_THAT(e.candidates(), ElementsAre("status", "stop"));
  Type(e, "o");
  EXPECT_THAT(e.candidates(), IsEmpty());
  e.HandleKey(K("Tab"));
  EXPECT_EQ(e.text(), "stop");
}

TEST(ConsoleCommandEditor, HistoryUpDownKeepsDraft) {
  CommandLineEditor e;
  e.Remember("pause");
  e.Remember("trace full");
  e.Remember("trace full");  // duplicate skipped
  e.Open();
  Type(e, "dr");
  e.HandleKey(K("Up"));
  EXPECT_EQ(e.text(), "trace full");
  e.HandleKey(K("Up"));
  EXPECT_EQ(e.text(), "pause");
  e.HandleKey(K("Up"));  // stays at the oldest
  EXPECT_EQ(e.text(), "pause");
  e.HandleKey(K("Down"));
  e.HandleKey(K("Down"));
  EXPECT_EQ(e.text(), "dr");
}

TEST(ConsoleCommandEditor, BackspaceOnEmptyLineCancels) {
  CommandLineEditor e;
  e.Open();
  EXPECT_EQ(e.HandleKey(K("Backspace")), CommandLineEditor::Outcome::kCancel);
}

TEST(ConsoleCommandEditor, Utf8Input) {
  CommandLineEditor e;
  e.Open();
  e.HandleKey(Key{"é"});
  e.HandleKey(Key{"x"});
  e.HandleKey(K("Left"));
  e.HandleKey(K("Backspace"));
  EXPECT_EQ(e.text(), "x");
}

}  // namespace
}  // namespace sy::console

namespace sy::console {
namespace {

TEST(ConsoleCommandParse, ExpertStatsWindowAndDump) {
  Result<ParsedCommand> c = ParseCommand("expert_stats 100 dump /tmp/load.json");
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->request.cmd, "expert_stats");
  EXPECT_EQ(c->request.args["window"], 100);
  EXPECT_EQ(c->request.args["path"], "/tmp/load.json");
  EXPECT_EQ(c->text, "expert_stats 100 dump /tmp/load.json");
  c = ParseCommand("expert_stats");
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_TRUE(c->request.args.empty());
  EXPECT_THAT(ParseCommand("expert_stats dump"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("usage: expert_stats")));
  EXPECT_THAT(ParseCommand("expert_stats 10 20"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad expert_stats argument '20'")));
  EXPECT_THAT(ParseCommand("expert_stats hot"), StatusIs(StatusCode::kInvalidArgument));
}

// Beside a line being typed: the usage and help of the command it names.
TEST(ConsoleCommandLine, InlineUsageOfTheCommandBeingTyped) {
  EXPECT_EQ(InlineUsage("trace f"),
            "trace off|summary|full  set the trace level (full adds per-kernel spans)");
  EXPECT_EQ(InlineUsage("  switch! t"),
            "switch tp|ep  move the experts to the TP or EP layout (y/n; ! skips)");
  EXPECT_EQ(InlineUsage("reb"), "");  // rebalance, rebalance_auto
  EXPECT_EQ(InlineUsage("rebalance_"),
            "rebalance_auto N|off  auto-rebalance every N steps (add GAIN: min gain)");
  EXPECT_EQ(InlineUsage("pau"), "pause  pause / resume the scheduler (nothing is lost)");
  EXPECT_EQ(InlineUsage("pau x"), "");  // a prefix only counts while it is the whole line
  EXPECT_EQ(InlineUsage("nonsense"), "");
  EXPECT_EQ(InlineUsage(""), "");
}

// The `/` filter line's editor: Tab completes nothing; Open() starts from
// the filter in force.
TEST(ConsoleCommandLine, EditorWithoutCompletionAndWithInitialText) {
  CommandLineEditor e(/*complete=*/false);
  e.Open("tr");
  EXPECT_EQ(e.text(), "tr");
  EXPECT_EQ(e.cursor(), 2);
  e.HandleKey(Key{"Tab"});
  EXPECT_EQ(e.text(), "tr");
  EXPECT_TRUE(e.candidates().empty());
  CommandLineEditor c;
  c.Open("tr");
  c.HandleKey(Key{"Tab"});
  EXPECT_EQ(c.text(), "trace ");
}

}  // namespace
}  // namespace sy::console
