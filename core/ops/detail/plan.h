// Helpers shared by core/ops/*.cpp: building element-wise plans, device checks, and the
// table through which ember_core_cuda provides its kernels (null when CUDA is not built).
#pragma once
#include <initializer_list>

#include "core/kernels/elementwise.h"
#include "core/kernels/index.h"
#include "core/kernels/loops.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/optim.h"
#include "core/kernels/random.h"
#include "core/kernels/reduce.h"
#include "core/kernels/rnn_cell.h"
#include "core/ops/detail/cudnn_rnn_plan.h"
#include "core/tensor.h"

namespace ember::native::detail {

/// Plan over out (operand 0) and inputs broadcast to out's shape; dims coalesced.
kernels::ElementwisePlan make_plan(const Tensor& out, std::initializer_list<const Tensor*> inputs);

/// Throws Error unless all tensors are on one device (names `op` and the devices).
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

/// Kernels of the CUDA backend. Registered by ember_core_cuda (register_cuda_kernels()).
struct CudaKernels {
  /// Row-major C[m,n] = alpha * op(A) op(B) + beta * C for float/double, strides in elements.
  void (*gemm)(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
               const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
               int device_index);
  // The entries below run launch-grid functors of core/kernels/ (Note [Kernels as launch-grid
  // functors]) on the current stream of cuda:device_index. Pointers are device memory.
  /// The first i < n with idx[i] outside [-size, size) (allow_negative) or [0, size), or -1.
  /// `slot` is 8 bytes of scratch device memory. Waits for the stream (it reads the answer).
  int64_t (*index_first_out_of_range)(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* slot,
                                      int device_index);
  /// The first i < n with p[i] outside [0, 1] (or NaN), or -1; floating dtypes. Waits.
  int64_t (*first_invalid_probability)(DType dtype, const void* p, int64_t n, void* slot, int device_index);
  /// out[plain] = in[indexed] (gather, index_select); any dtype; indices already checked.
  void (*index_gather)(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* in, void* out,
                       int device_index);
  /// self[indexed] += src[plain] (scatter_add_, index_add_); float32/64, int32/64, bfloat16, float16.
  void (*index_scatter_add)(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* src,
                            void* self, int device_index);
  /// out[i * num_classes + idx[i]] = 1 on a zeroed int64 output.
  void (*one_hot)(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int device_index);
  /// Fills r.out (contiguous, r.t.n elements) from the Philox stream (core/kernels/random.h).
  void (*random)(const kernels::RandomLaunch& r, int device_index);

  // Multi-tensor launches (Note [Multi-tensor launches] in core/kernels/multi_tensor.h): `entries`
  // is a host array of n entries whose pointers are device memory of cuda:device_index; each
  // call copies its table to the device and launches once on the current stream.
  /// Adam/AdamW (kernels::AdamMultiF) over entries of `dtype`; a.step is not read (entry.arg).
  void (*multi_tensor_adam)(DType dtype, const kernels::AdamArgs& a, const kernels::MultiTensorEntry* entries,
                            int64_t n, int device_index);
  /// SGD (kernels::SgdMultiF); has_buf: list 2 holds momentum buffers.
  void (*multi_tensor_sgd)(DType dtype, const kernels::SgdArgs& a, bool has_buf,
                           const kernels::MultiTensorEntry* entries, int64_t n, int device_index);
  /// The reduction of kernels::NormTermF over list 0 (not finished: no root). Waits (reads it).
  double (*multi_tensor_norm)(const kernels::MultiTensorEntry* entries, int64_t n, double p, int device_index);
  /// list 0 *= scale (kernels::ScaleMultiF).
  void (*multi_tensor_scale)(const kernels::MultiTensorEntry* entries, int64_t n, double scale, int device_index);

  // nn layers (core/ops/nn_layers.cpp, core/ops/rnn_stepwise.cpp; functors in core/kernels/
  // gather_rows.h, embedding.h, layer_norm.h, rnn_cell.h).
  /// out row i (of cols elements) = src row index[i], or *fill where index[i] == -1; any dtype;
  /// index: out_rows device int64 entries in [-1, src rows); fill: one element of dtype.
  void (*gather_rows)(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src,
                      const void* fill, void* out, int device_index);
  /// out [n, dim] = rows idx (checked, contiguous int64) of w [num, dim] (contiguous); any dtype.
  void (*embedding_forward)(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                            int device_index);
  /// Device scratch embedding_backward needs for n indices into num_weights rows.
  size_t (*embedding_backward_scratch_bytes)(int64_t n, int64_t num_weights, int device_index);
  /// gw [num_weights, dim] (zeroed) gets the rows of g [n, dim] summed per index in position
  /// order, deterministically (Note [Deterministic embedding backward] in core/kernels/
  /// embedding.h); the padding_idx row (-1: none) is left alone. float32/64.
  void (*embedding_backward)(DType dtype, const int64_t* idx, int64_t n, int64_t num_weights, int64_t dim,
                             int64_t padding_idx, const void* g, void* gw, void* scratch, size_t scratch_bytes,
                             int device_index);
  /// layer_norm over contiguous [M, N] rows (w, b may be null); mean/rstd [M] float64. float32/64.
  void (*layer_norm_forward)(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean,
                             double* rstd, int64_t M, int64_t N, double eps, int device_index);
  /// Any of gx, gw, gb may be null (not wanted).
  void (*layer_norm_backward)(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                              const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb,
                              int device_index);
  /// One time step's pointwise cell (forward or backward) over rows * s.hidden items.
  void (*rnn_cell_f32)(kernels::CellKind kind, bool backward, const kernels::CellStep<float>& s, int64_t rows,
                       int device_index);
  void (*rnn_cell_f64)(kernels::CellKind kind, bool backward, const kernels::CellStep<double>& s, int64_t rows,
                       int device_index);
  /// The cuDNN RNN (core/cuda/cudnn_rnn.cpp); null when ember was built without cuDNN.
  const CudnnRnnBackend* cudnn_rnn = nullptr;
};
CudaKernels* cuda_kernels();
void set_cuda_kernels(CudaKernels* kernels);
/// Throws DeviceError when a CUDA tensor reaches an op without CUDA kernels.
CudaKernels& require_cuda(const char* op);

}  // namespace ember::native::detail
