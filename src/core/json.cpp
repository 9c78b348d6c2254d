#include "core/json.hpp"

#include <charconv>
#include <cmath>
#include <system_error>
#include <unordered_set>

#include <pickle/error.hpp>

#include "core/format.hpp"

namespace pickle::json {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// UTF-8 (RFC 3629): shared by dump (which replaces invalid bytes) and parse (which rejects them).

/// Length of the valid UTF-8 sequence starting at text[i], or 0 when the bytes there are not one (truncated,
/// overlong, a surrogate, above U+10FFFF, or a stray continuation byte).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Serialisation.

void dump_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t length = utf8_sequence_length(text, i);
      if (length == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER, one per bad byte
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void dump_double(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  // to_chars without a precision gives the shortest text that reads back to the same double (what %.17g guarantees,
  // without its "0.10000000000000001"), and ignores the C locale's decimal separator.
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (error != std::errc()) throw Error(ErrorCode::Internal, "json: cannot format a double");
  std::string_view text(buffer, static_cast<std::size_t>(end - buffer));
  out += text;
  // "2" would read back as an integer: keep integral doubles recognisably doubles.
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(depth), ' ');
}

void dump_value(std::string& out, const Value& value, int indent, int depth) {
  switch (value.type()) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Type::Int: out += std::to_string(value.as_int()); return;
    case Type::Double: dump_double(out, value.as_double()); return;
    case Type::String: dump_string(out, value.as_string()); return;
    case Type::Array: {
      const Array& items = value.as_array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ',';
        newline(out, indent, depth + 1);
        dump_value(out, items[i], indent, depth + 1);
      }
      newline(out, indent, depth);
      out += ']';
      return;
    }
    case Type::Object: {
      const Object& members = value.as_object();
      if (members.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out += ',';
        newline(out, indent, depth + 1);
        dump_string(out, members[i].key);
        out += indent < 0 ? ":" : ": ";
        dump_value(out, members[i].value, indent, depth + 1);
      }
      newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing: recursive descent over the bytes, with a depth limit so that "[[[[..." cannot exhaust the stack.

constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value document() {
    skip_whitespace();
    Value value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected data after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw ProtocolError(cat("json: ", what, " at line ", line, ", column ", column));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect_literal(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) fail("invalid literal");
    pos_ += literal.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of input");
    switch (peek()) {
      case 'n': expect_literal("null"); return Value();
      case 't': expect_literal("true"); return Value(true);
      case 'f': expect_literal("false"); return Value(false);
      case '"': return Value(parse_string());
      case '[': return parse_array(depth + 1);
      case '{': return parse_object(depth + 1);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(cat("unexpected character '", peek(), "'"));
    }
  }

  Value parse_array(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    ++pos_;  // '['
    Array items;
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return Value(std::move(items));
    }
    while (true) {
      skip_whitespace();
      items.push_back(parse_value(depth));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == ']') {
        ++pos_;
        return Value(std::move(items));
      } else {
        fail(at_end() ? "unterminated array" : "expected ',' or ']' in array");
      }
    }
  }

  Value parse_object(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    ++pos_;  // '{'
    Object members;
    std::unordered_set<std::string> keys;
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_whitespace();
      if (peek() != '"') fail(at_end() ? "unterminated object" : "expected a string key in object");
      std::size_t key_pos = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        pos_ = key_pos;
        fail(cat("duplicate key \"", key, "\""));
      }
      skip_whitespace();
      if (peek() != ':') fail("expected ':' after object key");
      ++pos_;
      skip_whitespace();
      Value value = parse_value(depth);
      members.push_back(Member{std::move(key), std::move(value)});
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == '}') {
        ++pos_;
        return Value(std::move(members));
      } else {
        fail(at_end() ? "unterminated object" : "expected ',' or '}' in object");
      }
    }
  }

  std::uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      value <<= 4;
      if (c >= '0' && c <= '9') value |= static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') value |= static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') value |= static_cast<std::uint32_t>(c - 'A' + 10);
      else fail("invalid hex digit in \\u escape");
    }
    return value;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("unescaped control character in string");
      if (c >= 0x80) {
        std::size_t length = utf8_sequence_length(text_, pos_);
        if (length == 0) fail("invalid UTF-8 in string");
        out.append(text_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) fail("unterminated escape");
      char escape = text_[pos_++];
      switch (escape) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t code_point = parse_hex4();
          if (code_point >= 0xDC00 && code_point <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
          if (code_point >= 0xD800 && code_point <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate in \\u escape");
            pos_ += 2;
            std::uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("invalid low surrogate in \\u escape");
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code_point);
          break;
        }
        default: fail(cat("invalid escape '\\", escape, "'"));
      }
    }
  }

  void digits() {
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit in number");
    while (peek() >= '0' && peek() <= '9') ++pos_;
  }

  Value parse_number() {
    std::size_t start = pos_;
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;  // JSON forbids leading zeros: "01" stops here and fails as trailing data
    } else {
      digits();
    }
    if (peek() == '.') {
      integral = false;
      ++pos_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      std::int64_t value = 0;
      auto [end, error] = std::from_chars(first, last, value);
      if (error == std::errc() && end == last) return Value(value);
      // Too large for int64: fall through and keep it as a double, as JavaScript would.
    }
    double value = 0;
    auto [end, error] = std::from_chars(first, last, value);
    if (error == std::errc::result_out_of_range) {
      pos_ = start;
      fail("number out of range of a double");
    }
    if (error != std::errc() || end != last) {
      pos_ = start;
      fail("invalid number");
    }
    return Value(value);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

[[noreturn]] void wrong_type(Type wanted, Type actual) {
  throw ProtocolError(cat("json: expected ", type_name(wanted), ", found ", type_name(actual)));
}

}  // namespace

const char* type_name(Type type) noexcept {
  switch (type) {
    case Type::Null: return "null";
    case Type::Bool: return "bool";
    case Type::Int: return "integer";
    case Type::Double: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "unknown";
}

bool Value::as_bool() const {
  if (!is_bool()) wrong_type(Type::Bool, type());
  return std::get<bool>(data_);
}

std::int64_t Value::as_int() const {
  if (!is_int()) wrong_type(Type::Int, type());
  return std::get<std::int64_t>(data_);
}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<std::int64_t>(data_));
  if (type() != Type::Double) wrong_type(Type::Double, type());
  return std::get<double>(data_);
}

const std::string& Value::as_string() const {
  if (!is_string()) wrong_type(Type::String, type());
  return std::get<std::string>(data_);
}

const Array& Value::as_array() const {
  if (!is_array()) wrong_type(Type::Array, type());
  return std::get<Array>(data_);
}

Array& Value::as_array() {
  if (!is_array()) wrong_type(Type::Array, type());
  return std::get<Array>(data_);
}

const Object& Value::as_object() const {
  if (!is_object()) wrong_type(Type::Object, type());
  return std::get<Object>(data_);
}

Object& Value::as_object() {
  if (!is_object()) wrong_type(Type::Object, type());
  return std::get<Object>(data_);
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) data_ = Object{};
  Object& members = as_object();
  for (auto& member : members) {
    if (member.key == key) return member.value;
  }
  members.push_back(Member{std::string(key), Value()});
  return members.back().value;
}

const Value* Value::find(std::string_view key) const {
  for (const auto& member : as_object()) {
    if (member.key == key) return &member.value;
  }
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  const Value* value = find(key);
  if (value == nullptr) throw ProtocolError(cat("json: missing key \"", key, "\""));
  return *value;
}

void Value::push_back(Value item) {
  if (is_null()) data_ = Array{};
  as_array().push_back(std::move(item));
}

const Value& Value::at(std::size_t index) const {
  const Array& items = as_array();
  if (index >= items.size()) {
    throw ProtocolError(cat("json: index ", index, " out of range of an array of ", items.size()));
  }
  return items[index];
}

std::size_t Value::size() const noexcept {
  if (is_array()) return std::get<Array>(data_).size();
  if (is_object()) return std::get<Object>(data_).size();
  return 0;
}

std::string Value::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

bool operator==(const Value& a, const Value& b) { return a.data_ == b.data_; }

Value parse(std::string_view text) { return Parser(text).document(); }

}  // namespace pickle::json
