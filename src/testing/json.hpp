// A small JSON reader and writer helpers for the tool, the benchmarks and the tests (not installed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bsgemm/status.hpp"

namespace bsgemm::testing::json {

struct Value {
  enum class Kind { null, boolean, number, string, array, object };
  // One member of an object. A named struct, defined below, rather than std::pair<std::string,
  // Value>: a pair would be instantiated here, while Value is incomplete, which libstdc++ rejects
  // under clang.
  struct Member;
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<Member> object;  // in document order

  // The member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;
  bool is_number() const { return kind == Kind::number; }
  bool is_string() const { return kind == Kind::string; }
  bool is_array() const { return kind == Kind::array; }
  bool is_object() const { return kind == Kind::object; }
};

struct Value::Member {
  std::string key;
  Value value;
};

// Parses a whole document; the error message gives line and column.
Status parse(std::string_view text, Value* out);
// Reads and parses a file.
Status parse_file(const std::string& path, Value* out);
// `text` as a JSON string literal, quotes included.
std::string quote(std::string_view text);
// A number as JSON (finite numbers with enough digits to round-trip; NaN and inf as null).
std::string number(double value);

}  // namespace bsgemm::testing::json
