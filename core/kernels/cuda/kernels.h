// Host entry points of the CUDA kernels of core/kernels/cuda/, registered into the ops' stubs by
// register.cpp. Each launches on the current stream of the device it is given (or the calling
// thread's current device) and returns without waiting unless its contract says it reads a
// result back. Plain C++: included by g++-compiled files.
#pragma once
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/kernels/class_loss.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/index.h"
#include "core/kernels/loops.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/optim.h"
#include "core/kernels/random.h"
#include "core/kernels/reduce.h"
#include "core/kernels/rnn_cell.h"
#include "core/kernels/softmax.h"

namespace ember::cuda {

// elementwise.cu: the kernels of the stubs of core/ops/elementwise_stubs.h. Every entry throws
// TypeError for a dtype the op does not support (as the CPU kernel does).
void binary(kernels::BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan, const char* name);
void unary(kernels::UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan,
           const char* name);
void ternary(kernels::TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan, const char* name);
void cast(DType to, DType from, const kernels::ElementwisePlan& plan);
// copy.cpp: the kernel of copy_bytes_stub (core/ops/copy_stubs.h).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t num_bytes, bool async);
// reduce.cu: the kernel of reduce_stub (core/ops/reduce_stubs.h).
void reduce(kernels::ReduceKind op, DType in_dtype, DType out_dtype, const kernels::ReducePlan& plan, const void* in,
            void* out, int64_t* out_idx, double scale, int device_index, const char* name);


// The kernels of the launch-grid functors (index.cu, softmax.cu, random.cu, class_loss.cu); each
// makes cuda:device_index current. Contracts: their stubs in core/ops/*_stubs.h.
int64_t index_first_out_of_range(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* slot,
                                 int device_index);
int64_t first_invalid_probability(DType dtype, const void* p, int64_t n, void* slot, int device_index);
void index_gather(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* in, void* out,
                  int device_index);
void index_scatter_add(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* src, void* self,
                       const char* op, int device_index);
void one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int device_index);
void softmax(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* in, void* out,
             int device_index);
void softmax_backward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* grad,
                      const void* y, void* grad_in, int device_index);
void random(const kernels::RandomLaunch& r, int device_index);
int64_t first_bad_target(const int64_t* target, int64_t n, int64_t num_classes, int64_t ignore_index, void* slot,
                         int device_index);
void class_loss_forward(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                        double* loss, double* lse, double* row_weight, int device_index);
void class_loss_backward(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                         const double* lse, const void* g_elem, double g_scalar, void* gx, int device_index);


// multi_tensor.cu: the kernels of core/ops/multi_tensor_stubs.h.
void multi_tensor_adam(DType dtype, const kernels::AdamArgs& a, const kernels::MultiTensorEntry* entries, int64_t n,
                       int device_index);
void multi_tensor_sgd(DType dtype, const kernels::SgdArgs& a, bool has_buf, const kernels::MultiTensorEntry* entries,
                      int64_t n, int device_index);
void multi_tensor_scale(const kernels::MultiTensorEntry* entries, int64_t n, double scale, int device_index);
double multi_tensor_norm(const kernels::MultiTensorEntry* entries, int64_t n, double p, int device_index);

// nn_layers.cu: the kernels of core/ops/nn_layers_stubs.h. rnn_cell.cu: one time step's cell
// (forward or backward) over rows * s.hidden items, for the stepwise engine (rnn_layer.cpp).
void gather_rows(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src, const void* fill,
                 void* out, int device_index);
void embedding_forward(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                       int device_index);
size_t embedding_backward_scratch_bytes(int64_t n, int64_t num_weights, int device_index);
void embedding_backward(DType dtype, const int64_t* idx, int64_t n, int64_t num_weights, int64_t dim,
                        int64_t padding_idx, const void* g, void* gw, void* scratch, size_t scratch_bytes,
                        int device_index);
void layer_norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean, double* rstd,
                        int64_t M, int64_t N, double eps, int device_index);
void layer_norm_backward(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                         const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb, int device_index);
void rnn_cell_f32(kernels::RnnMode kind, bool backward, const kernels::CellStep<float>& s, int64_t rows,
                  int device_index);
void rnn_cell_f64(kernels::RnnMode kind, bool backward, const kernels::CellStep<double>& s, int64_t rows,
                  int device_index);

// fixed_point.cu: the kernels of core/ops/fixed_point_stubs.h.
double fixed_point_max_abs(DType dtype, const void* x, int64_t n, int device_index);
void fixed_point_accumulate(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent, int device_index);
void fixed_point_to_float(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor,
                          int device_index);
// cumsum.cu: the kernel of cumsum_stub (core/ops/cumsum_stubs.h).
void cumsum(DType dtype, int64_t outer, int64_t n, int64_t inner, bool reverse, const void* in, void* out,
            int device_index);

}  // namespace ember::cuda
