// ember::native: the tensor math of ember_core, without autograd. Every function checks its
// arguments (shapes, dtypes, devices) and throws an ember::Error subclass naming the op, what
// it expected and what arrived; nothing is modified when a check fails. Binary element-wise
// ops broadcast as NumPy/PyTorch do and promote dtypes as PyTorch does. Views share storage.
// The differentiable versions users call are in autograd/ops.h (namespace ember).
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::native {

// ---- element-wise, binary (broadcasting) -------------------------------------
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);  // a / b
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor pow(const Tensor& a, double exponent);
// comparisons -> bool
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// ---- element-wise, unary --------------------------------------------------------
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);
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
Tensor gelu(const Tensor& a);  // exact (erf) form
Tensor erf(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);
Tensor isnan(const Tensor& a);
Tensor isfinite(const Tensor& a);
// fused backward helpers: grad * f'(.)
Tensor tanh_backward(const Tensor& grad, const Tensor& y);      // grad * (1 - y^2)
Tensor sigmoid_backward(const Tensor& grad, const Tensor& y);   // grad * y * (1 - y)
Tensor relu_backward(const Tensor& grad, const Tensor& x);      // grad * (x > 0)
Tensor gelu_backward(const Tensor& grad, const Tensor& x);

// ---- selection ----------------------------------------------------------------------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);

// ---- in place (bump the version counter; return self) ---------------------------------
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& add_(Tensor& self, double other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, double other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, double value = 1.0);  // self += value*a*b
Tensor& addcdiv_(Tensor& self, const Tensor& a, const Tensor& b, double value = 1.0);  // self += value*a/b
Tensor& lerp_(Tensor& self, const Tensor& end, double weight);
Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max);
Tensor& sqrt_(Tensor& self);
Tensor& fill_(Tensor& self, double value);
Tensor& zero_(Tensor& self);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);
/// Copies src into self (broadcasting src; converting dtype; across devices). non_blocking: a
/// host<->CUDA copy whose host side is pinned does not wait for itself (Note [Pinned host memory]).
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);

// ---- conversion -------------------------------------------------------------------------
Tensor to(const Tensor& a, DType dtype);
/// non_blocking as copy_; CUDA -> CPU with non_blocking returns pinned memory (as PyTorch).
Tensor to(const Tensor& a, Device device, bool non_blocking = false);
Tensor to(const Tensor& a, Device device, DType dtype, bool non_blocking = false);
/// A copy of a CPU tensor in pinned host memory with a's sizes and strides (storage offset 0, the
/// storage a's whole strided extent), as PyTorch's; `a` itself when already pinned.
/// Throws ValueError for a tensor not on the CPU, DeviceError without a CUDA device.
Tensor pin_memory(const Tensor& a);
Tensor clone(const Tensor& a);
Tensor contiguous(const Tensor& a);

// ---- reductions ----------------------------------------------------------------------------
/// Empty `dims` reduces over all dimensions.
Tensor sum(const Tensor& a, const IntList& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const IntList& dims = {}, bool keepdim = false);
/// (values, indices) along dim.
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& a, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor all(const Tensor& a);
Tensor any(const Tensor& a);
/// Sums a broadcast gradient back to `sizes` (the reverse of broadcasting).
Tensor sum_to_size(const Tensor& a, const IntList& sizes);

// ---- linear algebra (OpenBLAS on CPU, cuBLAS on CUDA) -----------------------------------
Tensor mm(const Tensor& a, const Tensor& b);            // [n,k] x [k,m]
Tensor bmm(const Tensor& a, const Tensor& b);           // [B,n,k] x [B,k,m]
Tensor matmul(const Tensor& a, const Tensor& b);        // torch.matmul semantics (1-D, 2-D, batched, broadcast)
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta = 1.0, double alpha = 1.0);
/// out = beta * out + alpha * a @ b, written into out (which must be contiguous [n,m]).
void addmm_out(Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha);

// ---- views (share storage) ------------------------------------------------------------------
/// Throws Error when the geometry does not allow a view (use reshape).
Tensor view(const Tensor& a, const IntList& sizes);  // one -1 allowed
Tensor reshape(const Tensor& a, const IntList& sizes);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& a);
Tensor permute(const Tensor& a, const IntList& dims);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& a, const IntList& sizes);  // -1 keeps a size
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& a, const IntList& sizes, const IntList& strides, int64_t offset);
/// Broadcast shape of two shapes; throws ValueError naming `op` when incompatible.
IntList broadcast_shapes(const IntList& a, const IntList& b, const char* op = "broadcast");

// ---- joining and splitting -------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& a, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);

// ---- indexing ---------------------------------------------------------------------------------
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// self.index_add_(dim, index, src): self[..., index[i], ...] += src[..., i, ...]
Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor one_hot(const Tensor& index, int64_t num_classes);

// ---- scans --------------------------------------------------------------------------------------
/// The running sum along dim (reverse: from the end, the gradient of the forward one). Floating
/// inputs keep their dtype (float32/64); integers and bool sum into int64; TypeError otherwise.
Tensor cumsum(const Tensor& a, int64_t dim, bool reverse = false);

// ---- softmax ----------------------------------------------------------------------------------
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim);

}  // namespace ember::native
