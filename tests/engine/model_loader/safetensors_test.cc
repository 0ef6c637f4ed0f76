#include "engine/model_loader/safetensors.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "tests/engine/model_loader/test_util.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// A safetensors file from its parts: 8-byte little-endian length, header, data.
std::string Raw(const std::string& header, const std::string& data) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return s + header + data;
}

std::vector<float> Floats(const TensorView& t) {
  std::vector<float> v(t.elements());
  ToFloat(t, v.data());
  return v;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(SafetensorsTest, F32RoundTripKeepsNamesShapesValuesAndMetadata) {
  TempDir dir;
  const std::vector<float> a = {1.5f, -2.25f, 3e-8f, 1e30f, 0.0f, -0.0f};
  const std::vector<float> b = {7.0f};
  ASSERT_THAT(
      WriteSafetensors(dir / "x.safetensors",
                       {{"a", {2, 3}, a.data()}, {"b", {}, b.data()}, {"empty", {0, 4}, nullptr}},
                       DType::kF32, {{"format", "pt"}}),
      IsOk());
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(dir / "x.safetensors");
  ASSERT_THAT(f, IsOk());
  EXPECT_THAT((*f)->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const TensorView* ta = (*f)->Find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, DType::kF32);
  EXPECT_THAT(ta->shape, ElementsAre(2, 3));
  EXPECT_EQ(ta->bytes, 24u);
  std::vector<float> got = Floats(*ta);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(Bits(got[i]), Bits(a[i])) << i;
  EXPECT_THAT(Floats(*(*f)->Find("b")), ElementsAre(7.0f));
  EXPECT_EQ((*f)->Find("empty")->elements(), 0);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
  // The data section starts 8-byte aligned, as the reference writer pads it.
  const std::string bytes = ReadFile(dir / "x.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(SafetensorsTest, Bf16RoundsToNearestEven) {
  TempDir dir;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {
      1.0f,
      1.00390625f,             // 1 + 2^-8: halfway, ties to even 1.0
      1.01171875f,             // 1 + 3 * 2^-8: halfway, ties to even 1 + 2^-6
      1.00390625f + 0x1p-20f,  // just above halfway: rounds up to 1 + 2^-7
      3.14159265f,             // 0x40490fdb -> 0x4049 = 3.140625
      -2.5f,
      inf,
      std::numeric_limits<float>::quiet_NaN(),
  };
  ASSERT_THAT(WriteSafetensors(dir / "b.safetensors", {{"v", {8}, v.data()}}, DType::kBF16, {}),
              IsOk());
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(dir / "b.safetensors");
  ASSERT_THAT(f, IsOk());
  const TensorView* t = (*f)->Find("v");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kBF16);
  EXPECT_EQ(t->bytes, 16u);
  uint16_t raw0;
  std::memcpy(&raw0, t->data, 2);
  EXPECT_EQ(raw0, 0x3f80);  // 1.0 in bf16
  std::vector<float> got = Floats(*t);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 1.015625f);
  EXPECT_EQ(got[3], 1.0078125f);
  EXPECT_EQ(got[4], 3.140625f);
  EXPECT_EQ(got[5], -2.5f);
  EXPECT_EQ(got[6], inf);
  EXPECT_TRUE(std::isnan(got[7]));
}

TEST(SafetensorsTest, ReadsF16IncludingSubnormalsAndInfinity) {
  TempDir dir;
  const uint16_t halves[] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00};
  std::string data(reinterpret_cast<const char*>(halves), sizeof halves);
  WriteFile(dir / "h.safetensors",
            Raw(R"({"h":{"dtype":"F16","shape":[6],"data_offsets":[0,12]}})", data));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(dir / "h.safetensors");
  ASSERT_THAT(f, IsOk());
  EXPECT_THAT(Floats(*(*f)->Find("h")), ElementsAre(1.0f, -2.0f, 0.5f, 65504.0f, 0x1p-24f,
                                                    std::numeric_limits<float>::infinity()));
}

// Found by fuzzing: ToFloat of a 0-element tensor into an empty vector's
// data() (null) passed null to memcpy (UBSan).
TEST(SafetensorsTest, EmptyTensorConvertsIntoAnEmptyVector) {
  TempDir dir;
  const std::string path = dir / "empty.safetensors";
  ASSERT_THAT(WriteSafetensors(path, {{"e", {0, 3}, nullptr}}, DType::kF32, {}), IsOk());
  auto f = SafetensorsFile::Open(path);
  ASSERT_THAT(f, IsOk());
  const TensorView* t = (*f)->Find("e");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->elements(), 0);
  std::vector<float> out;
  ToFloat(*t, out.data());
  EXPECT_TRUE(out.empty());
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  TempDir dir;
  EXPECT_THAT(SafetensorsFile::Open(dir / "nope.safetensors"),
              StatusIs(StatusCode::kNotFound, HasSubstr("nope.safetensors")));
}

TEST(SafetensorsTest, TruncatedFileNamesFileTensorAndRange) {
  TempDir dir;
  const std::vector<float> a(16, 1.0f), b(16, 2.0f);
  const std::string path = dir / "t.safetensors";
  ASSERT_THAT(
      WriteSafetensors(path, {{"a", {16}, a.data()}, {"b", {4, 4}, b.data()}}, DType::kF32, {}),
      IsOk());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  EXPECT_THAT(SafetensorsFile::Open(path),
              StatusIs(StatusCode::kDataLoss,
                       AllOf(HasSubstr("file " + path + " is truncated"), HasSubstr("tensor 'b'"),
                             HasSubstr("needs bytes [64, 128) but the data section has 118"))));
}

TEST(SafetensorsTest, CorruptHeadersAreDataLoss) {
  TempDir dir;
  const std::string f32x4 = std::string(16, '\0');
  struct Case {
    std::string what, bytes, message;
  };
  std::string huge_len(8, '\0');
  huge_len[0] = static_cast<char>(0xff);
  huge_len[1] = static_cast<char>(0xff);
  const std::vector<Case> cases = {
      {"short", "abc", "shorter than the 8-byte header length"},
      {"length beyond file", huge_len + "{}", "header length 65535 exceeds the file"},
      {"bad json", Raw("{\"a\": [", f32x4), "header is not valid JSON"},
      {"not an object", Raw("[1, 2]", ""), "header is not a JSON object"},
      {"no dtype", Raw(R"({"a":{"shape":[4],"data_offsets":[0,16]}})", f32x4),
       "tensor 'a': header lacks 'dtype'"},
      {"unknown dtype", Raw(R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,16]}})", f32x4),
       "unknown dtype 'Q7'"},
      {"negative dim", Raw(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", f32x4),
       "'shape' holds something other than a non-negative integer"},
      {"size mismatch", Raw(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", f32x4),
       "needs 20 bytes but data_offsets span 16"},
      {"begin after end", Raw(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", f32x4),
       "begin 8 > end 4"},
      {"bad offsets", Raw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", f32x4),
       "'data_offsets' is not [begin, end]"},
      {"overlap",
       Raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           f32x4),
       "tensor 'b': bytes [8, 16) overlap tensor 'a' ending at 12"},
      {"repeated name",
       Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           f32x4),
       "tensor 'a': named twice in the header"},
      {"metadata not strings", Raw(R"({"__metadata__":{"k":1}})", ""),
       "__metadata__ value of 'k' is not a string"},
      {"shape overflow",
       Raw(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", f32x4),
       "'shape' overflows"},
      // Found by fuzzing: 0 elements, but 2^62 * 2 overflowed int64 in
      // TensorView::elements().
      {"shape partial product overflow",
       Raw(R"({"a":{"dtype":"F32","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}})", ""),
       "'shape' overflows"},
  };
  for (const Case& c : cases) {
    const std::string path = dir / "c.safetensors";
    WriteFile(path, c.bytes);
    EXPECT_THAT(SafetensorsFile::Open(path),
                StatusIs(StatusCode::kDataLoss, AllOf(HasSubstr(path), HasSubstr(c.message))))
        << c.what;
  }
}

TEST(SafetensorsTest, WellFormedButUnsupportedDTypeIsInvalidArgument) {
  TempDir dir;
  WriteFile(dir / "d.safetensors", Raw(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})",
                                       std::string(16, '\0')));
  EXPECT_THAT(SafetensorsFile::Open(dir / "d.safetensors"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("tensor 'a': dtype F64")));
}

TEST(SafetensorsTest, WriteRefusesBadInputAndLeavesNothing) {
  TempDir dir;
  const std::vector<float> a = {1.0f};
  EXPECT_THAT(WriteSafetensors(dir / "x.safetensors", {{"a", {1}, a.data()}}, DType::kF16, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("F16")));
  EXPECT_THAT(WriteSafetensors(dir / "x.safetensors", {{"a", {1}, a.data()}, {"a", {1}, a.data()}},
                               DType::kF32, {}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'a'")));
  EXPECT_THAT(
      WriteSafetensors(dir / "no/such/dir/x.safetensors", {{"a", {1}, a.data()}}, DType::kF32, {}),
      StatusIs(StatusCode::kUnavailable,
               AllOf(HasSubstr("no/such/dir/x.safetensors"), HasSubstr("No such file"))));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// A full disk, simulated by a file-size limit in a forked child (SIGXFSZ
// ignored so write() fails with EFBIG): a clear error and no file left behind.
TEST(SafetensorsTest, FullDiskIsResourceExhaustedAndRemovesTheTemporaryFile) {
  TempDir dir;
  const std::string path = dir / "big.safetensors";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    const std::vector<float> v(1 << 14, 1.0f);  // 64 KiB
    const Status s = WriteSafetensors(path, {{"v", {1 << 14}, v.data()}}, DType::kF32, {});
    if (s.code() != StatusCode::kResourceExhausted) ::_exit(11);
    if (s.message().find(path) == std::string::npos) ::_exit(12);
    if (s.message().find("File too large") == std::string::npos) ::_exit(13);
    ::_exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace sy::engine
