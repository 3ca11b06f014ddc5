// error_of: the text of the error a piece of code raises, for tests that check what an error
// says (errors name the op, what was expected and what arrived: core/error.h). Header-only;
// used by tests only.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <typeinfo>

namespace ember::support {

/// What the exception being handled is, for a failure message (call inside a catch).
inline std::string describe_current_exception() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

/// what() of the exception f() throws, which must be an E (any std::exception by default).
/// Throwing something else, or nothing, is a test failure, and then the result is "".
template <typename E = std::exception, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << describe_current_exception();
    return {};
  }
  ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  return {};
}

/// How many times `word` occurs in `text` (non-overlapping), e.g. to check a name appears once.
inline size_t count_of(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); !word.empty() && at != std::string::npos; at = text.find(word, at + word.size())) ++n;
  return n;
}

}  // namespace ember::support
