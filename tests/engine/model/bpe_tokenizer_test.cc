#include "engine/model/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode, written as in its Python source: the listed
// printable ranges keep their code points, the rest follow from 256 on.
std::string ByteSymbol(int byte) {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<char32_t> cs(bs.begin(), bs.end());
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + n++);
    }
  }
  return Utf8(cs[std::find(bs.begin(), bs.end(), byte) - bs.begin()]);
}

// The test model: byte b has id b; merge number r makes token 256 + r.
const std::vector<std::pair<std::string, std::string>>& Merges() {
  static const auto* merges = new std::vector<std::pair<std::string, std::string>>{
      {"Ġ", "t"},    // 256 "Ġt"
      {"h", "e"},    // 257 "he"
      {"Ġt", "he"},  // 258 "Ġthe"
      {"c", "a"},    // 259 "ca"
      {"ca", "t"},   // 260 "cat"
      {"Ġ", "cat"},  // 261 "Ġcat"
      {"l", "l"},    // 262 "ll"
      {"e", "ll"},   // 263 "ell" (never reached in "hello": "h e" ranks first)
      {"Ġ", "w"},    // 264 "Ġw"
      {"o", "r"},    // 265 "or"
      {"Ġw", "or"},  // 266 "Ġwor"
      {"1", "2"},    // 267 "12"
      {"'", "t"},    // 268 "'t"
      {"Ġ", "Ġ"},    // 269 "ĠĠ"
      {"Ċ", "Ċ"},    // 270 "ĊĊ"
      {"Ã", "©"},    // 271 "Ã©" = "é"
      {"a", "ã"},    // 272 "aã": "a" + the first byte of "。" (E3 80 82)
  };
  return *merges;
}

json MakeModel(bool pair_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteSymbol(b)] = b;
  json merges = json::array();
  int id = 256;
  for (const auto& [a, b] : Merges()) {
    vocab[a + b] = id++;
    merges.push_back(pair_merges ? json::array({a, b}) : json(a + " " + b));
  }
  return {{"type", "BPE"},          {"dropout", nullptr}, {"unk_token", nullptr},
          {"byte_fallback", false}, {"vocab", vocab},     {"merges", merges}};
}

json AddedToken(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

json MakeTokenizer(bool pair_merges = false) {
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {AddedToken(300, "<|endoftext|>"), AddedToken(301, "<|im_start|>"),
        AddedToken(302, "<|im", /*special=*/false)}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
      {"model", MakeModel(pair_merges)},
  };
}

std::unique_ptr<Tokenizer> Load(const json& j, int32_t eos = -1) {
  Result<std::unique_ptr<Tokenizer>> tok = ParseBpeTokenizer(j.dump(), "test.json", eos);
  EXPECT_THAT(tok, IsOk());
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<int32_t> Ids(const Tokenizer& tok, const std::string& s) {
  return tok.Encode(s, /*add_bos=*/false);
}

std::vector<std::string> Words(std::string_view s, WordSplit style = WordSplit::kGpt2) {
  std::vector<std::string> out;
  for (std::string_view w : SplitWords(s, style)) out.emplace_back(w);
  return out;
}

// The Split regexes of Llama-3's and Qwen2's tokenizer.json, as in the files.
constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json SplitThenByteLevel(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", regex}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

TEST(BpeTokenizerTest, TestTableMatchesKnownGpt2Symbols) {
  EXPECT_EQ(ByteSymbol(' '), "Ġ");
  EXPECT_EQ(ByteSymbol('\n'), "Ċ");
  EXPECT_EQ(ByteSymbol('a'), "a");
  EXPECT_EQ(ByteSymbol(0xAD), "Ń");  // the one Latin-1 gap in the printable ranges
}

TEST(BpeTokenizerTest, SplitsLikeTheGpt2Pattern) {
  EXPECT_THAT(Words(""), ElementsAre());
  EXPECT_THAT(Words("Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(Words("don't they're I'M we'll"),
              ElementsAre("don", "'t", " they", "'re", " I", "'", "M", " we", "'ll"));
  EXPECT_THAT(Words("'s'"), ElementsAre("'s", "'"));
  EXPECT_THAT(Words("hi 'there'"), ElementsAre("hi", " '", "there", "'"));
  EXPECT_THAT(Words("$100.00!! ?!"), ElementsAre("$", "100", ".", "00", "!!", " ?!"));
  EXPECT_THAT(Words("12345 678x"), ElementsAre("12345", " 678", "x"));
  EXPECT_THAT(Words("a  b"), ElementsAre("a", " ", " b"));
  EXPECT_THAT(Words("a \n b"), ElementsAre("a", " \n", " b"));
  EXPECT_THAT(Words("x\n\n\ny"), ElementsAre("x", "\n\n", "\n", "y"));
  EXPECT_THAT(Words("end   "), ElementsAre("end", "   "));
  EXPECT_THAT(Words(" "), ElementsAre(" "));
  // Only a literal space prefixes a word; a lone tab stands alone.
  EXPECT_THAT(Words("\t\tx"), ElementsAre("\t", "\t", "x"));
  // Non-ASCII: letters, except Unicode spaces (U+00A0, U+3000).
  EXPECT_THAT(Words("héllo 日本。"), ElementsAre("héllo", " 日本。"));
  EXPECT_THAT(Words("a\u00A0b"), ElementsAre("a", "\u00A0", "b"));
  EXPECT_THAT(Words("x\u3000\u3000"), ElementsAre("x", "\u3000\u3000"));
  // Bytes that are not UTF-8 are letters on their own.
  EXPECT_THAT(Words("\xff\xfe"
                    "ab!"),
              ElementsAre("\xff\xfe"
                          "ab",
                          "!"));
}

TEST(BpeTokenizerTest, EncodesHandDerivedIds) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  // "the": t + (h e) = [t, he]; " cat": (c a) -> (ca t) -> (Ġ cat).
  EXPECT_THAT(Ids(*tok, "the cat"), ElementsAre('t', 257, 261));
  // " the": (Ġ t) rank 0, (h e) rank 1, then (Ġt he).
  EXPECT_THAT(Ids(*tok, " the"), ElementsAre(258));
  // "hello": (h e) outranks (e ll), so [he, ll, o]; " world": Ġw, or, Ġwor.
  EXPECT_THAT(Ids(*tok, "hello world!"), ElementsAre(257, 262, 'o', 266, 'l', 'd', '!'));
  EXPECT_THAT(Ids(*tok, "don't"), ElementsAre('d', 'o', 'n', 268));
  EXPECT_THAT(Ids(*tok, "a12345 12"), ElementsAre('a', 267, '3', '4', '5', ' ', 267));
  // Leftmost first on ties: "lll" is [ll, l].
  EXPECT_THAT(Ids(*tok, "lll"), ElementsAre(262, 'l'));
  EXPECT_THAT(Ids(*tok, "a   b"), ElementsAre('a', 269, ' ', 'b'));
  EXPECT_THAT(Ids(*tok, "x\n\n\ny"), ElementsAre('x', 270, '\n', 'y'));
  EXPECT_THAT(Ids(*tok, "hi  "), ElementsAre('h', 'i', 269));
  // "é" is C3 A9 = symbols "Ã©"; (l l) ranks before (Ã ©).
  EXPECT_THAT(Ids(*tok, "héllo 日本"),
              ElementsAre('h', 271, 262, 'o', ' ', 0xE6, 0x97, 0xA5, 0xE6, 0x9C, 0xAC));
  // The approximation: "。" is a letter here, so "a。" is one word and (a ã)
  // applies; ASCII "," splits off, so (a ,) could never apply.
  EXPECT_THAT(Ids(*tok, "a。"), ElementsAre(272, 0x80, 0x82));
  EXPECT_THAT(Ids(*tok, ""), ElementsAre());
}

TEST(BpeTokenizerTest, LongWordMergesEveryPair) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Ids(*tok, std::string(20000, 'l')), std::vector<int32_t>(10000, 262));
}

TEST(BpeTokenizerTest, BothMergeFormatsGiveTheSameIds) {
  std::unique_ptr<Tokenizer> strings = Load(MakeTokenizer(/*pair_merges=*/false));
  std::unique_ptr<Tokenizer> pairs = Load(MakeTokenizer(/*pair_merges=*/true));
  ASSERT_NE(strings, nullptr);
  ASSERT_NE(pairs, nullptr);
  for (const std::string s : {"the cat", " the", "hello world!", "héllo", "a12345 12", "x\n\n"}) {
    EXPECT_EQ(Ids(*strings, s), Ids(*pairs, s)) << s;
  }
  EXPECT_THAT(Ids(*pairs, " the cat"), ElementsAre(258, 261));
}

TEST(BpeTokenizerTest, ReportsVocabKindAndSpecials) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->vocab(), 303);  // added ids 300..302 are the largest
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_EQ(tok->eos(), 300);  // "<|endoftext|>" from the file
  EXPECT_THAT(tok->Encode("the", /*add_bos=*/true), ElementsAre('t', 257));

  std::unique_ptr<Tokenizer> with_eos = Load(MakeTokenizer(), /*eos=*/301);
  ASSERT_NE(with_eos, nullptr);
  EXPECT_EQ(with_eos->eos(), 301);
}

TEST(BpeTokenizerTest, AddedTokensMatchVerbatimLongestFirst) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Ids(*tok, "the<|endoftext|> cat"), ElementsAre('t', 257, 300, 261));
  EXPECT_THAT(Ids(*tok, "<|im_start|>the"), ElementsAre(301, 't', 257));
  EXPECT_THAT(Ids(*tok, "<|imx"), ElementsAre(302, 'x'));
  EXPECT_THAT(Ids(*tok, "<|i"), ElementsAre('<', '|', 'i'));
  // eos (300) decodes to nothing; other added tokens to their content.
  EXPECT_EQ(tok->Decode({301, 't', 257, 300, 302}), "<|im_start|>the<|im");
}

TEST(BpeTokenizerTest, AddedTokenStripAndSingleWord) {
  json j = MakeTokenizer();
  json strip = AddedToken(303, "<mask>");
  strip["lstrip"] = true;
  strip["rstrip"] = true;
  json single = AddedToken(304, "cat", /*special=*/false);
  single["single_word"] = true;
  j["added_tokens"].push_back(strip);
  j["added_tokens"].push_back(single);
  std::unique_ptr<Tokenizer> tok = Load(j);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Ids(*tok, "a  <mask>  b"), ElementsAre('a', 303, 'b'));
  EXPECT_THAT(Ids(*tok, "a cat b"), ElementsAre('a', ' ', 304, ' ', 'b'));
  EXPECT_THAT(Ids(*tok, "cats"), ElementsAre(260, 's'));  // not a whole word: plain BPE
}

TEST(BpeTokenizerTest, BosFromTemplateOrName) {
  json j = MakeTokenizer();
  j["added_tokens"].push_back(AddedToken(303, "<s>"));
  j["added_tokens"].push_back(AddedToken(304, "<|begin|>"));
  json tmpl = {{"type", "TemplateProcessing"},
               {"single",
                {{{"SpecialToken", {{"id", "<|begin|>"}, {"type_id", 0}}}},
                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
               {"special_tokens",
                {{"<|begin|>", {{"id", "<|begin|>"}, {"ids", {304}}, {"tokens", {"<|begin|>"}}}}}}};
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}}, tmpl}}};
  std::unique_ptr<Tokenizer> tok = Load(j);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos(), 304);
  EXPECT_THAT(tok->Encode(" the", /*add_bos=*/true), ElementsAre(304, 258));
  EXPECT_EQ(tok->Decode({304, 258}), " the");

  // A template that ends with a special token names no BOS; "<s>" does.
  j["post_processor"] = tmpl;
  j["post_processor"]["single"] = {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                   {{"SpecialToken", {{"id", "<|begin|>"}, {"type_id", 0}}}}};
  tok = Load(j);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos(), 303);
}

TEST(BpeTokenizerTest, DecodeSkipsUnknownIds) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode({'a', -1, 280, 303, 1 << 30, 261}), "a cat");  // 280: a hole
}

TEST(BpeTokenizerTest, RoundTripsText) {
  std::unique_ptr<Tokenizer> tok = Load(MakeTokenizer());
  ASSERT_NE(tok, nullptr);
  for (const std::string s : {"", "the cat", " the", "hello world!", "don't", "  lead and trail  ",
                              "a\n\n\nb\r\n", "héllo 日本。", "emoji 🙂🙃 mixed",
                              "<|im_start|>user\nhi<|im", "\t\v\f", "\xff\xfe\x80"}) {
    EXPECT_EQ(tok->Decode(Ids(*tok, s)), s);
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string bytes, text;
    for (int k = std::uniform_int_distribution<int>(0, 60)(rng); k > 0; --k) {
      bytes += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      const int pick = std::uniform_int_distribution<int>(0, 3)(rng);
      const auto in = [&](uint32_t lo, uint32_t hi) {
        return static_cast<char32_t>(std::uniform_int_distribution<uint32_t>(lo, hi)(rng));
      };
      const char32_t cp = pick == 0   ? in(0x20, 0x7E)
                          : pick == 1 ? in(0x80, 0xD7FF)
                          : pick == 2 ? in(0xE000, 0x10FFFF)
                                      : U" \n'lhe"[in(0, 5)];
      text += Utf8(cp);
    }
    EXPECT_EQ(tok->Decode(Ids(*tok, bytes)), bytes) << "round " << round;
    EXPECT_EQ(tok->Decode(Ids(*tok, text)), text) << "round " << round;
  }
}

TEST(BpeTokenizerTest, IgnoreMergesTakesWholeVocabWords) {
  json j = MakeTokenizer();
  j["model"]["vocab"]["Ġhello"] = 290;  // no merge chain builds it
  std::unique_ptr<Tokenizer> merging = Load(j);
  j["model"]["ignore_merges"] = true;
  std::unique_ptr<Tokenizer> whole = Load(j);
  ASSERT_NE(merging, nullptr);
  ASSERT_NE(whole, nullptr);
  EXPECT_THAT(Ids(*merging, " hello"), ElementsAre(' ', 257, 262, 'o'));
  EXPECT_THAT(Ids(*whole, " hello"), ElementsAre(290));
  EXPECT_THAT(Ids(*whole, " the cat"), ElementsAre(258, 261));
}

TEST(BpeTokenizerTest, SplitsLikeTheLlama3AndQwen2Patterns) {
  const WordSplit llama = WordSplit::kLlama3;
  EXPECT_THAT(Words("Hello world", llama), ElementsAre("Hello", " world"));
  EXPECT_THAT(Words("don't I'M we'LL", llama), ElementsAre("don", "'t", " I", "'M", " we", "'LL"));
  EXPECT_THAT(Words("12345 678", llama), ElementsAre("123", "45", " ", "678"));
  EXPECT_THAT(Words("(hello) !!x", llama), ElementsAre("(hello", ")", " !!", "x"));
  EXPECT_THAT(Words("a.\n\nb", llama), ElementsAre("a", ".\n\n", "b"));
  EXPECT_THAT(Words("x  \n\n  y", llama), ElementsAre("x", "  \n\n", " ", " y"));
  EXPECT_THAT(Words("\nhello\tthere", llama), ElementsAre("\n", "hello", "\tthere"));
  EXPECT_THAT(Words("end  ", llama), ElementsAre("end", "  "));
  EXPECT_THAT(Words("\t!", llama), ElementsAre("\t", "!"));
  EXPECT_THAT(Words("12345 678", WordSplit::kQwen2),
              ElementsAre("1", "2", "3", "4", "5", " ", "6", "7", "8"));
}

TEST(BpeTokenizerTest, SplitRegexPicksTheScanner) {
  // "1212" is one GPT-2 word, [121, 2] for Llama-3 and four for Qwen2.
  json j = MakeTokenizer();
  j["pre_tokenizer"] = SplitThenByteLevel(kLlama3Regex);
  std::unique_ptr<Tokenizer> llama = Load(j);
  j["pre_tokenizer"] = SplitThenByteLevel(kQwen2Regex);
  std::unique_ptr<Tokenizer> qwen = Load(j);
  j["pre_tokenizer"] = SplitThenByteLevel("(?i:'s|'t)|\\p{L}+");  // unknown: GPT-2's
  std::unique_ptr<Tokenizer> other = Load(j);
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(qwen, nullptr);
  ASSERT_NE(other, nullptr);
  EXPECT_THAT(Ids(*llama, "1212"), ElementsAre(267, '1', '2'));
  EXPECT_THAT(Ids(*qwen, "1212"), ElementsAre('1', '2', '1', '2'));
  EXPECT_THAT(Ids(*other, "1212"), ElementsAre(267, 267));
  EXPECT_THAT(Ids(*llama, "the cat"), ElementsAre('t', 257, 261));
}

TEST(BpeTokenizerTest, ByteLevelWithoutRegexKeepsOneWord) {
  json j = MakeTokenizer();
  j["pre_tokenizer"]["use_regex"] = false;
  std::unique_ptr<Tokenizer> tok = Load(j);
  ASSERT_NE(tok, nullptr);
  // One word: (Ġ t) can merge across what the scanner would split.
  EXPECT_THAT(Ids(*tok, "a. t"), ElementsAre('a', '.', 256));
}

TEST(BpeTokenizerTest, AddPrefixSpace) {
  json j = MakeTokenizer();
  j["pre_tokenizer"]["add_prefix_space"] = true;
  std::unique_ptr<Tokenizer> tok = Load(j);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(Ids(*tok, "the"), ElementsAre(258));
  EXPECT_THAT(Ids(*tok, " the"), ElementsAre(258));
}

TEST(BpeTokenizerTest, LoadsFromFileAndReportsMissingFile) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bpe_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tokenizer.json").string();
  std::ofstream(path) << MakeTokenizer().dump(2);
  Result<std::unique_ptr<Tokenizer>> tok = LoadBpeTokenizer(path, -1);
  ASSERT_THAT(tok, IsOk());
  EXPECT_THAT((*tok)->Encode(" the cat", false), ElementsAre(258, 261));
  std::ofstream(path) << "{";
  EXPECT_THAT(LoadBpeTokenizer(path, -1),
              StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr(path), HasSubstr("JSON"))));
  std::filesystem::remove_all(dir);
  EXPECT_THAT(LoadBpeTokenizer(path, -1),
              StatusIs(StatusCode::kNotFound, AllOf(HasSubstr(path), HasSubstr("no such file"))));
}

void ExpectRefused(const json& j, const std::string& message) {
  EXPECT_THAT(ParseBpeTokenizer(j.dump(), "m/tokenizer.json", -1),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("m/tokenizer.json: "), HasSubstr(message))));
}

TEST(BpeTokenizerTest, RefusesBadFiles) {
  EXPECT_THAT(
      ParseBpeTokenizer("{\"model\": ", "m/tokenizer.json", -1),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("m/tokenizer.json: not valid JSON")));
  ExpectRefused(json::array(), "top level is not a JSON object");

  json j = MakeTokenizer();
  j["model"]["type"] = "WordPiece";
  ExpectRefused(j, "model.type is \"WordPiece\", only \"BPE\" is supported");

  j = MakeTokenizer();
  j["model"]["merges"].push_back("Ġ zz");
  ExpectRefused(j, "model.merges[17] \"Ġ zz\": \"zz\" is not in model.vocab");

  j = MakeTokenizer();
  j["model"]["merges"].push_back(json::array({"t", "h"}));
  ExpectRefused(j, "model.merges[17] [\"t\",\"h\"]: the result \"th\" is not in model.vocab");

  j = MakeTokenizer();
  j["model"]["merges"].push_back("a b c");
  ExpectRefused(j, "model.merges[17] \"a b c\" is not two tokens separated by one space");

  j = MakeTokenizer();
  j["model"]["vocab"]["zz"] = 5;
  ExpectRefused(j, "duplicate id 5 in model.vocab");

  j = MakeTokenizer();
  j["model"]["vocab"]["zz"] = -3;
  ExpectRefused(j, "model.vocab[\"zz\"] is not an id");

  j = MakeTokenizer();
  j["added_tokens"].push_back(AddedToken(301, "<other>"));
  ExpectRefused(j, "duplicate id 301 among added_tokens");

  j = MakeTokenizer();
  j["added_tokens"].push_back(AddedToken(257, "<other>"));
  ExpectRefused(j, "id 257 already belongs to \"he\" in model.vocab");

  j = MakeTokenizer();
  j["model"]["vocab"].erase("Ċ");
  ExpectRefused(j, "byte 0x0A (symbol \"Ċ\") has no token in model.vocab");

  j = MakeTokenizer();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  ExpectRefused(j, "pre_tokenizer type \"Whitespace\" is not supported");

  j = MakeTokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Digits"}}, {{"type", "ByteLevel"}}}}};
  ExpectRefused(j, "pre_tokenizer type \"Digits\" is not supported");

  j = MakeTokenizer();
  j["pre_tokenizer"] = nullptr;
  ExpectRefused(j, "pre_tokenizer is null");

  j = MakeTokenizer();
  j["decoder"] = {{"type", "Metaspace"}};
  ExpectRefused(j, "decoder type \"Metaspace\" is not supported");

  j = MakeTokenizer();
  j["normalizer"] = {{"type", "Lowercase"}};
  ExpectRefused(j, "normalizer type \"Lowercase\" is not supported");

  j = MakeTokenizer();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<nope>"}, {"type_id", 0}}}}}}};
  ExpectRefused(j, "post_processor names special token \"<nope>\", which is not an added token");

  j = MakeTokenizer();
  j["added_tokens"].push_back({{"id", "x"}, {"content", "<x>"}});
  ExpectRefused(j, "needs an id in [0, ");

  j = MakeTokenizer();
  j["model"]["vocab"] = json::array();
  ExpectRefused(j, "model.vocab is not an object");
}

}  // namespace
}  // namespace sy::engine
