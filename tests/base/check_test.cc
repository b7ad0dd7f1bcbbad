#include "base/check.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace ddl::base {
namespace {

int checked_half(int n) {
  DDL_CHECK(n % 2 == 0, "half of an odd number " + std::to_string(n));
  return n / 2;
}

TEST(DdlCheck, PassesWhenTheInvariantHolds) {
  EXPECT_EQ(checked_half(4), 2);
}

TEST(DdlCheck, ThrowsAnInternalErrorNamingThePlaceAndCondition) {
  try {
    checked_half(3);
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    const std::string text = e.what();
    EXPECT_EQ(text.rfind("internal error: half of an odd number 3 (check_test.cc:", 0), 0u) << text;
    EXPECT_NE(text.find(": n % 2 == 0 failed; please report this)"), std::string::npos) << text;
  }
}

TEST(DdlCheck, IsNotARuntimeError) {
  // User errors derive from std::runtime_error; an internal error must not be caught as one.
  EXPECT_THROW(
      {
        try {
          checked_half(1);
        } catch (const std::runtime_error&) {
          FAIL() << "caught as a user error";
        }
      },
      std::logic_error);
}

TEST(ErrnoText, IsTheSystemsText) {
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
}

}  // namespace
}  // namespace ddl::base
