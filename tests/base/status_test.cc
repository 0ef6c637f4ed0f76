#include "base/status.h"

#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndErrorsCarryCodeAndMessage) {
  EXPECT_THAT(Status::Ok(), IsOk());
  Status s = NotFound("no run 7");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: no run 7");
  EXPECT_EQ(s.WithContext("replay").message(), "replay: no run 7");
  EXPECT_THAT(s, StatusIs(StatusCode::kNotFound, testing::HasSubstr("run 7")));
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(Quarter(8).value(), 2);
  EXPECT_THAT(Quarter(6), StatusIs(StatusCode::kInvalidArgument, testing::HasSubstr("odd: 3")));
}

}  // namespace
}  // namespace sy
