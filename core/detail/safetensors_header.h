// What core/serialization.cpp's reader and writer share with the header parser
// (core/detail/safetensors_header.cpp, which also defines parse_safetensors_header). Stateless;
// thread-safe.
#pragma once
#include <cstddef>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace ember::detail {

/// The safetensors name of `dtype` ("F32"); TypeError for a dtype safetensors cannot hold.
const char* st_dtype_name(DType dtype);

/// The offset of the first byte that breaks UTF-8, or npos when `s` is valid UTF-8 (no
/// overlong forms, no surrogates, nothing above U+10FFFF).
size_t invalid_utf8_at(std::string_view s);

}  // namespace ember::detail

// Every format error names the file; those about one tensor also name the tensor.
#define ST_FAIL(source, ...) EMBER_THROW(ValueError, "safetensors file '", source, "': ", __VA_ARGS__)
#define ST_FAIL_TENSOR(source, name, ...) \
  EMBER_THROW(ValueError, "safetensors file '", source, "': tensor '", name, "': ", __VA_ARGS__)
