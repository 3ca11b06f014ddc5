// The differentiable tensor API users call (namespace ember): each op computes with
// ember::native and, when grad mode is on and an input requires grad, records a Node whose
// backward is written with native tensor ops only (device-neutral). Shapes, dtypes and errors
// are those of core/ops/native.h. Operators +, -, *, / and comparisons are defined here too.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/random.h"
#include "core/tensor.h"

namespace ember {

// ---- element-wise ------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
// comparisons (never differentiable)
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// ---- in place (differentiable on non-leaves; a leaf that requires grad is an error) -----------
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& mul_(Tensor& self, double value);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& zero_(Tensor& self);
Tensor& fill_(Tensor& self, double value);
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);

// ---- conversion, detach -----------------------------------------------------------------------
/// Differentiable copy to another device/dtype (gradients flow back across devices).
/// non_blocking: see native::to and Note [Pinned host memory].
Tensor to(const Tensor& a, Device device, bool non_blocking = false);
Tensor to(const Tensor& a, DType dtype);
Tensor to(const Tensor& a, Device device, DType dtype, bool non_blocking = false);
/// A copy in pinned host memory (`a` itself when already pinned); gradients pass through.
/// Throws ValueError for a tensor not on the CPU, DeviceError without a CUDA device.
Tensor pin_memory(const Tensor& a);
Tensor clone(const Tensor& a);
Tensor contiguous(const Tensor& a);
/// A view of the same data that does not require grad and has no history.
Tensor detach(const Tensor& a);

// ---- reductions -------------------------------------------------------------------------------
Tensor sum(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& a, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor norm(const Tensor& a);  // 2-norm over all elements
Tensor sum_to_size(const Tensor& a, const IntList& sizes);
/// The running sum along dim (torch.cumsum); integers and bool sum into int64.
Tensor cumsum(const Tensor& a, int64_t dim);

// ---- linear algebra ----------------------------------------------------------------------------
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta = 1.0, double alpha = 1.0);
/// x @ weight^T + bias over the last dim of x (x: [..., in], weight: [out, in], bias: [out] or undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- views --------------------------------------------------------------------------------------
Tensor view(const Tensor& a, const IntList& sizes);
Tensor reshape(const Tensor& a, const IntList& sizes);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& a);
Tensor permute(const Tensor& a, const IntList& dims);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& a, const IntList& sizes);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);

// ---- joining / splitting ------------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& a, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);

// ---- indexing ------------------------------------------------------------------------------------
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);

// ---- softmax -------------------------------------------------------------------------------------
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

// ---- operators (Python-like: `total = total + loss` keeps history, as in the FAQ) ---------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(b, a); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
/// Rebinds `a` to a + b (a new tensor with history), like Python's `total_loss += loss` when
/// total_loss starts as a number. Unlike LibTorch's `+=`, never writes into a's data (a may be a
/// leaf that requires grad); for that, use the in-place method a.add_(b).
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return a = add(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return a = sub(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return a = mul(a, b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return a = div(a, b); }
inline Tensor& operator+=(Tensor& a, double b) { return a = add(a, b); }
inline Tensor& operator-=(Tensor& a, double b) { return a = sub(a, b); }
inline Tensor& operator*=(Tensor& a, double b) { return a = mul(a, b); }
inline Tensor& operator/=(Tensor& a, double b) { return a = div(a, b); }

}  // namespace ember
