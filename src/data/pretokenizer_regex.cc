// data/pretokenizer_regex.cc — parser, compiler and backtracking matcher of PretokenizerRegex.
#include "data/pretokenizer_regex.h"

#include <limits>
#include <memory>

#include "core/error.h"
#include "data/unicode_text.h"

namespace moe4d {
namespace {

using Op = PretokenizerRegex::Op;
using Inst = PretokenizerRegex::Inst;
using CharClass = PretokenizerRegex::CharClass;
constexpr int kUnbounded = std::numeric_limits<int>::max();

struct Node {
  enum Kind { kClass, kSeq, kAlt, kRepeat, kLook } kind;
  int cls = 0;                 // kClass
  std::vector<Node> kids;      // kSeq, kAlt; kRepeat and kLook: one
  int min = 0, max = 0;        // kRepeat
  bool greedy = true;          // kRepeat
  bool negate = false;         // kLook
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::kClass: return false;
    case Node::kLook: return true;
    case Node::kRepeat: return n.min == 0 || nullable(n.kids[0]);
    case Node::kSeq:
      for (const Node& k : n.kids)
        if (!nullable(k)) return false;
      return true;
    case Node::kAlt:
      for (const Node& k : n.kids)
        if (nullable(k)) return true;
      return false;
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<CharClass>& classes)
      : source_(pattern), p_(unicode::decode_utf8(pattern)), classes_(classes) {}

  Node parse() {
    Node n = alternation();
    if (i_ < p_.size()) error("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("pre-tokenizer regex {}: {} (at character {}; supported: literals, ., [...], \\p{{L|M|N|P|S|Z|C}}, \\s, "
         "(?:...), (?i:...), (?=...), (?!...), ? * + {{n,m}})",
         source_, what, i_);
  }
  bool at_end() const { return i_ >= p_.size(); }
  char32_t peek() const { return p_[i_]; }

  Node alternation() {
    Node alt{Node::kAlt};
    alt.kids.push_back(sequence());
    while (!at_end() && peek() == '|') {
      ++i_;
      alt.kids.push_back(sequence());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Node sequence() {
    Node seq{Node::kSeq};
    while (!at_end() && peek() != '|' && peek() != ')') seq.kids.push_back(quantified(atom()));
    return seq;
  }

  int number() {
    if (at_end() || peek() < '0' || peek() > '9') error("expected a number in {n,m}");
    int v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') v = v * 10 + static_cast<int>(p_[i_++] - U'0');
    return v;
  }

  Node quantified(Node atom) {
    if (at_end()) return atom;
    int min = 0, max = 0;
    switch (peek()) {
      case '?': min = 0, max = 1, ++i_; break;
      case '*': min = 0, max = kUnbounded, ++i_; break;
      case '+': min = 1, max = kUnbounded, ++i_; break;
      case '{':
        ++i_;
        min = max = number();
        if (!at_end() && peek() == ',') {
          ++i_;
          max = !at_end() && peek() == '}' ? kUnbounded : number();
        }
        if (at_end() || peek() != '}' || max < min) error("malformed {n,m}");
        ++i_;
        break;
      default: return atom;
    }
    if (atom.kind == Node::kLook) error("a quantified lookahead");
    if (max == kUnbounded && nullable(atom)) error("a repeated sub-pattern that can match nothing");
    Node r{Node::kRepeat};
    r.min = min, r.max = max;
    if (!at_end() && peek() == '?') r.greedy = false, ++i_;
    else if (!at_end() && peek() == '+') error("a possessive quantifier");
    else if (!at_end() && (peek() == '*' || peek() == '{')) error("a doubled quantifier");
    r.kids.push_back(std::move(atom));
    return r;
  }

  Node class_node(CharClass c) {
    classes_.push_back(std::move(c));
    Node n{Node::kClass};
    n.cls = static_cast<int>(classes_.size()) - 1;
    return n;
  }

  // Inside (?i:...) a letter also matches its other case and, for s, U+017F (long s), as Unicode's
  // simple case folding has it (Oniguruma and Python's re agree); other letters of other scripts
  // are not folded.
  void add_char(CharClass& c, char32_t cp) const {
    c.ranges.emplace_back(cp, cp);
    if (!fold_ || cp >= 0x80 || (cp | 0x20) < 'a' || (cp | 0x20) > 'z') return;
    c.ranges.emplace_back(cp ^ 0x20, cp ^ 0x20);
    if ((cp | 0x20) == 's') c.ranges.emplace_back(0x17F, 0x17F);
    if ((cp | 0x20) == 'k') c.ranges.emplace_back(0x212A, 0x212A);  // Kelvin sign
  }

  Node atom() {
    const char32_t c = p_[i_++];
    switch (c) {
      case '(': return group();
      case '[': return class_node(bracket());
      case '.': {
        CharClass cls;
        cls.any_but_newline = true;
        return class_node(cls);
      }
      case '^': case '$': error("an anchor");
      case '*': case '+': case '?': case '{': error("a quantifier with nothing to repeat");
      case '\\': {
        CharClass cls;
        escape(cls);
        return class_node(cls);
      }
      default: {
        CharClass cls;
        add_char(cls, c);
        return class_node(cls);
      }
    }
  }

  Node group() {
    bool saved_fold = fold_;
    Node::Kind kind = Node::kSeq;
    bool negate = false;
    if (!at_end() && peek() == '?') {
      ++i_;
      const char32_t k = at_end() ? 0 : p_[i_++];
      if (k == ':') {
      } else if (k == '=' || k == '!') {
        kind = Node::kLook, negate = k == '!';
      } else if (k == 'i' && !at_end() && peek() == ':') {
        ++i_;
        fold_ = true;
      } else {
        error("a group kind other than (?:, (?i:, (?= or (?!");
      }
    }
    Node inner = alternation();
    if (at_end() || peek() != ')') error("missing ')'");
    ++i_;
    fold_ = saved_fold;
    if (kind != Node::kLook) return inner;
    Node look{Node::kLook};
    look.negate = negate;
    look.kids.push_back(std::move(inner));
    return look;
  }

  int hex(size_t digits) {
    int v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (at_end()) error("a truncated hex escape");
      const char32_t h = p_[i_++];
      const int d = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
      if (d < 0) error("a malformed hex escape");
      v = v * 16 + d;
    }
    return v;
  }

  // After a backslash: adds what the escape means to `cls`. Returns the literal, or -1 for a class.
  long escape(CharClass& cls) {
    if (at_end()) error("a trailing backslash");
    const char32_t e = p_[i_++];
    auto literal = [&](char32_t cp) {
      add_char(cls, cp);
      return static_cast<long>(cp);
    };
    switch (e) {
      case 'r': return literal('\r');
      case 'n': return literal('\n');
      case 't': return literal('\t');
      case 'f': return literal('\f');
      case 'v': return literal('\v');
      case 's': cls.space = true; return -1;
      case 'S': cls.not_space = true; return -1;
      case 'x':
        if (!at_end() && peek() == '{') {
          ++i_;
          int value = 0, digits = 0;
          for (; !at_end() && peek() != '}'; ++digits) {
            if (digits == 6) error("a malformed \\x{...}");
            value = value * 16 + hex(1);
          }
          if (at_end() || digits == 0 || value >= 0x110000) error("a malformed \\x{...}");
          ++i_;
          return literal(static_cast<char32_t>(value));
        }
        return literal(static_cast<char32_t>(hex(2)));
      case 'u': return literal(static_cast<char32_t>(hex(4)));
      case 'p': case 'P': {
        std::u32string name;
        if (!at_end() && peek() == '{') {
          ++i_;
          while (!at_end() && peek() != '}') name += p_[i_++];
          if (at_end()) error("a malformed \\p{...}");
          ++i_;
        } else if (!at_end()) {
          name += p_[i_++];
        }
        static constexpr std::u32string_view kNames = U"LMNPSZC";
        const size_t bit = name.size() == 1 ? kNames.find(name[0]) : std::u32string_view::npos;
        if (bit == std::u32string_view::npos)
          error(fmt::format("the category \\{}{{{}}} (only the one-letter categories L M N P S Z C are supported)",
                            static_cast<char>(e), unicode::encode_utf8(name)));
        (e == 'p' ? cls.categories : cls.not_categories) |= static_cast<uint8_t>(1u << bit);
        return -1;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          error(fmt::format("the escape \\{}", static_cast<char>(e)));
        return literal(e);
    }
  }

  CharClass bracket() {
    CharClass cls;
    if (!at_end() && peek() == '^') cls.negated = true, ++i_;
    bool first = true;
    while (!at_end() && (peek() != ']' || first)) {
      first = false;
      long lo;
      const size_t before = cls.ranges.size();
      if (peek() == '\\') {
        ++i_;
        lo = escape(cls);
        if (lo < 0) continue;
        cls.ranges.resize(before);  // re-added below, maybe as a range
      } else if (peek() == '[') {
        error("a nested class or POSIX class");
      } else {
        lo = p_[i_++];
      }
      long hi = lo;
      if (i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (peek() == '\\') {
          ++i_;
          CharClass scratch;
          hi = escape(scratch);
          if (hi < 0) error("a range ending in a class escape");
        } else {
          hi = p_[i_++];
        }
        if (hi < lo) error("a range out of order");
      }
      if (lo == hi) {
        add_char(cls, static_cast<char32_t>(lo));
      } else {
        cls.ranges.emplace_back(static_cast<char32_t>(lo), static_cast<char32_t>(hi));
        if (fold_ && hi < 0x80) error("a range inside (?i:...)");
      }
    }
    if (at_end()) error("missing ']'");
    ++i_;
    return cls;
  }

  std::string_view source_;
  std::u32string p_;
  std::vector<CharClass>& classes_;
  size_t i_ = 0;
  bool fold_ = false;
};

class Compiler {
 public:
  explicit Compiler(std::vector<std::vector<Inst>>& programs) : programs_(programs) {}

  int compile_program(const Node& n) {
    const int index = static_cast<int>(programs_.size());
    programs_.emplace_back();
    std::vector<Inst> code;
    emit(n, code);
    code.push_back({Op::kMatch});
    programs_[index] = std::move(code);
    return index;
  }

 private:
  static int here(const std::vector<Inst>& code) { return static_cast<int>(code.size()); }

  void emit(const Node& n, std::vector<Inst>& code) {
    switch (n.kind) {
      case Node::kClass: code.push_back({Op::kClass, n.cls}); return;
      case Node::kSeq:
        for (const Node& k : n.kids) emit(k, code);
        return;
      case Node::kAlt: {
        std::vector<int> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          int split = -1;
          if (k + 1 < n.kids.size()) {
            split = here(code);
            code.push_back({Op::kSplit, split + 1, 0});
          }
          emit(n.kids[k], code);
          if (k + 1 < n.kids.size()) {
            jumps.push_back(here(code));
            code.push_back({Op::kJmp});
            code[split].b = here(code);
          }
        }
        for (int j : jumps) code[j].a = here(code);
        return;
      }
      case Node::kRepeat: {
        for (int k = 0; k < n.min; ++k) emit(n.kids[0], code);
        if (n.max == kUnbounded) {
          const int loop = here(code);
          code.push_back({Op::kSplit});
          emit(n.kids[0], code);
          code.push_back({Op::kJmp, loop});
          set_split(code[loop], loop + 1, here(code), n.greedy);
          return;
        }
        std::vector<int> splits;
        for (int k = n.min; k < n.max; ++k) {
          splits.push_back(here(code));
          code.push_back({Op::kSplit});
          emit(n.kids[0], code);
        }
        for (int s : splits) set_split(code[s], s + 1, here(code), n.greedy);
        return;
      }
      case Node::kLook: {
        const int program = compile_program(n.kids[0]);
        code.push_back({Op::kLook, program, n.negate ? 1 : 0});
        return;
      }
    }
  }

  static void set_split(Inst& inst, int body, int out, bool greedy) {
    inst.a = greedy ? body : out;
    inst.b = greedy ? out : body;
  }

  std::vector<std::vector<Inst>>& programs_;
};

}  // namespace

bool PretokenizerRegex::CharClass::matches(char32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
  if (!in && (categories || not_categories)) {
    const uint8_t bit = static_cast<uint8_t>(1u << static_cast<int>(unicode::category(cp)));
    in = (categories & bit) || (not_categories & ~bit);  // [\P{X}\P{Y}] is the union of the complements
  }
  if (!in && (space || not_space)) {
    const bool ws = unicode::is_white_space(cp);
    in = (space && ws) || (not_space && !ws);
  }
  if (!in && any_but_newline) in = cp != '\n';
  return in != negated;
}

PretokenizerRegex::PretokenizerRegex(std::string_view pattern) {
  Parser parser(pattern, classes_);
  const Node root = parser.parse();
  programs_.emplace_back();  // [0], filled below (lookaheads compile into later slots first)
  Compiler compiler(programs_);
  const int index = compiler.compile_program(root);
  programs_[0] = std::move(programs_[index]);
  programs_.erase(programs_.begin() + index);
  // Lookahead programs were numbered before the erase; renumber those after it.
  for (auto& program : programs_)
    for (Inst& inst : program)
      if (inst.op == Op::kLook && inst.a > index) --inst.a;
}

bool PretokenizerRegex::run(int program, std::u32string_view text, size_t pos, size_t* end) const {
  const std::vector<Inst>& code = programs_[program];
  std::vector<std::pair<int, size_t>> stack{{0, pos}};
  while (!stack.empty()) {
    auto [pc, at] = stack.back();
    stack.pop_back();
    for (;;) {
      const Inst& inst = code[pc];
      if (inst.op == Op::kMatch) {
        *end = at;
        return true;
      }
      if (inst.op == Op::kClass) {
        if (at >= text.size() || !classes_[inst.a].matches(text[at])) break;
        ++at, ++pc;
      } else if (inst.op == Op::kSplit) {
        stack.emplace_back(inst.b, at);
        pc = inst.a;
      } else if (inst.op == Op::kJmp) {
        pc = inst.a;
      } else {  // kLook
        size_t ignored;
        if (run(inst.a, text, at, &ignored) == (inst.b != 0)) break;
        ++pc;
      }
    }
  }
  return false;
}

long PretokenizerRegex::match_at(std::u32string_view text, size_t pos) const {
  size_t end;
  return run(0, text, pos, &end) ? static_cast<long>(end - pos) : -1;
}

std::optional<std::pair<size_t, size_t>> PretokenizerRegex::find(std::u32string_view text, size_t from) const {
  for (size_t start = from; start < text.size(); ++start) {
    const long length = match_at(text, start);
    if (length > 0) return std::make_pair(start, start + static_cast<size_t>(length));
  }
  return std::nullopt;
}

}  // namespace moe4d
