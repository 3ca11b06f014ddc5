// Tensor: a cheap, shared handle to a TensorImpl (sizes, strides, offset, dtype, storage,
// version counter, autograd metadata). Copies of a Tensor alias the same data; views share
// storage. The handle itself is not synchronized: share tensors across threads read-only,
// or synchronize writers yourself. Math lives in free functions: core/ops/*.h (ember::native,
// no autograd) and autograd/ops.h (ember::, differentiable); the LibTorch-style methods below
// (x.view(...), x.sum(), x.index({...})) call the differentiable ones (Note [Tensor methods]).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/inference_mode.h"
#include "core/storage.h"

namespace ember {

namespace autograd {
class Node;
}
namespace indexing {
class TensorIndex;  // core/tensor_index.h, included at the end of this header
}

class Tensor;
using IntList = std::vector<int64_t>;

/// Shared by a tensor and all its views; bumped by every in-place write.
struct VersionCounter {
  std::atomic<uint32_t> version{0};
};

using TensorHook = std::function<Tensor(const Tensor& grad)>;  // may return an undefined Tensor to keep grad
using PostAccumulateHook = std::function<void(const Tensor& param)>;

/// Autograd state of one tensor. Plain data: the engine that reads it is in ember_autograd.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  std::unique_ptr<Tensor> grad;                      // accumulated gradient (leaves, retain_grad)
  std::shared_ptr<autograd::Node> grad_fn;           // set for non-leaf outputs of recorded ops
  uint32_t output_nr = 0;                            // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;    // leaves: their AccumulateGrad node
  std::vector<std::pair<int, TensorHook>> hooks;     // run on the incoming gradient, in order
  std::vector<std::pair<int, PostAccumulateHook>> post_accumulate_hooks;  // leaves only
  int next_hook_id = 0;
  std::string name;                                  // optional, used in error messages
};

struct TensorImpl {
  Storage storage;
  IntList sizes;
  IntList strides;        // in elements
  int64_t offset = 0;     // in elements
  int64_t numel = 0;
  DType dtype = kFloat32;
  bool contiguous = true;
  std::shared_ptr<VersionCounter> version = std::make_shared<VersionCounter>();
  std::unique_ptr<AutogradMeta> autograd;
  bool is_view = false;
  std::shared_ptr<TensorImpl> view_base;  // the tensor this one is a view of (autograd checks)
  /// Created under InferenceMode (or a view of such a tensor): see Note [Inference tensors].
  bool inference = InferenceModeState::is_enabled();

  /// Recomputes numel and contiguity after sizes/strides change. Throws ValueError naming `op`
  /// for a negative size or a shape whose element or byte count overflows int64 (see Note
  /// [Checked shape arithmetic] in core/detail/checked_math.cpp).
  void refresh(const char* op = "tensor");
  /// Throws IndexError naming `op` unless every element the geometry reaches lies inside the
  /// storage (no view or handle can touch memory its storage does not own).
  void check_in_storage(const char* op) const;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata --------------------------------------------------------------
  const IntList& sizes() const { return checked()->sizes; }
  const IntList& shape() const { return sizes(); }
  /// Size of dimension `dim`; negative dims count from the end. Throws IndexError.
  int64_t size(int64_t dim) const;
  const IntList& strides() const { return checked()->strides; }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(checked()->sizes.size()); }
  int64_t numel() const { return checked()->numel; }
  DType dtype() const { return checked()->dtype; }
  DType scalar_type() const { return dtype(); }
  Device device() const { return checked()->storage.device(); }
  int64_t storage_offset() const { return checked()->offset; }
  bool is_contiguous() const { return checked()->contiguous; }
  size_t element_size() const { return ember::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const Storage& storage() const { return checked()->storage; }
  bool is_floating_point() const { return ember::is_floating_point(dtype()); }
  /// True for a tensor made under InferenceMode (Note [Inference tensors]).
  bool is_inference() const { return checked()->inference; }
  /// True when the data lies in pinned host memory (pin_memory(); Note [Pinned host memory]).
  bool is_pinned() const;
  /// Marks the data as used by work queued on `stream`, so that once freed it is not reused
  /// before that work is done (PyTorch's record_stream): device memory (core/allocator.h) and
  /// pinned host memory alike; a no-op for other memory and for CPU streams.
  void record_stream(Stream stream) const;

  /// Address of element 0 (storage base + offset).
  void* raw_data() const {
    auto* i = checked();
    return static_cast<char*>(i->storage.data()) + i->offset * static_cast<int64_t>(ember::element_size(i->dtype));
  }
  /// Typed pointer to element 0; throws TypeError when T does not match dtype().
  template <typename T>
  T* data_ptr() const {
    EMBER_CHECK_T(TypeError, dtype() == dtype_of<T>, "data_ptr: tensor has dtype ", dtype(),
                  " but ", dtype_of<T>, " was requested");
    return static_cast<T*>(raw_data());
  }
  /// The single element as a plain double (copies from the device). Throws ValueError unless numel()==1.
  double item() const;
  template <typename T>
  T item() const { return static_cast<T>(item()); }
  /// All elements in row-major order, copied to the host as T (converting dtype).
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- versions (in-place writes) --------------------------------------------
  uint32_t version() const { return checked()->version->version.load(std::memory_order_relaxed); }
  void bump_version() const { checked()->version->version.fetch_add(1, std::memory_order_relaxed); }

  // ---- autograd state (the engine is in ember_autograd) -------------------------
  bool requires_grad() const { auto* i = checked(); return i->autograd && i->autograd->requires_grad; }
  /// Marks a leaf as needing gradients. Throws for non-floating dtypes and for non-leaves asked to stop.
  Tensor& requires_grad_(bool on = true);
  Tensor& set_requires_grad(bool on) { return requires_grad_(on); }
  /// The accumulated gradient (undefined before the first backward).
  Tensor grad() const;
  /// Assignable gradient slot (creates the autograd metadata when missing).
  Tensor& mutable_grad() const;
  void set_grad(const Tensor& g) const { mutable_grad() = g; }
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const { auto* i = checked(); return !i->autograd || !i->autograd->grad_fn; }
  /// Keep .grad for this non-leaf after backward.
  void retain_grad() const;
  AutogradMeta* autograd_meta() const { return checked()->autograd.get(); }
  AutogradMeta& ensure_autograd_meta() const;
  /// Registers a hook on the gradient flowing into this tensor; returns an id for remove_hook.
  int register_hook(TensorHook hook) const;
  void remove_hook(int id) const;
  /// Leaves only: runs after the gradient was accumulated into .grad.
  int register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  void remove_post_accumulate_grad_hook(int id) const;
  /// Computes gradients of this tensor w.r.t. graph leaves (implemented by ember_autograd).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  std::string str() const;  // PyTorch-style printing: values, dtype, device, grad_fn

  // ---- LibTorch-style methods --------------------------------------------------------------
  // Note [Tensor methods]
  // The methods below are declared here, in core, and defined in ember_autograd
  // (autograd/tensor_methods.cpp), where each one calls the differentiable free function of the
  // same name (autograd/ops.h, autograd/indexing.h): x.view(s) is ember::view(x, s), so history
  // is recorded exactly as with the free functions and there is one implementation of each op.
  // core's code never calls them (core may not depend on autograd; see the link lines in
  // core/CMakeLists.txt and autograd/CMakeLists.txt), and a program that uses them must link
  // ember_autograd (or ember::ember): linking ember_core alone gives an undefined reference to
  // e.g. ember::Tensor::view, at link time, never a silent fallback. Tensor::backward() was the
  // first member of this kind. In-place methods (trailing _) are const and return *this, as in
  // LibTorch: the handle is not changed, the data (and autograd history) it shares is.
  // Shapes, dtypes and errors are those of the free functions.

  // views and shape
  Tensor view(const IntList& sizes) const;
  Tensor reshape(const IntList& sizes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const IntList& sizes) const;
  Tensor expand_as(const Tensor& other) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(const IntList& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// x[i] is x.select(0, i).
  Tensor operator[](int64_t index) const;
  Tensor contiguous() const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;

  // conversion and history
  /// non_blocking: a copy between pinned host memory and a CUDA device is queued on the
  /// device's current stream and not waited for (to(cpu, true) from CUDA returns pinned memory);
  /// from pageable memory it is synchronous. See Note [Pinned host memory].
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false) const;
  Tensor cpu() const;
  /// A copy in pinned host memory with the same sizes and strides (this tensor when already
  /// pinned); differentiable. Throws ValueError for a tensor not on the CPU, DeviceError when
  /// no CUDA device is visible.
  Tensor pin_memory() const;
  Tensor clone() const;
  /// Shares the data, has no history and does not require grad.
  Tensor detach() const;

  // reductions
  Tensor sum() const;
  Tensor sum(const IntList& dims, bool keepdim = false) const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const IntList& dims, bool keepdim = false) const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  /// The largest element (0-dim); max(dim) gives (values, indices).
  Tensor max() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(const IntList& dims = {}, bool keepdim = false) const;
  /// Index of the largest element of the flattened tensor (0-dim int64).
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor norm() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // element-wise
  Tensor add(const Tensor& other, double alpha = 1.0) const;
  Tensor add(double other) const;
  Tensor sub(const Tensor& other, double alpha = 1.0) const;
  Tensor sub(double other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  // comparisons (bool results, never differentiable)
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(double other) const;
  Tensor lt(double other) const;
  Tensor le(double other) const;
  Tensor gt(double other) const;
  Tensor ge(double other) const;

  // indexing
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  /// x.index({Slice(0, 5), 1, None, "...", mask}): Python's x[0:5, 1, None, ..., mask]
  /// (see core/tensor_index.h and Note [Indexing] in autograd/indexing.cpp). Differentiable.
  /// Throws IndexError naming the dimension and its size for an out-of-range index.
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  /// x[indices] = value (value broadcast to the indexed shape); differentiable w.r.t. value
  /// and, for a non-leaf x, w.r.t. x. accumulate=true adds (duplicates add up).
  const Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value,
                           bool accumulate = false) const;
  const Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double value) const;

  // in place (differentiable on non-leaves; a leaf that requires grad is an error)
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& add_(double other) const;
  const Tensor& sub_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double other) const;
  const Tensor& zero_() const;
  const Tensor& fill_(double value) const;
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  const Tensor& masked_fill_(const Tensor& mask, double value) const;

 private:
  TensorImpl* checked() const {
    EMBER_CHECK(impl_ != nullptr, "operation on an undefined Tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);
inline std::ostream& operator<<(std::ostream& os, const IntList& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

/// Options for factory functions, in LibTorch's builder style: TensorOptions().dtype(kInt64).device("cpu:1").
/// has_dtype_ says whether a dtype was given (tensor(std::vector<T>) infers it from T otherwise).
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  bool has_dtype_ = false;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d), has_dtype_(true) {}  // NOLINT
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; o.has_dtype_ = true; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

/// Normalizes a possibly negative dim against `ndim`; throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// Row-major contiguous strides for `sizes`. Throws ValueError naming `op` on overflow.
IntList contiguous_strides(const IntList& sizes, const char* op = "contiguous_strides");
/// The number of elements of `sizes`. Throws ValueError naming `op` for a negative size or a
/// count that overflows int64.
int64_t numel_of(const IntList& sizes, const char* op = "numel");

/// Builds a tensor handle over a storage with explicit geometry (views, from_blob). Throws
/// ValueError naming `op` when the shape overflows (see TensorImpl::refresh), IndexError when
/// the geometry reaches beyond the storage.
Tensor make_tensor(Storage storage, IntList sizes, IntList strides, int64_t offset, DType dtype,
                   const char* op = "make_tensor");

}  // namespace ember

// Slice, None, Ellipsis and TensorIndex hold Tensors, so they follow Tensor's definition.
#include "core/tensor_index.h"
