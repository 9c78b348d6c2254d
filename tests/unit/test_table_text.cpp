// The suites' text cells: a rate keeps its digits at every scale, so that a slow but real rate (a 4 KiB message
// on a loaded 2-core host) never prints as 0.000 and a ratio over it never divides by zero.
#include <gtest/gtest.h>

#include <string>

#include "../../tools/pickle/bench/table_text.hpp"

namespace pickle::bench {
namespace {

TEST(TableText, RatesKeepTwoSignificantDigitsBelowATenth) {
  EXPECT_EQ(gbps_text(774.456), "774.46");
  EXPECT_EQ(gbps_text(774.456, 1), "774.5");
  EXPECT_EQ(gbps_text(10.0), "10.00");
  EXPECT_EQ(gbps_text(9.87654), "9.877");
  EXPECT_EQ(gbps_text(0.5), "0.500");
  EXPECT_EQ(gbps_text(0.05), "0.050");
  EXPECT_EQ(gbps_text(0.004), "0.0040");
  EXPECT_EQ(gbps_text(0.00043), "0.00043");
  EXPECT_EQ(gbps_text(0.000123456), "0.00012");
  EXPECT_EQ(gbps_text(0.0), "0.000");  // nothing measured stays plain zero
  // More decimals below 10 (the memcpy tables' four) keep them below 0.1 too, and still two significant digits.
  EXPECT_EQ(gbps_text(0.5, 2, 4), "0.5000");
  EXPECT_EQ(gbps_text(0.05, 2, 4), "0.0500");
  EXPECT_EQ(gbps_text(0.00043, 2, 4), "0.00043");
  EXPECT_EQ(gbps_text(12.5, 2, 4), "12.50");
  for (double rate = 1e-8; rate < 100; rate *= 1.37) {
    EXPECT_GT(std::stod(gbps_text(rate)), 0) << rate;
    EXPECT_NEAR(std::stod(gbps_text(rate)), rate, rate * 0.051) << rate;
  }
}

}  // namespace
}  // namespace pickle::bench
