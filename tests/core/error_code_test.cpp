// ErrorCode (core/error_code.h): every ember exception type survives the trip to a code and
// back with its type, message() and where(); other exceptions come back as ember::Error.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/error_code.h"

namespace ember {
namespace {

template <typename E>
void expect_round_trip(ErrorCode expected_code) {
  const auto [code, message, where] =
      describe_exception(std::make_exception_ptr(E("what went wrong", "core/somewhere.cpp:12:check")));
  EXPECT_EQ(code, expected_code);
  EXPECT_EQ(message, "what went wrong");
  EXPECT_EQ(where, "core/somewhere.cpp:12:check");
  try {
    throw_exception(code, message, where);
  } catch (const E& e) {
    EXPECT_EQ(typeid(e), typeid(E));  // the type itself, not a base
    EXPECT_EQ(e.message(), "what went wrong");
    EXPECT_EQ(e.where(), "core/somewhere.cpp:12:check");
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
  expect_round_trip<DeviceError>(ErrorCode::kDevice);
}

// The description is the check's message and location, not what() (which ends with the
// location when EMBER_SHOW_CPP_STACKTRACES=1): an error carried twice does not grow.
TEST(ErrorCode, ACheckIsDescribedByItsMessageAndLocation) {
  ErrorDescription d;
  try {
    EMBER_CHECK_T(IndexError, 1 + 1 == 3, "index ", 3, " out of range");
  } catch (...) {
    d = describe_exception(std::current_exception());
  }
  EXPECT_EQ(d.code, ErrorCode::kIndex);
  EXPECT_EQ(d.message, "index 3 out of range");
  EXPECT_EQ(d.where.rfind("tests/core/error_code_test.cpp:", 0), 0u) << d.where;
  const ErrorDescription again = describe_exception(make_exception(d.code, d.message, d.where));
  EXPECT_EQ(again.message, d.message);
  EXPECT_EQ(again.where, d.where);
}

TEST(ErrorCode, OtherExceptionsComeBackAsError) {
  auto [code, message, where] = describe_exception(std::make_exception_ptr(std::out_of_range("stoi")));
  EXPECT_EQ(code, ErrorCode::kStd);
  EXPECT_EQ(message, "stoi");
  EXPECT_EQ(where, "");
  EXPECT_THROW(throw_exception(code, message), Error);
  const ErrorDescription unknown = describe_exception(std::make_exception_ptr(42));
  EXPECT_EQ(unknown.code, ErrorCode::kUnknown);
  EXPECT_EQ(unknown.message, "unknown exception");
  EXPECT_THROW(throw_exception(unknown.code, unknown.message), Error);
  EXPECT_THROW(throw_exception(static_cast<ErrorCode>(200), "corrupt code"), Error);
}

}  // namespace
}  // namespace ember
