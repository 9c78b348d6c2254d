#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include <pickle/error.hpp>

#include "core/json.hpp"

namespace pickle::json {
namespace {

TEST(Json, DumpsCompactAndIndented) {
  Value v = Value::object();
  v["name"] = "pickle";
  v["ranks"] = 2;
  v["ok"] = true;
  v["none"] = nullptr;
  v["sizes"].push_back(1);
  v["sizes"].push_back(2.5);
  v["empty_list"] = Value::array();
  v["empty_map"] = Value::object();
  EXPECT_EQ(v.dump(),
            R"({"name":"pickle","ranks":2,"ok":true,"none":null,"sizes":[1,2.5],"empty_list":[],"empty_map":{}})");
  EXPECT_EQ(Value::object().dump(2), "{}");
  Value nested = Value::object();
  nested["a"]["b"] = 1;
  nested["list"].push_back("x");
  EXPECT_EQ(nested.dump(2), "{\n  \"a\": {\n    \"b\": 1\n  },\n  \"list\": [\n    \"x\"\n  ]\n}");
}

TEST(Json, ObjectsKeepInsertionOrderAndUniqueKeys) {
  Value v;
  v["zeta"] = 1;
  v["alpha"] = 2;
  v["mid"] = 3;
  v["alpha"] = 20;  // reassignment keeps the original position
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v.as_object()[0].key, "zeta");
  EXPECT_EQ(v.as_object()[1].key, "alpha");
  EXPECT_EQ(v.as_object()[2].key, "mid");
  EXPECT_EQ(v.at("alpha").as_int(), 20);
  EXPECT_EQ(parse(v.dump()).as_object()[0].key, "zeta");
}

TEST(Json, RoundTripsNestedValues) {
  Value v = Value::object();
  v["schema"] = "pickle-bench/1";
  v["int_min"] = std::numeric_limits<std::int64_t>::min();
  v["int_max"] = std::numeric_limits<std::int64_t>::max();
  v["neg"] = -42;
  v["pi"] = 3.141592653589793;
  v["tiny"] = 5e-324;
  v["huge"] = 1.7976931348623157e308;
  v["neg_zero"] = -0.0;
  v["flags"].push_back(true);
  v["flags"].push_back(false);
  v["flags"].push_back(nullptr);
  Value sample = Value::object();
  sample["bytes"] = std::uint64_t{1} << 40;
  sample["median_us"] = 12.25;
  v["samples"].push_back(sample);
  v["samples"].push_back(Value::array());
  v["text"] = std::string("line\nbreak \"quoted\" back\\slash tab\t \x01 caf\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x98\x80");
  for (int indent : {-1, 0, 2, 4}) {
    Value back = parse(v.dump(indent));
    EXPECT_EQ(back, v) << "indent " << indent << ": " << v.dump(indent);
  }
  EXPECT_TRUE(std::signbit(parse(v.dump()).at("neg_zero").as_double()));
}

TEST(Json, DoublesPrintShortAndReadBackExactly) {
  EXPECT_EQ(Value(0.1).dump(), "0.1");
  EXPECT_EQ(Value(2.0).dump(), "2.0");
  EXPECT_EQ(Value(-3.0).dump(), "-3.0");
  EXPECT_EQ(Value(1e20).dump(), "1e+20");
  EXPECT_EQ(Value(1.5e-7).dump(), "1.5e-07");
  EXPECT_EQ(parse("2.0").type(), Type::Double);
  EXPECT_EQ(parse("2").type(), Type::Int);
  // Random bit patterns cover subnormals, huge exponents and 17-digit mantissas.
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 20000; ++i) {
    double d = std::bit_cast<double>(rng());
    if (!std::isfinite(d)) continue;
    double back = parse(Value(d).dump()).as_double();
    ASSERT_EQ(std::bit_cast<std::uint64_t>(back), std::bit_cast<std::uint64_t>(d)) << Value(d).dump();
  }
}

TEST(Json, NonFiniteDoublesBecomeNull) {
  Value v = Value::array();
  v.push_back(std::numeric_limits<double>::quiet_NaN());
  v.push_back(std::numeric_limits<double>::infinity());
  v.push_back(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(v.dump(), "[null,null,null]");
}

TEST(Json, IntegersKeepTheirWidth) {
  EXPECT_EQ(parse("9223372036854775807").as_int(), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(parse("-9223372036854775808").as_int(), std::numeric_limits<std::int64_t>::min());
  // One past INT64_MAX does not fit: it reads as the nearest double instead of failing.
  Value big = parse("9223372036854775808");
  EXPECT_EQ(big.type(), Type::Double);
  EXPECT_EQ(big.as_double(), 9223372036854775808.0);
  EXPECT_EQ(Value(std::numeric_limits<std::uint64_t>::max()).type(), Type::Double);
  EXPECT_EQ(Value(std::uint64_t{7}).as_int(), 7);
  EXPECT_DOUBLE_EQ(parse("7").as_double(), 7.0);  // an Int reads as a double on request
}

TEST(Json, EscapesStrings) {
  EXPECT_EQ(Value("a\"b\\c/d").dump(), R"("a\"b\\c/d")");
  EXPECT_EQ(Value("\b\f\n\r\t").dump(), R"("\b\f\n\r\t")");
  EXPECT_EQ(Value(std::string("\x01\x1f\x7f", 3)).dump(), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(Value(std::string("nul\0byte", 8)).dump(), R"("nul\u0000byte")");
  // Valid UTF-8 passes through untouched.
  EXPECT_EQ(Value("caf\xC3\xA9 \xF0\x9F\x98\x80").dump(), "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"");
  // Invalid bytes (stray continuation, truncated sequence, overlong) become U+FFFD so the output stays valid JSON.
  EXPECT_EQ(Value("a\x80z").dump(), "\"a\xEF\xBF\xBDz\"");
  EXPECT_EQ(Value("a\xE2\x9C").dump(), "\"a\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(Value("\xC0\xAF").dump(), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_NO_THROW(parse(Value("x\xFF\xFEy").dump()));
}

TEST(Json, ParsesEscapes) {
  EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")").as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u00e9\u00E9")").as_string(), "\xC3\xA9\xC3\xA9");
  EXPECT_EQ(parse(R"("\u2713")").as_string(), "\xE2\x9C\x93");
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");  // surrogate pair
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  EXPECT_EQ(parse(" \t\r\n [ 1 , { \"k\" : \"v\" } ] \n").dump(), R"([1,{"k":"v"}])");
}

TEST(Json, RejectsMalformedInput) {
  const char* bad[] = {
      "", " ", "{", "}", "[", "]", "[1,]", "[,1]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{1:2}",
      "{'a':1}", "'a'", "01", "-01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "1 2", "tru", "nul", "falsey",
      "NaN", "Infinity", "-Infinity", "1e999", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"",
      "\"\\ud800\\u0041\"", "\"\\udc00\"", "\"a\x01\"", "\"a\nb\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"", "\"\xe2\x9c\"", "{\"a\":1,\"a\":2}", "[1]x", "\"\\",
  };
  for (const char* text : bad) {
    EXPECT_THROW(parse(text), ProtocolError) << "accepted: " << text;
  }
  EXPECT_THROW(parse(std::string_view("[1,\0 2]", 7)), ProtocolError);
}

TEST(Json, LimitsNestingDepth) {
  std::string ok = std::string(200, '[') + std::string(200, ']');
  EXPECT_NO_THROW(parse(ok));
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW(parse(deep), ProtocolError);
  std::string deep_objects;
  for (int i = 0; i < 1000; ++i) deep_objects += "{\"a\":";
  deep_objects += "1" + std::string(1000, '}');
  EXPECT_THROW(parse(deep_objects), ProtocolError);
}

TEST(Json, ErrorsNameLineAndColumn) {
  try {
    parse("{\n  \"a\": 1,\n  \"b\": nope\n}");
    FAIL() << "accepted invalid JSON";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3, column 8"), std::string::npos) << e.what();
  }
}

TEST(Json, WrongTypesAndMissingKeysThrow) {
  Value v = parse(R"({"n": 1, "s": "x", "list": [1]})");
  EXPECT_THROW(v.at("n").as_string(), ProtocolError);
  EXPECT_THROW(v.at("s").as_int(), ProtocolError);
  EXPECT_THROW(v.at("s").as_double(), ProtocolError);
  EXPECT_THROW(v.at("list").as_object(), ProtocolError);
  EXPECT_THROW(v.at("missing"), ProtocolError);
  EXPECT_THROW(v.at("list").at(1), ProtocolError);
  EXPECT_EQ(v.at("list").at(0).as_int(), 1);
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_TRUE(v.contains("s"));
  EXPECT_THROW(Value(3).push_back(1), ProtocolError);
  try {
    v.at("missing");
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("\"missing\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pickle::json
