// File: base/status_matchers.h
//
// GoogleTest matchers for Status and Result<T>. On purpose there is no "not
// OK" matcher: a failure test names the exact code it expects.
//
//   EXPECT_THAT(ParseLevel("x"), StatusIs(StatusCode::kInvalidArgument));
//   EXPECT_THAT(store.Open(p), StatusIs(StatusCode::kDataLoss, HasSubstr("corrupt")));
#pragma once

#include <gmock/gmock.h>

#include "base/status.h"

namespace sy {

inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const Result<T>& r) {
  return r.status();
}

MATCHER_P(StatusIs, code, "has status code " + std::string(StatusCodeName(code))) {
  const Status& s = ::sy::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, msg_matcher, "has status code " + std::string(StatusCodeName(code))) {
  const Status& s = ::sy::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code &&
         ::testing::ExplainMatchResult(msg_matcher, s.message(), result_listener);
}

MATCHER(IsOk, "is OK") {
  const Status& s = ::sy::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

}  // namespace sy
