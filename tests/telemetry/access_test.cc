// The allow-list format, the role rules and the refusal queue
// (telemetry/access.h).
#include "telemetry/access.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/telemetry/curve_fixture.h"

namespace sy::telemetry {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;

CommandRequest Req(std::string cmd, json args = json::object(), std::string user = "") {
  CommandRequest r;
  r.cmd = std::move(cmd);
  r.args = std::move(args);
  r.user_id = std::move(user);
  return r;
}

class AllowListTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(CurveAvailable()); }
  std::string Key() { return NewCurveKeyPair().value().public_key; }
};

TEST_F(AllowListTest, ParsesRolesNamesCommentsAndBlankLines) {
  const std::string a = Key(), b = Key();
  ASSERT_OK_AND_ASSIGN(AllowList list, AllowList::Parse("# keys\n\n  operator   " + a +
                                                            "  alice  \r\nobserver\t" + b + "\n",
                                                        "keys.txt"));
  ASSERT_EQ(list.keys().size(), 2u);
  const AuthorizedKey* ka = list.Find(a);
  ASSERT_NE(ka, nullptr);
  EXPECT_EQ(ka->role, Role::kOperator);
  EXPECT_EQ(ka->name, "alice");
  EXPECT_EQ(UserIdFor(*ka), "operator:alice");
  const AuthorizedKey* kb = list.Find(b);
  ASSERT_NE(kb, nullptr);
  EXPECT_EQ(kb->role, Role::kObserver);
  EXPECT_EQ(kb->name, b.substr(0, 8));  // unnamed: the key's first characters
  EXPECT_EQ(list.Find(Key()), nullptr);
  ASSERT_OK_AND_ASSIGN(AllowList empty, AllowList::Parse("# nobody\n", "empty"));
  EXPECT_TRUE(empty.keys().empty());
}

TEST_F(AllowListTest, ErrorsNameTheFileAndLine) {
  const std::string a = Key();
  EXPECT_THAT(AllowList::Parse("# x\nadmin " + a + "\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("f:2: unknown role 'admin'")));
  EXPECT_THAT(AllowList::Parse("observer abc\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("f:1")));
  EXPECT_THAT(AllowList::Parse("observer\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("ROLE PUBLIC-KEY [NAME]")));
  EXPECT_THAT(AllowList::Parse("observer " + a + " two words\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("4 words")));
  EXPECT_THAT(AllowList::Parse("observer " + a + " bad:name\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("name 'bad:name'")));
  EXPECT_THAT(AllowList::Parse("observer " + a + "\noperator " + a + "\n", "f").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("f:2: key")));
  EXPECT_THAT(AllowList::Load("/nonexistent/keys").status(), StatusIs(StatusCode::kNotFound));
}

TEST(RoleTest, ReadOnlyCommandsAreExactlyTheOnesThatChangeNothing) {
  for (const CommandRequest& r :
       {Req("describe"), Req("status"), Req("expert_stats", {{"window", 10}}),
        Req("rebalance", {{"dry_run", true}, {"window", 50}}), Req("policy")}) {
    EXPECT_TRUE(IsReadOnly(r)) << r.cmd << " " << r.args.dump();
    EXPECT_THAT(CheckPermission(Role::kObserver, r), IsOk()) << r.cmd;
  }
  for (const CommandRequest& r :
       {Req("pause"), Req("resume"), Req("stop"), Req("trace", {{"level", "full"}}),
        Req("cancel", {{"id", 1}}), Req("flush_cache"), Req("switch", {{"to", "tp"}}),
        Req("calibrate"), Req("rebalance_auto"), Req("rebalance"),
        Req("rebalance", {{"dry_run", false}}),
        Req("rebalance", {{"dry_run", true}, {"inject_fault", {{"layer", 0}}}}),
        Req("expert_stats", {{"path", "/tmp/x.json"}}), Req("policy", {{"mode", "auto"}}),
        Req("no_such_command")}) {
    EXPECT_FALSE(IsReadOnly(r)) << r.cmd << " " << r.args.dump();
    EXPECT_THAT(CheckPermission(Role::kObserver, r),
                StatusIs(StatusCode::kPermissionDenied,
                         testing::AllOf(HasSubstr("'" + r.cmd + "'"), HasSubstr("observer"))));
    EXPECT_THAT(CheckPermission(Role::kOperator, r), IsOk()) << r.cmd;
  }
  // Every command the engine knows is classified on purpose: the read-only
  // ones (in some form) are listed above, and nothing else slips through.
  int read_only = 0;
  for (std::string_view c : kCommands) read_only += IsReadOnly(Req(std::string(c)));
  EXPECT_EQ(read_only, 4);  // describe, status, expert_stats, policy (bare forms)
}

TEST(RoleTest, AuthorizeReadsTheRoleFromTheUserId) {
  EXPECT_EQ(RoleOfUserId("operator:alice"), Role::kOperator);
  EXPECT_EQ(RoleOfUserId("observer:x:y"), Role::kObserver);
  EXPECT_EQ(RoleOfUserId(""), std::nullopt);
  EXPECT_EQ(RoleOfUserId("root:me"), std::nullopt);
  // Without CURVE (loopback) everything is allowed, as before.
  EXPECT_THAT(Authorize(false, Req("pause")), IsOk());
  EXPECT_THAT(Authorize(true, Req("pause", {}, "operator:alice")), IsOk());
  EXPECT_THAT(Authorize(true, Req("status", {}, "observer:dash")), IsOk());
  EXPECT_THAT(Authorize(true, Req("pause", {}, "observer:dash")),
              StatusIs(StatusCode::kPermissionDenied));
  EXPECT_THAT(Authorize(true, Req("status", {}, "")),
              StatusIs(StatusCode::kPermissionDenied, HasSubstr("without a role")));
  EXPECT_EQ(StatusCodeName(StatusCode::kPermissionDenied), "PERMISSION_DENIED");
}

TEST(RefusalLogTest, FoldsRepeatsOfOnePeerAndBoundsTheQueue) {
  RefusalLog log(/*capacity=*/3, /*fold_ms=*/1000);
  const AuthRefusal a{.socket = "control",
                      .peer_address = "10.0.0.1",
                      .public_key = "k",
                      .mechanism = "CURVE",
                      .reason = "not in the allow-list",
                      .repeats = 0};
  EXPECT_TRUE(log.Push(a, 100));
  EXPECT_FALSE(log.Push(a, 200));  // folded
  EXPECT_FALSE(log.Push(a, 1099));
  AuthRefusal other = a;
  other.peer_address = "10.0.0.2";
  EXPECT_TRUE(log.Push(other, 300));
  std::vector<AuthRefusal> got = log.Drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].peer_address, "10.0.0.1");
  EXPECT_EQ(got[0].repeats, 0);
  EXPECT_TRUE(log.Drain().empty());
  EXPECT_TRUE(log.Push(a, 1200));  // the window has passed: reported with its count
  got = log.Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].repeats, 2);
  EXPECT_EQ(log.total(), 5);
  for (int i = 0; i < 5; ++i) {
    AuthRefusal r = a;
    r.peer_address = "10.1.0." + std::to_string(i);
    log.Push(r, 5000);
  }
  EXPECT_EQ(log.Drain().size(), 3u);
  EXPECT_EQ(log.dropped(), 2);
}

}  // namespace
}  // namespace sy::telemetry
