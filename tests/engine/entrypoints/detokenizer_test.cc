#include "engine/entrypoints/detokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sy::engine {
namespace {

std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> out;
  for (unsigned char c : s) out.push_back(c);
  return out;
}

bool ValidUtf8(std::string_view s) { return SanitizeUtf8(s) == s; }

TEST(SanitizeUtf8Test, KeepsValidTextAndReplacesIllFormedSubparts) {
  EXPECT_EQ(SanitizeUtf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
  // A stray continuation byte, an invalid lead byte, an overlong.
  EXPECT_EQ(SanitizeUtf8("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(SanitizeUtf8("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // A truncated 3-byte character followed by ASCII: one U+FFFD, then the ASCII.
  EXPECT_EQ(SanitizeUtf8("\xE2\x82x"), "\xEF\xBF\xBDx");
  // A surrogate (ED A0 80) is ill formed: ED alone, then A0, then 80.
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(SanitizeUtf8Test, HoldsAnIncompleteTailOnlyWhenAsked) {
  size_t consumed = 0;
  EXPECT_EQ(SanitizeUtf8("ab\xE2\x82", /*hold_tail=*/true, &consumed), "ab");
  EXPECT_EQ(consumed, 2u);
  EXPECT_EQ(SanitizeUtf8("ab\xE2\x82", /*hold_tail=*/false, &consumed), "ab\xEF\xBF\xBD");
  EXPECT_EQ(consumed, 4u);
  // An ill-formed tail is not held: no later byte can repair it.
  EXPECT_EQ(SanitizeUtf8("ab\xFF", /*hold_tail=*/true, &consumed), "ab\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizerTest, NeverSplitsACharacterAcrossPieces) {
  auto tok = MakeByteTokenizer();
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";  // a é € 😀 z
  IncrementalDetokenizer d(tok.get());
  std::vector<std::string> pieces;
  for (int32_t t : Bytes(text)) {
    std::string p = d.Add({t});
    EXPECT_TRUE(ValidUtf8(p)) << "piece after byte " << t;
    if (!p.empty()) pieces.push_back(p);
  }
  EXPECT_EQ(d.Finish(), "");
  EXPECT_THAT(pieces,
              ::testing::ElementsAre("a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "z"));
  EXPECT_EQ(d.text(), text);
}

TEST(IncrementalDetokenizerTest, SpecialTokensDecodeToNothing) {
  auto tok = MakeByteTokenizer();
  IncrementalDetokenizer d(tok.get());
  EXPECT_EQ(d.Add({kBosToken, 'h', 'i'}), "hi");
  EXPECT_EQ(d.Add({kPadToken}), "");
  EXPECT_EQ(d.Add({'!'}), "!");
}

TEST(IncrementalDetokenizerTest, FinishReplacesAHeldIncompleteTail) {
  auto tok = MakeByteTokenizer();
  IncrementalDetokenizer d(tok.get());
  EXPECT_EQ(d.Add({'o', 'k', 0xF0, 0x9F}), "ok");
  EXPECT_EQ(d.Add({0x98}), "");
  EXPECT_EQ(d.Finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.text(), SanitizeUtf8(tok->Decode({'o', 'k', 0xF0, 0x9F, 0x98})));
}

TEST(IncrementalDetokenizerTest, PiecesConcatenateToTheSanitizedDecodeOfRandomBytes) {
  auto tok = MakeByteTokenizer();
  uint32_t state = 12345;
  for (int round = 0; round < 50; ++round) {
    std::vector<int32_t> tokens;
    IncrementalDetokenizer d(tok.get());
    std::string joined;
    for (int i = 0; i < 64; ++i) {
      state = state * 1664525u + 1013904223u;
      // Mostly high bytes, so multi-byte and broken sequences are common.
      const int32_t t =
          (state >> 24) % 3 == 0 ? 'a' + (state >> 8) % 26 : 0x80 + (state >> 8) % 128;
      tokens.push_back(t);
      std::string p = d.Add({t});
      ASSERT_TRUE(ValidUtf8(p));
      joined += p;
    }
    joined += d.Finish();
    EXPECT_EQ(joined, SanitizeUtf8(tok->Decode(tokens)));
  }
}

}  // namespace
}  // namespace sy::engine
