// The consumer project's own core/tensor.h, named as ember's core/tensor.h is: with ember's
// headers at the include root (before include/ember/) ember's own includes found this file
// instead of theirs. main.cpp includes both.
#pragma once

namespace my_app {
inline const char* own_core_header() { return "my_app/core"; }
}  // namespace my_app
