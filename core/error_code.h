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
  kValue,
  kType,
  kIndex,
  kNotImplemented,
  kOutOfMemory,
  kDistributed,
  kTimeout,
  kStd,      // a std::exception that is not an ember::Error
  kUnknown,  // not even a std::exception
};

/// The code of e's type (every ember type derives from Error directly).
inline ErrorCode error_code_of(const std::exception& e) {
  if (dynamic_cast<const ValueError*>(&e)) return ErrorCode::kValue;
  if (dynamic_cast<const TypeError*>(&e)) return ErrorCode::kType;
  if (dynamic_cast<const IndexError*>(&e)) return ErrorCode::kIndex;
  if (dynamic_cast<const NotImplementedError*>(&e)) return ErrorCode::kNotImplemented;
  if (dynamic_cast<const OutOfMemoryError*>(&e)) return ErrorCode::kOutOfMemory;
  if (dynamic_cast<const DistributedError*>(&e)) return ErrorCode::kDistributed;
  if (dynamic_cast<const TimeoutError*>(&e)) return ErrorCode::kTimeout;
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
    case ErrorCode::kValue: return std::make_exception_ptr(ValueError(message, where));
    case ErrorCode::kType: return std::make_exception_ptr(TypeError(message, where));
    case ErrorCode::kIndex: return std::make_exception_ptr(IndexError(message, where));
    case ErrorCode::kNotImplemented: return std::make_exception_ptr(NotImplementedError(message, where));
    case ErrorCode::kOutOfMemory: return std::make_exception_ptr(OutOfMemoryError(message, where));
    case ErrorCode::kDistributed: return std::make_exception_ptr(DistributedError(message, where));
    case ErrorCode::kTimeout: return std::make_exception_ptr(TimeoutError(message, where));
    default: return std::make_exception_ptr(Error(message, where));
  }
}

/// Throws make_exception(code, message, where).
[[noreturn]] inline void throw_exception(ErrorCode code, const std::string& message, const std::string& where = {}) {
  std::rethrow_exception(make_exception(code, message, where));
}

}  // namespace ember
