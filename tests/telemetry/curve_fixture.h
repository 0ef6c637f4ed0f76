// File: tests/telemetry/curve_fixture.h
//
// Shared by the CURVE tests: ASSERT_OK_AND_ASSIGN, and a set of keys (a
// server, an operator, an observer, a stranger) with the allow-list that
// admits the first two clients.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/status_matchers.h"
#include "telemetry/access.h"
#include "telemetry/curve.h"

#define SY_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  ASSERT_THAT(tmp.status(), ::sy::IsOk());           \
  lhs = std::move(tmp).value()
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  SY_ASSERT_OK_AND_ASSIGN_IMPL(SY_CONCAT(sy_result_, __LINE__), lhs, expr)

namespace sy::telemetry {

struct TestKeys {
  CurveKeyPair server, op, observer, stranger;
  std::shared_ptr<const AllowList> allow;

  // REQUIRES: CurveAvailable(). Aborts the test on failure.
  static TestKeys Make() {
    TestKeys k;
    k.server = NewCurveKeyPair().value();
    k.op = NewCurveKeyPair().value();
    k.observer = NewCurveKeyPair().value();
    k.stranger = NewCurveKeyPair().value();
    Result<AllowList> list =
        AllowList::Parse("# test allow-list\noperator " + k.op.public_key + " alice\nobserver " +
                             k.observer.public_key + " dashboard\n",
                         "test");
    EXPECT_THAT(list.status(), IsOk());
    k.allow = std::make_shared<const AllowList>(std::move(list).value());
    return k;
  }

  CurveServer Server(std::shared_ptr<RefusalLog> refusals) const {
    return CurveServer{.secret_key = server.secret_key,
                       .zap_domain = std::string(kDefaultZapDomain),
                       .allow = allow,
                       .refusals = std::move(refusals)};
  }
  CurveClient Client(const CurveKeyPair& who) const {
    return CurveClient{.secret_key = who.secret_key,
                       .public_key = who.public_key,
                       .server_public_key = server.public_key};
  }
};

}  // namespace sy::telemetry
