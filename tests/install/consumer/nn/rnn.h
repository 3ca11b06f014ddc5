// The consumer project's own nn/rnn.h (see core/tensor.h here).
#pragma once

namespace my_app {
inline const char* own_nn_header() { return "my_app/nn"; }
}  // namespace my_app
