// A strict RFC 8259 JSON reader, and the two writer helpers the tool and benchmarks need.
//
// The reader is a recursive-descent parser over the whole text. It accepts exactly the grammar of
// RFC 8259 and nothing more: no comments, no trailing commas, no single quotes, no NaN/Infinity,
// no leading zeros or '+' signs, no raw control characters inside strings, no invalid UTF-8, no
// unpaired UTF-16 surrogates in \u escapes. It also rejects what the RFC leaves to implementations
// but is almost always a mistake in the files we read: duplicate keys in one object, numbers
// outside double's range, and nesting deeper than kMaxDepth (so a hostile file cannot overflow
// the stack). Every error names the line and column (1-based; the column counts bytes) where the
// offending text starts.
#include "src/testing/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

namespace bsgemm::testing::json {

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::object) return nullptr;
  for (const auto& [name, value] : object)
    if (name == key) return &value;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Status parse_document(Value* out) {
    skip_whitespace();
    if (Status s = parse_value(out, 0); !s.ok()) return s;
    skip_whitespace();
    if (pos_ != text_.size()) return error_at(pos_, "unexpected text after the document");
    return Status::success();
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;

  // Line and column of byte `at`, counted when an error is reported (errors are rare, so the
  // parser does not track lines as it goes).
  Status error_at(std::size_t at, const std::string& what) const {
    int line = 1, column = 1;
    for (std::size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return Status::error(StatusCode::invalid_argument, -1, "",
                         "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  // Describes the byte at `at` for an error message.
  std::string describe_byte(std::size_t at) const {
    if (at >= text_.size()) return "end of input";
    const auto c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "byte 0x%02X", c);
    return buffer;
  }

  Status parse_value(Value* out, int depth) {
    if (at_end()) return error_at(pos_, "expected a value, found end of input");
    switch (peek()) {
      case '{': return parse_object(out, depth);
      case '[': return parse_array(out, depth);
      case '"': out->kind = Value::Kind::string; return parse_string(&out->string);
      case 't': return parse_literal("true", out, Value::Kind::boolean, true);
      case 'f': return parse_literal("false", out, Value::Kind::boolean, false);
      case 'n': return parse_literal("null", out, Value::Kind::null, false);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number(out);
        return error_at(pos_, "expected a value, found " + describe_byte(pos_));
    }
  }

  Status parse_literal(std::string_view word, Value* out, Value::Kind kind, bool boolean) {
    if (text_.substr(pos_, word.size()) != word)
      return error_at(pos_, "invalid literal (expected " + std::string(word) + ")");
    pos_ += word.size();
    out->kind = kind;
    out->boolean = boolean;
    return Status::success();
  }

  Status parse_object(Value* out, int depth) {
    if (depth >= kMaxDepth) return error_at(pos_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    out->kind = Value::Kind::object;
    ++pos_;  // '{'
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Status::success();
    }
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"') return error_at(pos_, "expected a string key, found " + describe_byte(pos_));
      const std::size_t key_start = pos_;
      std::string key;
      if (Status s = parse_string(&key); !s.ok()) return s;
      if (out->find(key) != nullptr) return error_at(key_start, "duplicate key " + quote(key));
      skip_whitespace();
      if (at_end() || peek() != ':') return error_at(pos_, "expected ':' after a key, found " + describe_byte(pos_));
      ++pos_;
      skip_whitespace();
      Value member;
      if (Status s = parse_value(&member, depth + 1); !s.ok()) return s;
      out->object.push_back(Value::Member{std::move(key), std::move(member)});
      skip_whitespace();
      if (at_end()) return error_at(pos_, "unterminated object (expected ',' or '}')");
      if (peek() == '}') {
        ++pos_;
        return Status::success();
      }
      if (peek() != ',') return error_at(pos_, "expected ',' or '}' in an object, found " + describe_byte(pos_));
      ++pos_;
    }
  }

  Status parse_array(Value* out, int depth) {
    if (depth >= kMaxDepth) return error_at(pos_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    out->kind = Value::Kind::array;
    ++pos_;  // '['
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Status::success();
    }
    while (true) {
      skip_whitespace();
      Value element;
      if (Status s = parse_value(&element, depth + 1); !s.ok()) return s;
      out->array.push_back(std::move(element));
      skip_whitespace();
      if (at_end()) return error_at(pos_, "unterminated array (expected ',' or ']')");
      if (peek() == ']') {
        ++pos_;
        return Status::success();
      }
      if (peek() != ',') return error_at(pos_, "expected ',' or ']' in an array, found " + describe_byte(pos_));
      ++pos_;
    }
  }

  // number = [ "-" ] int [ frac ] [ exp ]; int = "0" / digit1-9 *digit. The grammar is checked
  // here; std::from_chars (locale-independent, correctly rounded) converts the checked text.
  Status parse_number(Value* out) {
    const std::size_t start = pos_;
    auto digit = [&] { return !at_end() && peek() >= '0' && peek() <= '9'; };
    if (peek() == '-') ++pos_;
    if (!digit()) return error_at(pos_, "expected a digit in a number, found " + describe_byte(pos_));
    if (peek() == '0') {
      ++pos_;
      if (digit()) return error_at(start, "leading zeros are not allowed in a number");
    } else {
      while (digit()) ++pos_;
    }
    if (!at_end() && peek() == '.') {
      ++pos_;
      if (!digit()) return error_at(pos_, "expected a digit after the decimal point, found " + describe_byte(pos_));
      while (digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) return error_at(pos_, "expected a digit in the exponent, found " + describe_byte(pos_));
      while (digit()) ++pos_;
    }
    double value = 0;
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(first, last, value);
    if (ec == std::errc::result_out_of_range)
      return error_at(start, "number " + std::string(first, last) + " is outside the range of a double");
    if (ec != std::errc() || end != last) return error_at(start, "invalid number");
    out->kind = Value::Kind::number;
    out->number = value;
    return Status::success();
  }

  static void append_utf8(std::uint32_t code_point, std::string* out) {
    if (code_point < 0x80) {
      out->push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
      out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
      out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
  }

  // The four hex digits of a \u escape starting at pos_ (just after the 'u').
  Status parse_hex4(std::uint32_t* out) {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end()) return error_at(pos_, "unterminated \\u escape");
      const char c = peek();
      std::uint32_t nibble;
      if (c >= '0' && c <= '9') {
        nibble = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        nibble = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        nibble = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return error_at(pos_, "expected a hex digit in a \\u escape, found " + describe_byte(pos_));
      }
      value = value * 16 + nibble;
      ++pos_;
    }
    *out = value;
    return Status::success();
  }

  // A \u escape (pos_ at the backslash), with a UTF-16 surrogate pair when the first unit is a
  // high surrogate; appended to `out` as UTF-8.
  Status parse_unicode_escape(std::string* out) {
    const std::size_t start = pos_;
    pos_ += 2;  // "\u"
    std::uint32_t unit;
    if (Status s = parse_hex4(&unit); !s.ok()) return s;
    if (unit >= 0xDC00 && unit <= 0xDFFF) return error_at(start, "unpaired low surrogate in a \\u escape");
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") return error_at(start, "high surrogate not followed by a \\u low surrogate");
      const std::size_t low_start = pos_;
      pos_ += 2;
      std::uint32_t low;
      if (Status s = parse_hex4(&low); !s.ok()) return s;
      if (low < 0xDC00 || low > 0xDFFF) return error_at(low_start, "high surrogate not followed by a low surrogate");
      unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(unit, out);
    return Status::success();
  }

  // One UTF-8 encoded character of two to four bytes (pos_ at its lead byte), copied to `out`.
  // Rejects stray continuation bytes, truncated sequences, overlong forms, surrogates and code
  // points above U+10FFFF (RFC 3629).
  Status copy_utf8(std::string* out) {
    const std::size_t start = pos_;
    const auto lead = static_cast<unsigned char>(text_[pos_]);
    int length;
    std::uint32_t code_point, minimum;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, code_point = lead & 0x1Fu, minimum = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, code_point = lead & 0x0Fu, minimum = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, code_point = lead & 0x07u, minimum = 0x10000;
    } else {
      return error_at(start, "invalid UTF-8 (" + describe_byte(start) + ")");
    }
    for (int i = 1; i < length; ++i) {
      if (start + i >= text_.size()) return error_at(start, "truncated UTF-8 sequence");
      const auto next = static_cast<unsigned char>(text_[start + i]);
      if ((next & 0xC0u) != 0x80u) return error_at(start, "invalid UTF-8 sequence");
      code_point = (code_point << 6) | (next & 0x3Fu);
    }
    if (code_point < minimum || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF))
      return error_at(start, "invalid UTF-8 sequence (overlong, surrogate or beyond U+10FFFF)");
    out->append(text_.substr(start, static_cast<std::size_t>(length)));
    pos_ += static_cast<std::size_t>(length);
    return Status::success();
  }

  // A string literal starting at pos_ (the opening quote); its decoded UTF-8 goes to `out`.
  Status parse_string(std::string* out) {
    const std::size_t start = pos_;
    ++pos_;  // '"'
    out->clear();
    while (true) {
      if (at_end()) return error_at(start, "unterminated string");
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return Status::success();
      }
      if (c < 0x20) return error_at(pos_, "control character " + describe_byte(pos_) + " in a string (escape it)");
      if (c >= 0x80) {
        if (Status s = copy_utf8(out); !s.ok()) return s;
        continue;
      }
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= text_.size()) return error_at(start, "unterminated string");
      const char escape = text_[pos_ + 1];
      char decoded;
      switch (escape) {
        case '"': decoded = '"'; break;
        case '\\': decoded = '\\'; break;
        case '/': decoded = '/'; break;
        case 'b': decoded = '\b'; break;
        case 'f': decoded = '\f'; break;
        case 'n': decoded = '\n'; break;
        case 'r': decoded = '\r'; break;
        case 't': decoded = '\t'; break;
        case 'u':
          if (Status s = parse_unicode_escape(out); !s.ok()) return s;
          continue;
        default: return error_at(pos_, "invalid escape \\" + describe_byte(pos_ + 1));
      }
      out->push_back(decoded);
      pos_ += 2;
    }
  }
};

}  // namespace

Status parse(std::string_view text, Value* out) {
  Value value;
  Parser parser(text);
  if (Status s = parser.parse_document(&value); !s.ok()) return s;
  *out = std::move(value);
  return Status::success();
}

Status parse_file(const std::string& path, Value* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status::error(StatusCode::invalid_argument, -1, "", path + ": cannot open the file");
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return Status::error(StatusCode::invalid_argument, -1, "", path + ": read error");
  Status s = parse(contents.str(), out);
  if (!s.ok()) s.message = path + ": " + s.message;
  return s;
}

std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04X", c);
          out += buffer;
        } else {
          out.push_back(ch);  // printable ASCII and UTF-8 bytes pass through unchanged
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  // 17 significant digits always identify a double uniquely. This is printf's %.17g, written by
  // std::to_chars so that the process's locale cannot turn the decimal point into a comma; the
  // result is always valid JSON for a finite value (no "inf", no leading '+', no trailing '.').
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general, 17);
  return std::string(buffer, result.ptr);
}

}  // namespace bsgemm::testing::json
