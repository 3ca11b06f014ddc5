// ErrorCode: one numbering of ember's exception types, for carrying an error across a
// process or thread boundary as (code, message, where) and raising it again with its type on
// the other side: DataLoader workers send it over their socket
// (data/detail/multiprocess_engine.cpp), Work keeps it so every waiter gets its own copy
// (parallel/distributed/work.cpp).
// Header-only, like core/error.h; stateless and thread-safe.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "core/error.h"

namespace ember {

/// Wire values: both ends of a DataLoader socket are the same binary, so only the names
/// are stable, not the numbers.
enum class ErrorCode : uint8_t {
  kError = 0,  // ember::Error itself
#define EMBER_ERROR_CODE_ENUMERATOR(Type, Name) Name,
  EMBER_FORALL_ERROR_SUBCLASSES(EMBER_ERROR_CODE_ENUMERATOR)  // kValue, kType, ... (core/error.h)
#undef EMBER_ERROR_CODE_ENUMERATOR
  kStd,      // a std::exception that is not an ember::Error
  kUnknown,  // not even a std::exception
};

/// The code of e's type (every ember type derives from Error directly).
inline ErrorCode error_code_of(const std::exception& e) {
#define EMBER_ERROR_CODE_OF(Type, Name) \
  if (dynamic_cast<const Type*>(&e)) return ErrorCode::Name;
  EMBER_FORALL_ERROR_SUBCLASSES(EMBER_ERROR_CODE_OF)
#undef EMBER_ERROR_CODE_OF
  if (dynamic_cast<const Error*>(&e)) return ErrorCode::kError;
  return ErrorCode::kStd;
}

/// What a caught exception carries across a boundary: the code of its type, its message
/// (Error::message(), what() for another std::exception) and, for an ember::Error, where() (the
/// location of the check that raised it: Note [Error messages] in core/error.h).
struct ErrorDescription {
  ErrorCode code = ErrorCode::kUnknown;
  std::string message;
  std::string where;  // "" when not known
};

/// The description of a caught exception; (kUnknown, "unknown exception") for one that is not
/// a std::exception. `error` must not be null.
inline ErrorDescription describe_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {error_code_of(e), e.message(), e.where()};
  } catch (const std::exception& e) {
    return {error_code_of(e), e.what(), std::string()};
  } catch (...) {
    return {ErrorCode::kUnknown, "unknown exception", std::string()};
  }
}

/// A fresh exception of the code's type carrying `message` and `where`. kStd and kUnknown (and
/// any number outside the enum, e.g. from a corrupt message) become ember::Error, which is a
/// std::runtime_error.
inline std::exception_ptr make_exception(ErrorCode code, const std::string& message, const std::string& where = {}) {
  switch (code) {
#define EMBER_MAKE_EXCEPTION_CASE(Type, Name) \
  case ErrorCode::Name: return std::make_exception_ptr(Type(message, where));
    EMBER_FORALL_ERROR_SUBCLASSES(EMBER_MAKE_EXCEPTION_CASE)
#undef EMBER_MAKE_EXCEPTION_CASE
    default: return std::make_exception_ptr(Error(message, where));
  }
}

/// Throws make_exception(code, message, where).
[[noreturn]] inline void throw_exception(ErrorCode code, const std::string& message, const std::string& where = {}) {
  std::rethrow_exception(make_exception(code, message, where));
}

}  // namespace ember
