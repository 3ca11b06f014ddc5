// ErrorCode (core/error_code.h): every ember exception type survives the trip to a code and
// back with its type and message; other exceptions come back as ember::Error.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/error_code.h"

namespace ember {
namespace {

template <typename E>
void expect_round_trip(ErrorCode expected_code) {
  const auto [code, message] = describe_exception(std::make_exception_ptr(E("what went wrong")));
  EXPECT_EQ(code, expected_code);
  EXPECT_EQ(message, "what went wrong");
  try {
    throw_exception(code, message);
  } catch (const E& e) {
    EXPECT_EQ(typeid(e), typeid(E));  // the type itself, not a base
    EXPECT_STREQ(e.what(), "what went wrong");
    return;
  } catch (...) {
  }
  ADD_FAILURE() << "code " << int(code) << " did not come back as its own type";
}

TEST(ErrorCode, EveryEmberTypeRoundTrips) {
  expect_round_trip<Error>(ErrorCode::kError);
  expect_round_trip<ValueError>(ErrorCode::kValue);
  expect_round_trip<TypeError>(ErrorCode::kType);
  expect_round_trip<IndexError>(ErrorCode::kIndex);
  expect_round_trip<NotImplementedError>(ErrorCode::kNotImplemented);
  expect_round_trip<OutOfMemoryError>(ErrorCode::kOutOfMemory);
  expect_round_trip<DistributedError>(ErrorCode::kDistributed);
  expect_round_trip<TimeoutError>(ErrorCode::kTimeout);
}

TEST(ErrorCode, OtherExceptionsComeBackAsError) {
  auto [code, message] = describe_exception(std::make_exception_ptr(std::out_of_range("stoi")));
  EXPECT_EQ(code, ErrorCode::kStd);
  EXPECT_EQ(message, "stoi");
  EXPECT_THROW(throw_exception(code, message), Error);
  std::tie(code, message) = describe_exception(std::make_exception_ptr(42));
  EXPECT_EQ(code, ErrorCode::kUnknown);
  EXPECT_EQ(message, "unknown exception");
  EXPECT_THROW(throw_exception(code, message), Error);
  EXPECT_THROW(throw_exception(static_cast<ErrorCode>(200), "corrupt code"), Error);
}

}  // namespace
}  // namespace ember
