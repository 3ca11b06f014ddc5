// core/warning.h: warnings go to stderr as one "ember: warning: " line, or to an installed
// handler; EMBER_WARN_ONCE warns once per process.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/warning.h"

namespace ember {
namespace {

TEST(Warning, GoesToStderrAsOneLine) {
  ::testing::internal::CaptureStderr();
  EMBER_WARN("DataLoader: worker ", 3, " is slow");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "ember: warning: DataLoader: worker 3 is slow\n");
}

TEST(Warning, AHandlerReceivesTheMessagesUntilRemoved) {
  std::vector<std::string> got;
  WarningHandler previous = set_warning_handler([&](const std::string& m) { got.push_back(m); });
  EXPECT_FALSE(previous);
  EMBER_WARN("first");
  for (int i = 0; i < 3; ++i) EMBER_WARN_ONCE("once ", i);
  EXPECT_EQ(got, (std::vector<std::string>{"first", "once 0"}));
  EXPECT_TRUE(set_warning_handler(nullptr));
  ::testing::internal::CaptureStderr();
  EMBER_WARN("back on stderr");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "ember: warning: back on stderr\n");
  EXPECT_EQ(got.size(), 2u);
}

}  // namespace
}  // namespace ember
