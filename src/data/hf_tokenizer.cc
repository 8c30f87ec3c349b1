// data/hf_tokenizer.cc — HfTokenizer: tokenizer.json loading, pre-tokenization, BPE, decoding.
#include "data/hf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/unicode_text.h"

namespace moe4d {
namespace {

using nlohmann::json;

// GPT-2's pattern, which ByteLevel applies itself when "use_regex" is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kEosCandidates[] = {"<|endoftext|>", "<|end_of_text|>", "<｜end▁of▁sentence｜>", "</s>", "<eos>"};

std::string type_of(const json& j) {
  if (!j.is_object()) return j.dump();
  return j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : std::string("(no type)");
}

bool flag(const json& j, const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); }

bool is_null_or_empty(const json& j, const char* key) {
  return !j.contains(key) || j[key].is_null() || (j[key].is_string() && j[key].get<std::string>().empty());
}

}  // namespace

namespace {

struct ByteLevelMap {
  char32_t to_char[256];
  int16_t to_byte[0x144];  // -1: not a byte-level character
  ByteLevelMap() {
    std::fill(std::begin(to_byte), std::end(to_byte), int16_t{-1});
    int n = 0;  // printable bytes map to themselves, the others, in byte order, to U+0100 onwards
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + n++);
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap map;
  return map;
}

}  // namespace

char32_t byte_level_char(unsigned char byte) { return byte_level_map().to_char[byte]; }

HfTokenizer::HfTokenizer(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer {} not found or unreadable", path);
  std::stringstream text;
  text << in.rdbuf();
  load(text.str());
}

void HfTokenizer::load(const std::string& text) {
  const std::string& where = path_;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("tokenizer {} is not valid JSON: {}", where, e.what());
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    fail("tokenizer {}: no \"model\" object (expected a Hugging Face tokenizer.json)", where);
  const json& model = j["model"];
  const std::string model_type = model.contains("type") ? type_of(model) : "BPE";
  if (model_type != "BPE")
    fail("tokenizer {}: model type {} is not supported (expected BPE with the ByteLevel pre-tokenizer)", where,
         model_type);
  if (j.contains("truncation") && !j["truncation"].is_null())
    fail("tokenizer {}: \"truncation\" is set; moe4d encodes whole documents (expected null)", where);
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"] != 0.0)
    fail("tokenizer {}: BPE dropout {} is not supported (expected null)", where, model["dropout"].dump());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!is_null_or_empty(model, key))
      fail("tokenizer {}: BPE {} {} is not supported by byte-level BPE (expected null)", where, key, model[key].dump());
  if (flag(model, "byte_fallback"))
    fail("tokenizer {}: BPE byte_fallback is a sentencepiece-style model, not byte-level BPE (not supported)", where);
  ignore_merges_ = flag(model, "ignore_merges");

  // Normalizer: none or NFC.
  std::vector<json> normalizers;
  if (j.contains("normalizer") && !j["normalizer"].is_null()) normalizers.push_back(j["normalizer"]);
  while (!normalizers.empty()) {
    const json n = normalizers.back();
    normalizers.pop_back();
    const std::string type = type_of(n);
    if (type == "NFC") {
      nfc_ = true;
    } else if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
      for (const json& k : n["normalizers"]) normalizers.push_back(k);
    } else {
      fail("tokenizer {}: normalizer {} is not supported (expected none or NFC)", where, type);
    }
  }

  // Pre-tokenizer: Split(Regex, Isolated)* then ByteLevel.
  std::vector<json> steps;
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
    const json& p = j["pre_tokenizer"];
    if (type_of(p) == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array())
      steps.assign(p["pretokenizers"].begin(), p["pretokenizers"].end());
    else
      steps.push_back(p);
  }
  if (steps.empty() || type_of(steps.back()) != "ByteLevel")
    fail("tokenizer {}: BPE without the ByteLevel pre-tokenizer last is not supported (pre-tokenizers: {}; moe4d "
         "reads byte-level BPE only)",
         where, steps.empty() ? std::string("none") : type_of(steps.back()));
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string type = type_of(s);
    if (type == "ByteLevel" && i + 1 == steps.size()) {
      if (flag(s, "add_prefix_space"))
        fail("tokenizer {}: ByteLevel add_prefix_space true is not supported (expected false)", where);
      if (!s.contains("use_regex") || flag(s, "use_regex")) splits_.emplace_back(kGpt2Pattern);
    } else if (type == "Split") {
      if (!s.contains("pattern") || !s["pattern"].is_object() || !s["pattern"].contains("Regex") ||
          !s["pattern"]["Regex"].is_string())
        fail("tokenizer {}: Split pre-tokenizer pattern {} is not supported (expected {{\"Regex\": ...}})", where,
             s.contains("pattern") ? s["pattern"].dump() : std::string("missing"));
      const std::string behavior = s.value("behavior", "");
      if (behavior != "Isolated" || flag(s, "invert"))
        fail("tokenizer {}: Split behavior {}{} is not supported (expected Isolated, invert false)", where,
             behavior.empty() ? std::string("(missing)") : behavior, flag(s, "invert") ? " with invert" : "");
      splits_.emplace_back(s["pattern"]["Regex"].get<std::string>());
    } else {
      fail("tokenizer {}: pre-tokenizer {} is not supported (expected Split with a Regex, then ByteLevel)", where,
           type);
    }
  }
  if (!j.contains("decoder") || type_of(j["decoder"]) != "ByteLevel")
    fail("tokenizer {}: decoder {} is not supported (expected ByteLevel)", where,
         j.contains("decoder") ? type_of(j["decoder"]) : std::string("(missing)"));

  // Vocabulary and added tokens.
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("tokenizer {}: model has no \"vocab\" object", where);
  auto put = [&](const std::string& token, const json& id_json, bool added) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= (int64_t{1} << 31))
      fail("tokenizer {}: token {} has id {}, expected a non-negative integer", where, json(token).dump(),
           id_json.dump());
    const size_t id = id_json.get<size_t>();
    if (id >= tokens_.size()) tokens_.resize(id + 1), is_added_.resize(id + 1);
    tokens_[id] = token;
    is_added_[id] = added;
  };
  for (const auto& [token, id] : model["vocab"].items()) {
    put(token, id, false);
    vocab_.emplace(token, id.get<int>());
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail("tokenizer {}: added token {} lacks \"id\" or \"content\"", where, a.dump());
      const std::string content = a["content"].get<std::string>();
      for (const char* key : {"single_word", "lstrip", "rstrip"})
        if (flag(a, key))
          fail("tokenizer {}: added token {} has {} true, which is not supported (expected false)", where,
               json(content).dump(), key);
      put(content, a["id"], true);
      if (!content.empty()) added_.push_back({content, a["id"].get<int>()});
    }
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (size_t k = 0; k < added_.size(); ++k)
    added_by_first_byte_[static_cast<unsigned char>(added_[k].content[0])].push_back(static_cast<int>(k));
  if (tokens_.empty()) fail("tokenizer {}: the vocabulary is empty", where);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    unicode::append_utf8(ch, byte_level_char(static_cast<unsigned char>(b)));
    const auto it = vocab_.find(ch);
    if (it == vocab_.end())
      fail("tokenizer {}: the vocabulary lacks the byte-level character of byte 0x{:02x} ({}); byte-level BPE needs "
           "all 256",
           where, b, ch);
    byte_ids_[b] = it->second;
  }

  // Merges: "a b" or ["a", "b"]; rank = position.
  if (!model.contains("merges") || !model["merges"].is_array()) fail("tokenizer {}: model has no \"merges\" list", where);
  int rank = 0;
  for (const json& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail("tokenizer {}: merge {} is not two tokens separated by one space", where, m.dump());
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    } else {
      fail("tokenizer {}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", where, m.dump());
    }
    const auto l = vocab_.find(left), r = vocab_.find(right), merged = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || merged == vocab_.end())
      fail("tokenizer {}: merge {} names a token that is not in the vocabulary", where, m.dump());
    const uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
    merges_.emplace(key, std::make_pair(rank++, merged->second));  // the first of duplicate merges wins
  }

  for (const char* candidate : kEosCandidates) {
    for (const AddedToken& a : added_)
      if (a.content == candidate && eos_id_ < 0) eos_id_ = a.id;
    if (eos_id_ < 0 && vocab_.count(candidate)) eos_id_ = vocab_.at(candidate);
    if (eos_id_ >= 0) break;
  }
  if (eos_id_ < 0)
    fail("tokenizer {} defines no end-of-text token (expected one of <|endoftext|>, <|end_of_text|>, "
         "<｜end▁of▁sentence｜>, </s>, <eos>); moe4d separates documents with it",
         where);
}

std::vector<int> HfTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  size_t segment = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (int k : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {  // longest first: leftmost-longest
      const AddedToken& a = added_[k];
      if (text.compare(i, a.content.size(), a.content) != 0) continue;
      encode_segment(text.substr(segment, i - segment), ids);
      ids.push_back(a.id);
      i += a.content.size() - 1;
      segment = i + 1;
      break;
    }
  }
  encode_segment(text.substr(segment), ids);
  return ids;
}

void HfTokenizer::encode_segment(std::string_view segment, std::vector<int>& ids) const {
  if (segment.empty()) return;
  std::u32string text = unicode::decode_utf8(segment);
  if (nfc_) text = unicode::nfc(text);
  // Each split refines the pieces of the one before: matches and the gaps between them.
  std::vector<std::pair<size_t, size_t>> pieces{{0, text.size()}}, next;
  for (const PretokenizerRegex& split : splits_) {
    next.clear();
    for (const auto& [begin, end] : pieces) {
      const std::u32string_view piece = std::u32string_view(text).substr(begin, end - begin);
      size_t at = 0;
      while (auto match = split.find(piece, at)) {
        if (match->first > at) next.emplace_back(begin + at, begin + match->first);
        next.emplace_back(begin + match->first, begin + match->second);
        at = match->second;
      }
      if (at < piece.size()) next.emplace_back(begin + at, end);
    }
    pieces.swap(next);
  }
  for (const auto& [begin, end] : pieces)
    encode_piece(unicode::encode_utf8(std::u32string_view(text).substr(begin, end - begin)), ids);
}

void HfTokenizer::encode_piece(std::string_view bytes, std::vector<int>& ids) const {
  if (ignore_merges_) {
    std::string mapped;
    for (unsigned char b : bytes) unicode::append_utf8(mapped, byte_level_char(b));
    if (const auto it = vocab_.find(mapped); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  // Merge the lowest-ranked adjacent pair, the leftmost of equals, until none is left: a heap of
  // candidate pairs (rank, left position) over a linked list of symbols, O(n log n) (a piece can be
  // a 100 KB run of letters). A popped pair is stale if either side has changed since it was pushed.
  struct Symbol {
    int id, prev, next;
  };
  std::vector<Symbol> symbols(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i)
    symbols[i] = {byte_ids_[static_cast<unsigned char>(bytes[i])], static_cast<int>(i) - 1,
                  i + 1 < bytes.size() ? static_cast<int>(i) + 1 : -1};
  struct Candidate {
    int rank, left, right_id, left_id, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int a = symbols[left].id, b = symbols[symbols[left].next].id;
    const auto it = merges_.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
    if (it != merges_.end()) heap.push({it->second.first, left, b, a, it->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;  // stale
    const int gone = left.next;
    left.id = c.merged;
    left.next = symbols[gone].next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    symbols[gone].id = -1;  // dead
    push(left.prev);
    push(c.left);
  }
  for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[i].next) ids.push_back(symbols[i].id);
}

std::string HfTokenizer::decode(std::span<const int> ids) const {
  const ByteLevelMap& map = byte_level_map();
  std::string out;
  for (int id : ids) {
    if (id < 0 || id >= vocab_size() || (tokens_[id].empty() && !is_added_[id]))
      fail("token id {} is outside the vocabulary of tokenizer {} (ids 0..{}, those that name a token)", id, path_,
           vocab_size() - 1);
    if (id == eos_id_) continue;
    if (is_added_[id]) {
      out += tokens_[id];
      continue;
    }
    for (char32_t cp : unicode::decode_utf8(tokens_[id])) {  // the inverse byte map; others stand for themselves
      const int byte = cp < 0x144 ? map.to_byte[cp] : -1;
      if (byte >= 0) out += static_cast<char>(byte);
      else unicode::append_utf8(out, cp);
    }
  }
  return out;
}

std::string HfTokenizer::name() const {
  return fmt::format("Hugging Face byte-level BPE ({} ids) from {}", vocab_size(), path_);
}

}  // namespace moe4d
