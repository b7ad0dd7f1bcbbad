#include "base/table.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

#include "base/check.h"

namespace ddl::base {
namespace {

enum class Colour { kRed, kGreen, kBlue, kUnnamed };

constexpr std::pair<Colour, std::string_view> kColours[] = {
    {Colour::kRed, "red"}, {Colour::kGreen, "green"}, {Colour::kBlue, "blue"}};

TEST(Table, LooksUpEveryKeyAndMissesAbsentOnes) {
  EXPECT_EQ(lookup(kColours, Colour::kRed), "red");
  EXPECT_EQ(lookup(kColours, Colour::kBlue), "blue");
  EXPECT_EQ(lookup(kColours, Colour::kUnnamed), std::nullopt);
  EXPECT_EQ(lookup(kColours, Colour::kUnnamed).value_or("unknown"), "unknown");
}

TEST(Table, WorksAtCompileTime) {
  static_assert(lookup(kColours, Colour::kGreen) == std::optional<std::string_view>("green"));
  static_assert(!lookup(kColours, Colour::kUnnamed).has_value());
}

using FirstError = Error<struct FirstErrorTag>;
using SecondError = Error<struct SecondErrorTag>;

TEST(ComponentError, IsARuntimeErrorCaughtByItsOwnTypeOnly) {
  try {
    throw FirstError("host node7: no such file hosts.txt");
  } catch (const SecondError&) {
    FAIL() << "caught as another component's error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(dynamic_cast<const FirstError*>(&e), nullptr);
    EXPECT_STREQ(e.what(), "host node7: no such file hosts.txt");
  }
}

}  // namespace
}  // namespace ddl::base
