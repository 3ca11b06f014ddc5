// ember::Error (core/error.h, Note [Error messages]): what() is the message alone, without a
// source path of the build machine; where() keeps "file:line:function" of the check, relative
// to the repository root; EMBER_SHOW_CPP_STACKTRACES=1 appends it to what(). The variable is
// read once per process, so the cases that depend on it run in a child process (threadsafe
// death-test style: the child re-executes this binary and sets the variable before any error).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ember {
namespace {

void check_size(int got) { EMBER_CHECK_T(ValueError, got == 3, "check_size: expected 3 elements, got ", got); }

ValueError caught_value_error() {
  try {
    check_size(4);
  } catch (const ValueError& e) {
    return e;
  }
  ADD_FAILURE() << "check_size(4) did not throw a ValueError";
  return ValueError("");
}

// In the child: set or clear the variable, raise, print what() to stderr, exit 0.
[[noreturn]] void print_what_with_variable(const char* value) {
  if (value != nullptr)
    setenv("EMBER_SHOW_CPP_STACKTRACES", value, 1);
  else
    unsetenv("EMBER_SHOW_CPP_STACKTRACES");
  std::fprintf(stderr, "what=[%s]\n", caught_value_error().what());
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(Error, WhatIsTheMessageWithoutASourcePath) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(print_what_with_variable(nullptr), ::testing::ExitedWithCode(0),
              "what=\\[check_size: expected 3 elements, got 4\\]");
  EXPECT_EXIT(print_what_with_variable("0"), ::testing::ExitedWithCode(0),
              "what=\\[check_size: expected 3 elements, got 4\\]");
}

TEST(Error, WhereNamesTheCheckRelativeToTheRepository) {
  ValueError e = caught_value_error();
  EXPECT_EQ(e.message(), "check_size: expected 3 elements, got 4");
  const std::string prefix = "tests/core/error_test.cpp:";
  ASSERT_EQ(e.where().compare(0, prefix.size(), prefix), 0) << e.where();
  const std::string suffix = ":check_size";
  ASSERT_GT(e.where().size(), prefix.size() + suffix.size()) << e.where();
  EXPECT_EQ(e.where().substr(e.where().size() - suffix.size()), suffix) << e.where();
  const std::string line = e.where().substr(prefix.size(), e.where().size() - prefix.size() - suffix.size());
  EXPECT_EQ(line, "17");  // the line of EMBER_CHECK_T in check_size above
}

TEST(Error, ShowCppStacktracesAppendsWhereToWhat) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(print_what_with_variable("1"), ::testing::ExitedWithCode(0),
              "what=\\[check_size: expected 3 elements, got 4 \\(at tests/core/error_test.cpp:17:check_size\\)\\]");
}

TEST(Error, ErrorWithoutALocationHasAnEmptyWhere) {
  Error e("plain");
  EXPECT_STREQ(e.what(), "plain");
  EXPECT_EQ(e.message(), "plain");
  EXPECT_EQ(e.where(), "");
}

TEST(Error, InternalAssertSaysItIsOurBugAndKeepsItsLocation) {
  try {
    EMBER_INTERNAL_ASSERT(1 + 1 == 3, "arithmetic");
    FAIL() << "EMBER_INTERNAL_ASSERT(false) did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "internal error (please report a bug): 1 + 1 == 3 arithmetic");
    EXPECT_EQ(e.where().rfind("tests/core/error_test.cpp:", 0), 0u) << e.where();
  }
}

}  // namespace
}  // namespace ember
