// CPU row kernels of the recurrent cells: one call per time step and row range runs the unit
// math of core/kernels/rnn_cell.h over rows [j0, j1) and their H hidden units. float32 uses the
// vectorizing approximations of vec_math.h (about 1.5e-7 relative error) in AVX-512 / AVX2 /
// baseline variants (isa.h); float64 uses libm. Pure functions over caller-owned buffers;
// distinct row ranges may run concurrently.
#pragma once
#include <cstdint>

#include "core/kernels/rnn_cell.h"

namespace ember::kernels::cpu {

void lstm_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void lstm_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void lstm_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void lstm_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void gru_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void gru_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void gru_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void gru_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
/// relu = false: tanh cell.
void rnn_forward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1);
void rnn_forward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1);
void rnn_backward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1);
void rnn_backward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1);

}  // namespace ember::kernels::cpu
