#pragma once
// A small JSON value for the files pickle writes and reads back (benchmark results, `pickle info --json`).
// Objects keep their members in insertion order, so that output is stable and reads in the order it was built.
// No external dependency: the device machine and fresh CI hosts have no package registry for one.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace pickle::json {

// Declared before the Array and Object aliases: GCC 12's -Wshadow takes the scoped enumerators for shadows otherwise.
enum class Type { Null, Bool, Int, Double, String, Array, Object };

class Value;

/// One member of an object: key and value.
struct Member;

using Array = std::vector<Value>;
/// Members in insertion order; keys are unique (operator[] and parse() keep them so).
using Object = std::vector<Member>;

/// The name of a type, e.g. "string" (for error messages).
const char* type_name(Type type) noexcept;

/// A JSON value: null, bool, 64-bit integer, double, string, array or object.
/// Accessors of the wrong type throw ProtocolError: the value usually came from a file, and a file whose field has
/// the wrong type is malformed input, not a bug in the caller.
class Value {
 public:
  // Constructors are defined below struct Member: instantiating the variant's constructors needs Member complete.
  Value() noexcept;
  Value(std::nullptr_t) noexcept;
  Value(bool value) noexcept;
  /// Any integer type except bool. Unsigned values above INT64_MAX are stored as doubles (JSON numbers have no width).
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Value(T value) noexcept;
  template <std::floating_point T>
  Value(T value) noexcept;
  Value(const char* text);
  Value(std::string_view text);
  Value(std::string text) noexcept;
  Value(Array items) noexcept;
  Value(Object members) noexcept;

  /// An empty array / object (Value{} is null).
  static Value array();
  static Value object();

  Type type() const noexcept { return static_cast<Type>(data_.index()); }
  bool is_null() const noexcept { return type() == Type::Null; }
  bool is_bool() const noexcept { return type() == Type::Bool; }
  bool is_int() const noexcept { return type() == Type::Int; }
  /// Int or Double.
  bool is_number() const noexcept { return type() == Type::Int || type() == Type::Double; }
  bool is_string() const noexcept { return type() == Type::String; }
  bool is_array() const noexcept { return type() == Type::Array; }
  bool is_object() const noexcept { return type() == Type::Object; }

  bool as_bool() const;
  std::int64_t as_int() const;
  /// An Int converts to double.
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  /// Object access: the member named `key`, inserted as null at the end when absent. A null value becomes an object
  /// first, so that `v["a"]["b"] = 1` builds nested objects.
  Value& operator[](std::string_view key);
  /// The member named `key`, or nullptr when absent (throws when this is not an object).
  const Value* find(std::string_view key) const;
  /// The member named `key`; throws ProtocolError naming the key when absent.
  const Value& at(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  /// Array access. push_back turns a null value into an array first.
  void push_back(Value item);
  const Value& at(std::size_t index) const;
  /// Elements of an array or members of an object; 0 for scalars.
  std::size_t size() const noexcept;

  /// Serialises. indent < 0: one line, no spaces; indent >= 0: that many spaces per level, one member per line.
  /// Strings are escaped (", \, control characters); valid UTF-8 passes through, invalid bytes become U+FFFD so that
  /// the output is always valid JSON. Doubles print in their shortest form that reads back exactly ("0.1", "2.0");
  /// NaN and infinities, which JSON cannot express, print as null.
  std::string dump(int indent = -1) const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, Array, Object> data_;
};

struct Member {
  std::string key;
  Value value;
  friend bool operator==(const Member& a, const Member& b) = default;
};

inline Value::Value() noexcept : data_(nullptr) {}
inline Value::Value(std::nullptr_t) noexcept : data_(nullptr) {}
inline Value::Value(bool value) noexcept : data_(value) {}
template <std::integral T>
  requires(!std::same_as<T, bool>)
Value::Value(T value) noexcept : data_(nullptr) {
  if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
    if (value > static_cast<T>(INT64_MAX)) {
      data_ = static_cast<double>(value);
      return;
    }
  }
  data_ = static_cast<std::int64_t>(value);
}
template <std::floating_point T>
Value::Value(T value) noexcept : data_(static_cast<double>(value)) {}
inline Value::Value(const char* text) : data_(std::string(text)) {}
inline Value::Value(std::string_view text) : data_(std::string(text)) {}
inline Value::Value(std::string text) noexcept : data_(std::move(text)) {}
inline Value::Value(Array items) noexcept : data_(std::move(items)) {}
inline Value::Value(Object members) noexcept : data_(std::move(members)) {}
inline Value Value::array() { return Value(Array{}); }
inline Value Value::object() { return Value(Object{}); }

/// Parses one JSON document (RFC 8259; surrounding whitespace allowed). Throws ProtocolError with the line and column
/// on malformed input: bad syntax, trailing data, invalid UTF-8 or escapes, duplicate keys, nesting deeper than 256.
/// Integers that fit in int64 become Int; other numbers become Double.
Value parse(std::string_view text);

}  // namespace pickle::json
