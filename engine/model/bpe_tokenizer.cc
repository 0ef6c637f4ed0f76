#include "engine/model/bpe_tokenizer.h"

#include "engine/model/bpe_pretokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace sy::engine {
namespace {

using namespace bpe_internal;  // NOLINT(build/namespaces): this tokenizer's own helpers

using json = nlohmann::json;

// Ids above this are refused: they would make the id-indexed tables huge and
// no real vocabulary comes near it.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// The Split regexes recognised verbatim; any other one gets GPT-2's scanner.
constexpr std::string_view kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

struct Merge {
  int32_t rank;
  int32_t result;
};

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

bool IsWordChar(const Char& c) { return c.cls == CharClass::kLetter || c.cls == CharClass::kDigit; }

struct BpeData {
  std::array<std::string, 256> byte_symbol;  // UTF-8 of each byte's code point
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<uint64_t, Merge> merges;
  std::vector<AddedToken> added;                              // longest content first
  std::array<std::vector<int32_t>, 256> added_by_first_byte;  // indices into `added`
  std::vector<std::string> decoded;                           // id -> bytes
  std::vector<uint8_t> emit_on_decode;                        // id -> 0 (unknown or silent) / 1
  int vocab_size = 0;
  int32_t bos = -1;
  int32_t eos = -1;
  bool add_prefix_space = false;
  bool use_regex = true;
  WordSplit split = WordSplit::kGpt2;
  bool ignore_merges = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeData d) : d_(std::move(d)) {}

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos && d_.bos >= 0) out.push_back(d_.bos);
    size_t seg_start = 0, pos = 0;
    while (pos < text.size()) {
      size_t start = 0, end = 0;
      const AddedToken* tok = MatchAdded(text, pos, seg_start, &start, &end);
      if (tok == nullptr) {
        ++pos;
        continue;
      }
      EncodeSegment(text.substr(seg_start, start - seg_start), out);
      out.push_back(tok->id);
      seg_start = pos = end;
    }
    EncodeSegment(text.substr(seg_start), out);
    return out;
  }

  std::string Decode(const std::vector<int32_t>& tokens) const override {
    std::string out;
    for (int32_t t : tokens) {
      if (t >= 0 && static_cast<size_t>(t) < d_.decoded.size() && d_.emit_on_decode[t]) {
        out += d_.decoded[t];
      }
    }
    return out;
  }

  int vocab() const override { return d_.vocab_size; }
  int32_t bos() const override { return d_.bos; }
  int32_t eos() const override { return d_.eos; }
  std::string_view kind() const override { return "bpe"; }

 private:
  // The longest added token at text[pos], honouring single_word; on a match
  // sets [*start, *end) to the span it consumes (widened over whitespace by
  // lstrip/rstrip, never before `floor`).
  const AddedToken* MatchAdded(std::string_view text, size_t pos, size_t floor, size_t* start,
                               size_t* end) const {
    for (int32_t k : d_.added_by_first_byte[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& t = d_.added[k];
      if (text.compare(pos, t.content.size(), t.content) != 0) continue;
      size_t s = pos, e = pos + t.content.size();
      if (t.single_word) {
        const bool word_before = pos > 0 && IsWordChar(ClassifyAt(text, pos - 1));
        const bool word_after = e < text.size() && IsWordChar(ClassifyAt(text, e));
        if (word_before || word_after) continue;
      }
      if (t.lstrip) {
        while (s > floor && ClassifyAt(text, s - 1).cls == CharClass::kSpace) --s;
      }
      if (t.rstrip) {
        while (e < text.size()) {
          const Char c = ClassifyAt(text, e);
          if (c.cls != CharClass::kSpace) break;
          e += c.len;
        }
      }
      *start = s;
      *end = e;
      return &t;
    }
    return nullptr;
  }

  void EncodeSegment(std::string_view seg, std::vector<int32_t>& out) const {
    if (seg.empty()) return;
    std::string prefixed;
    if (d_.add_prefix_space && seg.front() != ' ') {
      prefixed = " ";
      prefixed += seg;
      seg = prefixed;
    }
    if (!d_.use_regex) {
      EncodeWord(seg, out);
      return;
    }
    ForEachWord(seg, d_.split, [&](std::string_view word) { EncodeWord(word, out); });
  }

  // Rank-ordered merging: repeatedly merge the adjacent pair with the lowest
  // merge rank (leftmost on ties), via a heap over a linked list of symbols.
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
    if (d_.ignore_merges) {
      std::string symbols;
      for (unsigned char c : word) symbols += d_.byte_symbol[c];
      if (auto it = d_.vocab.find(symbols); it != d_.vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    if (word.size() == 1) {
      out.push_back(d_.byte_id[static_cast<unsigned char>(word[0])]);
      return;
    }
    struct Sym {
      int32_t id, prev, next;
    };
    struct Cand {
      int32_t rank, pos, left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    const int32_t n = static_cast<int32_t>(word.size());
    std::vector<Sym> sym(n);
    for (int32_t i = 0; i < n; ++i) {
      sym[i] = {d_.byte_id[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
    }
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    const auto push = [&](int32_t left) {
      if (left < 0 || sym[left].next < 0) return;
      const int32_t right = sym[left].next;
      auto it = d_.merges.find(PairKey(sym[left].id, sym[right].id));
      if (it != d_.merges.end()) heap.push({it->second.rank, left, sym[left].id, sym[right].id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      // Entries go stale when a neighbour merged; the pair's ids tell.
      const int32_t right = sym[c.pos].next;
      if (sym[c.pos].id != c.left || right < 0 || sym[right].id != c.right) continue;
      sym[c.pos].id = d_.merges.at(PairKey(c.left, c.right)).result;
      sym[c.pos].next = sym[right].next;
      if (sym[right].next >= 0) sym[sym[right].next].prev = c.pos;
      sym[right].id = -1;
      push(sym[c.pos].prev);
      push(c.pos);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  }

  BpeData d_;
};

// ---- Loading --------------------------------------------------------------

std::string Quote(std::string_view s) { return json(std::string(s)).dump(); }

std::string TypeOf(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"];
  return "<no type>";
}

// Accepts ByteLevel, and a Sequence of Split and ByteLevel steps. A Split
// with Llama-3's or Qwen2's pattern gets its scanner, any other GPT-2's.
Status ReadPreTokenizer(const json& pt, BpeData& d) {
  if (pt.is_null()) {
    return InvalidArgument("pre_tokenizer is null; byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  std::vector<const json*> steps;
  if (TypeOf(pt) == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array()) {
    for (const json& s : pt["pretokenizers"]) steps.push_back(&s);
  } else {
    steps.push_back(&pt);
  }
  bool byte_level = false, split = false;
  for (const json* s : steps) {
    const std::string type = TypeOf(*s);
    if (type == "Split") {
      split = true;
      const json regex = s->value("pattern", json::object()).value("Regex", json());
      const std::string pattern = regex.is_string() ? regex.get<std::string>() : "";
      if (pattern == kLlama3Pattern) d.split = WordSplit::kLlama3;
      if (pattern == kQwen2Pattern) d.split = WordSplit::kQwen2;
    } else if (type == "ByteLevel") {
      byte_level = true;
      d.add_prefix_space = s->value("add_prefix_space", false);
      d.use_regex = s->value("use_regex", true);
    } else {
      return InvalidArgument("pre_tokenizer type " + Quote(type) +
                             " is not supported (only ByteLevel, or a Sequence of Split and "
                             "ByteLevel)");
    }
  }
  if (!byte_level) return InvalidArgument("pre_tokenizer has no ByteLevel step");
  if (split) d.use_regex = true;
  return Status::Ok();
}

Result<int32_t> SpecialId(const json& tmpl, const std::string& name,
                          const std::unordered_map<std::string, int32_t>& added) {
  if (tmpl.contains("special_tokens") && tmpl["special_tokens"].contains(name)) {
    const json& ids = tmpl["special_tokens"][name]["ids"];
    if (ids.is_array() && !ids.empty() && ids[0].is_number_integer()) return ids[0].get<int32_t>();
  }
  if (auto it = added.find(name); it != added.end()) return it->second;
  return InvalidArgument("post_processor names special token " + Quote(name) +
                         ", which is not an added token");
}

// The BOS of a TemplateProcessing (possibly inside a Sequence) whose
// "single" template starts with a special token; -1 when there is none.
Result<int32_t> TemplateBos(const json& pp, const std::unordered_map<std::string, int32_t>& added) {
  if (!pp.is_object()) return -1;
  const std::string type = TypeOf(pp);
  if (type == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) {
      ASSIGN_OR_RETURN(int32_t bos, TemplateBos(p, added));
      if (bos >= 0) return bos;
    }
    return -1;
  }
  if (type != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array() ||
      pp["single"].empty()) {
    return -1;
  }
  const json& first = pp["single"][0];
  if (!first.is_object() || !first.contains("SpecialToken")) return -1;
  return SpecialId(pp, first["SpecialToken"].at("id").get<std::string>(), added);
}

int32_t FirstAdded(const std::unordered_map<std::string, int32_t>& added,
                   std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto it = added.find(name); it != added.end()) return it->second;
  }
  return -1;
}

// Everything but the model's tables: refuses what this tokenizer cannot do.
Status ReadComponents(const json& root, BpeData& d) {
  const json& model = root["model"];
  if (TypeOf(model) != "BPE") {
    return InvalidArgument("model.type is " + Quote(TypeOf(model)) + ", only \"BPE\" is supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return InvalidArgument(std::string("model.") + key + " is not supported by byte-level BPE");
    }
  }
  const json normalizer = root.value("normalizer", json());
  if (!normalizer.is_null() && TypeOf(normalizer) != "NFC") {
    return InvalidArgument("normalizer type " + Quote(TypeOf(normalizer)) +
                           " is not supported (only none or NFC)");
  }
  const json decoder = root.value("decoder", json());
  if (!decoder.is_null() && TypeOf(decoder) != "ByteLevel") {
    return InvalidArgument("decoder type " + Quote(TypeOf(decoder)) +
                           " is not supported (only ByteLevel)");
  }
  d.ignore_merges = model.value("ignore_merges", false);
  return ReadPreTokenizer(root.value("pre_tokenizer", json()), d);
}

// model.vocab into d.vocab and by_id (id -> token); checks that ids are unique
// and that every byte has a token.
Status ReadVocab(const json& model, BpeData& d, std::vector<const std::string*>& by_id) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return InvalidArgument("model.vocab is not an object");
  }
  d.vocab.reserve(model["vocab"].size());
  for (const auto& [token, id_json] : model["vocab"].items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > kMaxTokenId) {
      return InvalidArgument("model.vocab[" + Quote(token) + "] is not an id in [0, " +
                             std::to_string(kMaxTokenId) + "]: " + id_json.dump());
    }
    const int32_t id = id_json.get<int32_t>();
    if (static_cast<size_t>(id) >= by_id.size()) by_id.resize(id + 1, nullptr);
    if (by_id[id] != nullptr) {
      return InvalidArgument("duplicate id " + std::to_string(id) +
                             " in model.vocab: " + Quote(*by_id[id]) + " and " + Quote(token));
    }
    by_id[id] = &d.vocab.emplace(token, id).first->first;  // node keys stay put
  }
  const std::array<char32_t, 256> to_cp = ByteToCodePoint();
  for (int b = 0; b < 256; ++b) {
    AppendUtf8(d.byte_symbol[b], to_cp[b]);
    auto it = d.vocab.find(d.byte_symbol[b]);
    if (it == d.vocab.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return InvalidArgument(std::string("byte ") + hex + " (symbol " + Quote(d.byte_symbol[b]) +
                             ") has no token in model.vocab; byte-level BPE needs all 256");
    }
    d.byte_id[b] = it->second;
  }
  return Status::Ok();
}

// model.merges: "a b" strings (older files) or ["a", "b"] pairs (newer); the
// position is the rank.
Status ReadMerges(const json& model, BpeData& d) {
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return InvalidArgument("model.merges is not an array");
  }
  const json& merges = model["merges"];
  d.merges.reserve(merges.size());
  std::string parts[3];
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    const auto where = [&] { return "model.merges[" + std::to_string(rank) + "] " + m.dump(); };
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return InvalidArgument(where() + " is not two tokens separated by one space");
      }
      parts[0] = s.substr(0, sp), parts[1] = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      parts[0] = m[0].get<std::string>(), parts[1] = m[1].get<std::string>();
    } else {
      return InvalidArgument(where() + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    parts[2] = parts[0] + parts[1];
    int32_t ids[3];
    for (int k = 0; k < 3; ++k) {
      auto it = d.vocab.find(parts[k]);
      if (it == d.vocab.end()) {
        return InvalidArgument(where() + ": " + (k == 2 ? "the result " : "") + Quote(parts[k]) +
                               " is not in model.vocab");
      }
      ids[k] = it->second;
    }
    d.merges[PairKey(ids[0], ids[1])] = {static_cast<int32_t>(rank), ids[2]};
  }
  return Status::Ok();
}

// What each vocab token decodes to, as the ByteLevel decoder does: every
// character maps back to its byte, or (some character is not in the table)
// the token stands for its own UTF-8.
void BuildDecodeTable(const std::vector<const std::string*>& by_id, BpeData& d) {
  std::array<int, 512> to_byte;  // the table's code points are all below 512
  to_byte.fill(-1);
  const std::array<char32_t, 256> to_cp = ByteToCodePoint();
  for (int b = 0; b < 256; ++b) to_byte[to_cp[b]] = b;
  d.decoded.assign(by_id.size(), std::string());
  d.emit_on_decode.assign(by_id.size(), 0);
  for (size_t id = 0; id < by_id.size(); ++id) {
    if (by_id[id] == nullptr) continue;
    const std::string& tok = *by_id[id];
    std::string& bytes = d.decoded[id];
    for (size_t i = 0; i < tok.size();) {
      char32_t cp = 0;
      const size_t len = DecodeUtf8(tok, i, &cp);
      if (len == 0 || cp >= to_byte.size() || to_byte[cp] < 0) {
        bytes = tok;
        break;
      }
      bytes.push_back(static_cast<char>(to_byte[cp]));
      i += len;
    }
    d.emit_on_decode[id] = 1;
  }
}

// added_tokens into d.added (longest first) and the decode table (content,
// verbatim); returns content -> id.
Result<std::unordered_map<std::string, int32_t>> ReadAddedTokens(
    const json& root, std::vector<const std::string*>& by_id, BpeData& d) {
  std::unordered_map<std::string, int32_t> ids;
  const json list = root.value("added_tokens", json());
  if (list.is_null()) return ids;
  if (!list.is_array()) return InvalidArgument("added_tokens is not an array");
  std::vector<bool> seen(by_id.size(), false);
  for (const json& a : list) {
    const auto where = [&] { return "added_tokens entry " + a.dump(); };
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string() ||
        a["content"].get<std::string>().empty() || a["id"].get<int64_t>() < 0 ||
        a["id"].get<int64_t>() > kMaxTokenId) {
      return InvalidArgument(where() + " needs an id in [0, " + std::to_string(kMaxTokenId) +
                             "] and a non-empty content");
    }
    AddedToken t{a["id"].get<int32_t>(), a["content"].get<std::string>(), a.value("lstrip", false),
                 a.value("rstrip", false), a.value("single_word", false)};
    if (static_cast<size_t>(t.id) >= by_id.size()) {
      by_id.resize(t.id + 1, nullptr);
      seen.resize(t.id + 1, false);
      d.decoded.resize(t.id + 1);
      d.emit_on_decode.resize(t.id + 1, 0);
    }
    if (seen[t.id]) {
      return InvalidArgument(where() + ": duplicate id " + std::to_string(t.id) +
                             " among added_tokens");
    }
    if (by_id[t.id] != nullptr && *by_id[t.id] != t.content) {
      return InvalidArgument(where() + ": id " + std::to_string(t.id) + " already belongs to " +
                             Quote(*by_id[t.id]) + " in model.vocab");
    }
    seen[t.id] = true;
    ids.emplace(t.content, t.id);
    d.decoded[t.id] = t.content;
    d.emit_on_decode[t.id] = 1;
    d.added.push_back(std::move(t));
  }
  std::stable_sort(d.added.begin(), d.added.end(), [](const AddedToken& x, const AddedToken& y) {
    return x.content.size() > y.content.size();
  });
  for (size_t k = 0; k < d.added.size(); ++k) {
    d.added_by_first_byte[static_cast<unsigned char>(d.added[k].content[0])].push_back(
        static_cast<int32_t>(k));
  }
  return ids;
}

Result<std::unique_ptr<Tokenizer>> Parse(const json& root, int32_t eos) {
  if (!root.is_object()) return InvalidArgument("top level is not a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) {
    return InvalidArgument("no \"model\" object");
  }
  BpeData d;
  RETURN_IF_ERROR(ReadComponents(root, d));
  std::vector<const std::string*> by_id;  // id -> vocab token; null for holes
  RETURN_IF_ERROR(ReadVocab(root["model"], d, by_id));
  RETURN_IF_ERROR(ReadMerges(root["model"], d));
  BuildDecodeTable(by_id, d);
  ASSIGN_OR_RETURN(auto added, ReadAddedTokens(root, by_id, d));
  d.vocab_size = static_cast<int>(by_id.size());

  ASSIGN_OR_RETURN(d.bos, TemplateBos(root.value("post_processor", json()), added));
  if (d.bos < 0) d.bos = FirstAdded(added, {"<|startoftext|>", "<s>", "<|begin_of_text|>"});
  d.eos = eos >= 0 ? eos
                   : FirstAdded(added, {"<|endoftext|>", "</s>", "<|end_of_text|>", "<|im_end|>"});
  const int32_t pad = FirstAdded(added, {"<pad>", "<|pad|>", "[PAD]"});
  for (int32_t silent : {d.bos, d.eos, pad}) {
    if (silent >= 0 && silent < d.vocab_size) d.emit_on_decode[silent] = 0;
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<BpeTokenizer>(std::move(d)));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> ParseBpeTokenizer(const std::string& json_text,
                                                     const std::string& origin, int32_t eos) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument(origin + ": not valid JSON: " + e.what());
  }
  try {
    Result<std::unique_ptr<Tokenizer>> tok = Parse(root, eos);
    if (!tok.ok()) return tok.status().WithContext(origin);
    return tok;
  } catch (const json::exception& e) {
    return InvalidArgument(origin + ": malformed tokenizer.json: " + e.what());
  }
}

std::vector<std::string_view> SplitWords(std::string_view text, WordSplit style) {
  std::vector<std::string_view> words;
  ForEachWord(text, style, [&](std::string_view w) { words.push_back(w); });
  return words;
}

Result<std::unique_ptr<Tokenizer>> LoadBpeTokenizer(const std::string& path, int32_t eos) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound(path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return Unavailable(path + ": read failed");
  return ParseBpeTokenizer(text.str(), path, eos);
}

}  // namespace sy::engine
