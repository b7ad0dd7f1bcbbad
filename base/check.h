#pragma once
// Broken internal invariants, told apart from user errors.
//
// A user's mistake (a bad hostfile, an unknown option, a host that refuses ssh) is a typed
// exception whose text names the input and the next step. A broken invariant of our own code is
// a bug: DDL_CHECK throws InternalError, whose text says so and asks for a report, and which
// ddlrun's main prints as "internal error: ..." instead of blaming the user's input.
//
//   DDL_CHECK(!order.empty(), "jsrun launcher: the plan has no ranks");
//   DDL_FAIL("the plan is inconsistent: " + why);   // a place the code must never reach

#include <stdexcept>
#include <string>
#include <string_view>

namespace ddl::base {

/// A broken internal invariant: a bug in ddlrun, never the user's doing.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// A component's own error type: a std::runtime_error told apart by `Tag`, so that callers can
/// catch one component's errors by type. what() is the whole user-facing message.
///
///   using TransportError = base::Error<struct TransportErrorTag>;
template <typename Tag>
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws InternalError "internal error: MESSAGE (FILE:LINE: CONDITION failed; please report
/// this)". What DDL_CHECK calls; not meant to be called directly.
[[noreturn]] void fail_check(std::string_view condition, std::string_view message,
                             std::string_view file, int line);

/// strerror(err), the text the OS gives an errno value.
std::string errno_text(int err);

}  // namespace ddl::base

/// Asserts an internal invariant (always on, in every build type); see the top of the file.
/// `message` (a string) is built only when the check fails.
#define DDL_CHECK(condition, message)                                                   \
  do {                                                                                  \
    if (!(condition)) ::ddl::base::fail_check(#condition, message, __FILE__, __LINE__); \
  } while (false)

/// Reports a broken internal invariant found without a condition to test (a place the code
/// must never reach, an internal check of our own that failed): throws InternalError.
#define DDL_FAIL(message) ::ddl::base::fail_check("unreachable", message, __FILE__, __LINE__)
