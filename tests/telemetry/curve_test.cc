// CURVE key files (telemetry/curve.h): creation mode, refusal of readable
// secret keys, Z85 validation, and the loopback rule for binding.
#include "telemetry/curve.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/telemetry/curve_fixture.h"

namespace sy::telemetry {
namespace {

using ::testing::HasSubstr;

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CurveAvailable()) << "libzmq without CURVE: install libzmq built with libsodium";
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("sy-curve-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static mode_t ModeOf(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
    std::filesystem::create_directories(dir_);
    std::ofstream(path) << text;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  std::filesystem::path dir_;
};

TEST_F(CurveKeysTest, WritesSecretKey0600AndReadsBothBack) {
  // A permissive umask must not widen the secret key's mode.
  const mode_t old_umask = ::umask(0);
  ASSERT_OK_AND_ASSIGN(CurveKeyPair pair, NewCurveKeyPair());
  Result<KeyFiles> files = WriteKeyPair(dir_.string(), "alice", pair);
  ::umask(old_umask);
  ASSERT_THAT(files.status(), IsOk());
  EXPECT_EQ(files->secret_path, (dir_ / "alice.key").string());
  EXPECT_EQ(ModeOf(files->secret_path), 0600u);
  EXPECT_EQ(ModeOf(files->public_path), 0644u);
  EXPECT_EQ(ModeOf(dir_.string()), 0700u);
  ASSERT_OK_AND_ASSIGN(std::string secret, LoadSecretKey(files->secret_path));
  ASSERT_OK_AND_ASSIGN(std::string pub, LoadPublicKey(files->public_path));
  EXPECT_EQ(secret, pair.secret_key);
  EXPECT_EQ(pub, pair.public_key);
  ASSERT_OK_AND_ASSIGN(std::string derived, PublicKeyOf(secret));
  EXPECT_EQ(derived, pub);
}

TEST_F(CurveKeysTest, NeverOverwritesAKey) {
  ASSERT_OK_AND_ASSIGN(CurveKeyPair a, NewCurveKeyPair());
  ASSERT_OK_AND_ASSIGN(CurveKeyPair b, NewCurveKeyPair());
  ASSERT_THAT(WriteKeyPair(dir_.string(), "k", a).status(), IsOk());
  EXPECT_THAT(WriteKeyPair(dir_.string(), "k", b).status(),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("already exists")));
  ASSERT_OK_AND_ASSIGN(std::string secret, LoadSecretKey((dir_ / "k.key").string()));
  EXPECT_EQ(secret, a.secret_key);
  EXPECT_THAT(WriteKeyPair(dir_.string(), "a/b", a).status(),
              StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(CurveKeysTest, RefusesGroupOrWorldReadableSecretKey) {
  ASSERT_OK_AND_ASSIGN(CurveKeyPair pair, NewCurveKeyPair());
  const std::string path = (dir_ / "loose.key").string();
  WriteFile(path, pair.secret_key + "\n", 0644);
  EXPECT_THAT(LoadSecretKey(path).status(),
              StatusIs(StatusCode::kPermissionDenied,
                       testing::AllOf(HasSubstr("mode 0644"), HasSubstr("group or others"),
                                      HasSubstr("chmod 600"))));
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  EXPECT_THAT(LoadSecretKey(path).status(), StatusIs(StatusCode::kPermissionDenied));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_THAT(LoadSecretKey(path).status(), IsOk());
  // A public key file may be world-readable.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_THAT(LoadPublicKey(path).status(), IsOk());
}

TEST_F(CurveKeysTest, RejectsBadZ85AndBadFiles) {
  const std::string path = (dir_ / "bad.key").string();
  WriteFile(path, "# comment\nnot-a-key\n", 0600);
  EXPECT_THAT(LoadSecretKey(path).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("40 Z85 characters")));
  // 40 characters, but '"' and ' ' are not in the Z85 alphabet.
  WriteFile(path, std::string(39, 'a') + "\"\n", 0600);
  EXPECT_THAT(LoadSecretKey(path).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not valid Z85")));
  ASSERT_OK_AND_ASSIGN(CurveKeyPair pair, NewCurveKeyPair());
  WriteFile(path, pair.secret_key + "\n" + pair.secret_key + "\n", 0600);
  EXPECT_THAT(LoadSecretKey(path).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("more than one")));
  WriteFile(path, "# only a comment\n\n", 0600);
  EXPECT_THAT(LoadSecretKey(path).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no key")));
  EXPECT_THAT(LoadSecretKey((dir_ / "absent.key").string()).status(),
              StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(ValidateZ85Key(pair.public_key, "k"), IsOk());
  EXPECT_THAT(PublicKeyOf("short").status(), StatusIs(StatusCode::kInvalidArgument));
}

TEST_F(CurveKeysTest, LoadsAConsoleKeySet) {
  ASSERT_OK_AND_ASSIGN(CurveKeyPair server, NewCurveKeyPair());
  ASSERT_OK_AND_ASSIGN(CurveKeyPair client, NewCurveKeyPair());
  ASSERT_OK_AND_ASSIGN(KeyFiles s, WriteKeyPair(dir_.string(), "engine", server));
  ASSERT_OK_AND_ASSIGN(KeyFiles c, WriteKeyPair(dir_.string(), "console", client));
  ASSERT_OK_AND_ASSIGN(CurveClient cc, LoadCurveClient(c.secret_path, s.public_path));
  EXPECT_EQ(cc.secret_key, client.secret_key);
  EXPECT_EQ(cc.public_key, client.public_key);
  EXPECT_EQ(cc.server_public_key, server.public_key);
  // The server's secret key where its public key belongs still loads (both
  // are Z85), but the console's own secret key must be private.
  ASSERT_EQ(::chmod(c.secret_path.c_str(), 0604), 0);
  EXPECT_THAT(LoadCurveClient(c.secret_path, s.public_path).status(),
              StatusIs(StatusCode::kPermissionDenied));
}

TEST(LoopbackRuleTest, ClassifiesEndpoints) {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.3.4.5:1", "tcp://[::1]:5555",
                         "tcp://localhost:5555", "ipc:///tmp/x", "inproc://x"}) {
    EXPECT_TRUE(IsLoopbackEndpoint(ep)) << ep;
    EXPECT_THAT(CheckBindSecurity("telemetry PUB socket", ep, false), IsOk()) << ep;
  }
  for (const char* ep : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.77.0.1:5555",
                         "tcp://[::]:5555", "tcp://eth0:5555", "tcp://192.168.1.2:*",
                         "udp://127.0.0.1:5555", "tcp://no-port", "ws://0.0.0.0:80"}) {
    EXPECT_FALSE(IsLoopbackEndpoint(ep)) << ep;
    EXPECT_TRUE(NeedsCurve(ep)) << ep;
    EXPECT_THAT(CheckBindSecurity("telemetry PUB socket", ep, false),
                StatusIs(StatusCode::kFailedPrecondition,
                         testing::AllOf(HasSubstr(ep), HasSubstr("requires CURVE"))))
        << ep;
    EXPECT_THAT(CheckBindSecurity("telemetry PUB socket", ep, true), IsOk()) << ep;
  }
  // Not a transport: ZeroMQ's to reject (UNAVAILABLE at bind), not ours.
  EXPECT_FALSE(NeedsCurve("bogus://nowhere"));
  EXPECT_FALSE(NeedsCurve("ipc:///tmp/x"));
}

}  // namespace
}  // namespace sy::telemetry
