// `:switch`, `:policy` and `:calibrate`: parsing into engine requests, local
// validation with clear errors, and Tab completion.
#include "console/input/parallel_commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "console/input/command_line.h"

namespace sy::console {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(ConsoleParallelCommands, SwitchTakesTpOrEp) {
  auto c = ParseCommand("switch tp");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.cmd, "switch");
  EXPECT_EQ(c->request.args, (json{{"to", "tp"}}));
  EXPECT_EQ(c->text, "switch tp");
  EXPECT_TRUE(c->needs_confirm);  // disruptive: asks y/n
  c = ParseCommand("switch EP");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"to", "ep"}}));
  EXPECT_THAT(ParseCommand("switch"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("usage: switch tp|ep")));
  EXPECT_THAT(
      ParseCommand("switch dp"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("bad switch target 'dp': expected tp|ep")));
  EXPECT_THAT(ParseCommand("switch tp ep"), StatusIs(StatusCode::kInvalidArgument));
  c = ParseCommand("switch! tp");  // '!' skips the question
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->needs_confirm);
  EXPECT_EQ(c->request.args, (json{{"to", "tp"}}));
  // ...and stays in the text the history recalls (found by fuzz_console_command).
  EXPECT_EQ(c->text, "switch! tp");
  ASSERT_THAT(ParseCommand(c->text), IsOk());
  EXPECT_FALSE(ParseCommand(c->text)->needs_confirm);
}

TEST(ConsoleParallelCommands, PolicyModeAndKeys) {
  auto c = ParseCommand("policy");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, json::object());  // reads the policy
  c = ParseCommand("policy auto");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"mode", "auto"}}));
  c = ParseCommand("policy manual t_high=64 t_low=auto window=32 cooldown=0 queue=6 rollout=on");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"mode", "manual"},
                                   {"t_high", 64},
                                   {"t_low", "auto"},
                                   {"window", 32},
                                   {"cooldown", 0},
                                   {"queue", 6},
                                   {"rollout", "on"}}));
  EXPECT_EQ(c->text, "policy manual t_high=64 t_low=auto window=32 cooldown=0 queue=6 rollout=on");
  // The Overview's labels, as it shows them.
  c = ParseCommand("policy T_h=300 T_l=auto W=32 C=10 Q=4");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(
      c->request.args,
      (json{{"t_high", 300}, {"t_low", "auto"}, {"window", 32}, {"cooldown", 10}, {"queue", 4}}));
  EXPECT_EQ(c->text, "policy t_high=300 t_low=auto window=32 cooldown=10 queue=4");
  c = ParseCommand("policy t_low=40.5 mode=auto");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"t_low", 40.5}, {"mode", "auto"}}));
}

TEST(ConsoleParallelCommands, PolicyValuesAreCheckedLocally) {
  const auto err = [](const char* line) { return ParseCommand(line).status().message(); };
  EXPECT_EQ(err("policy fast"),
            "bad policy argument 'fast': expected auto|manual or KEY=VALUE with KEY one of "
            "t_high, t_low, window, cooldown, queue, rollout, mode");
  EXPECT_EQ(err("policy t_hi=3"),
            "unknown policy key 't_hi': expected t_high, t_low, window, cooldown, queue, rollout, "
            "mode (or the Overview's T_h, T_l, W, C, Q)");
  EXPECT_EQ(err("policy t_high=0"), "bad t_high '0': expected a batch size from 1 to 1000000");
  EXPECT_EQ(err("policy t_high=1.5"), "bad t_high '1.5': expected a batch size from 1 to 1000000");
  EXPECT_EQ(err("policy t_low=-1"),
            "bad t_low '-1': expected auto (0.8 t_high) or a batch size > 0");
  EXPECT_EQ(err("policy window=0"), "bad window '0': expected steps from 1 to 1000000");
  EXPECT_EQ(err("policy cooldown=x"), "bad cooldown 'x': expected steps from 0 to 1000000");
  EXPECT_EQ(err("policy queue=-2"), "bad queue '-2': expected requests from 0 (off) to 1000000");
  EXPECT_EQ(err("policy rollout=maybe"), "bad rollout 'maybe': expected auto|on|off");
  EXPECT_EQ(err("policy window="), "policy window= needs a value");
  EXPECT_EQ(err("policy auto mode=manual"), "policy mode given twice");
  EXPECT_EQ(err("policy t_high=32 t_low=40"),
            "t_low 40 above t_high 32: the low threshold must not exceed the high one");
}

TEST(ConsoleParallelCommands, CalibrateBatchesStepsApply) {
  auto c = ParseCommand("calibrate");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, json::object());  // the engine's defaults
  c = ParseCommand("calibrate [1,4,16,64] apply");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"batches", {1, 4, 16, 64}}, {"apply", true}}));
  EXPECT_EQ(c->text, "calibrate 1,4,16,64 apply");
  c = ParseCommand("calibrate apply steps=4 2,8");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"batches", {2, 8}}, {"steps", 4}, {"apply", true}}));
  EXPECT_EQ(c->text, "calibrate 2,8 steps=4 apply");
  c = ParseCommand("calibrate prompt=384 64,512,2048");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->request.args, (json{{"batches", {64, 512, 2048}}, {"prompt_len", 384}}));
  EXPECT_EQ(c->text, "calibrate 64,512,2048 prompt=384");

  const auto err = [](const char* line) { return ParseCommand(line).status().message(); };
  EXPECT_THAT(err("calibrate 1,x"), HasSubstr("bad calibrate batch 'x' in '1,x'"));
  EXPECT_THAT(err("calibrate 0,4"), HasSubstr("bad calibrate batch '0'"));
  EXPECT_EQ(err("calibrate 8"),
            "calibrate needs at least 2 batch sizes to fit a crossover (got '8')");
  EXPECT_EQ(err("calibrate 4,4"), "calibrate batch 4 listed twice");
  EXPECT_THAT(err("calibrate 1,4 16"), HasSubstr("batches go in one list without spaces"));
  EXPECT_EQ(err("calibrate steps=0"), "bad calibrate steps '0': expected 1 to 1000");
  EXPECT_EQ(err("calibrate apply apply"), "calibrate: apply given twice");
  EXPECT_EQ(err("calibrate prompt=0"), "bad calibrate prompt '0': expected 1 to 1048576");
  EXPECT_EQ(err("calibrate prompt=8 prompt=9"), "calibrate: prompt given twice");
  EXPECT_EQ(err("calibrate steps=2 steps=3"), "calibrate: steps given twice");
}

TEST(ConsoleParallelCommands, Completion) {
  EXPECT_EQ(Complete("sw").line, "switch ");
  EXPECT_EQ(Complete("switch t").line, "switch tp");
  EXPECT_THAT(Complete("switch ").candidates, ElementsAre("tp", "ep"));
  EXPECT_TRUE(Complete("switch tp ").candidates.empty());  // one argument only

  EXPECT_EQ(Complete("pol").line, "policy ");
  EXPECT_THAT(Complete("policy ").candidates,
              ElementsAre("auto", "manual",
                          "t_high=", "t_low=", "window=", "cooldown=", "queue=", "rollout="));
  EXPECT_EQ(Complete("policy m").line, "policy manual");
  EXPECT_EQ(Complete("policy auto t_h").line, "policy auto t_high=");
  EXPECT_THAT(Complete("policy auto ").candidates,
              ElementsAre("t_high=", "t_low=", "window=", "cooldown=", "queue=", "rollout="));
  EXPECT_EQ(Complete("policy rollout=o").line, "policy rollout=o");  // on, off
  EXPECT_THAT(Complete("policy rollout=o").candidates, ElementsAre("rollout=on", "rollout=off"));
  EXPECT_EQ(Complete("policy t_low=a").line, "policy t_low=auto");

  EXPECT_EQ(Complete("cal").line, "calibrate ");
  EXPECT_EQ(Complete("calibrate 1,4,16 a").line, "calibrate 1,4,16 apply");
  EXPECT_EQ(Complete("calibrate s").line, "calibrate steps=");
  EXPECT_EQ(Complete("calibrate 64,512 p").line, "calibrate 64,512 prompt=");
}

TEST(ConsoleParallelCommands, HelpTableListsThem) {
  std::vector<std::string> names;
  for (const CommandSpec& c : CommandTable()) names.emplace_back(c.name);
  for (const char* name : {"switch", "policy", "calibrate"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

}  // namespace
}  // namespace sy::console
