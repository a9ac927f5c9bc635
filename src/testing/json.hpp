// A small JSON reader and writer helpers for the tool, the benchmarks and the tests (not installed).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bsgemm/status.hpp"

namespace bsgemm::testing::json {

struct Value {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;  // in document order

  // The member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;
  bool is_number() const { return kind == Kind::number; }
  bool is_string() const { return kind == Kind::string; }
  bool is_array() const { return kind == Kind::array; }
  bool is_object() const { return kind == Kind::object; }
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
