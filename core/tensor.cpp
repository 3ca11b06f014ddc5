#include "core/tensor.h"

#include "core/detail/checked_math.h"
#include "core/ops/native.h"
#include "core/pinned_memory.h"

namespace ember {

void TensorImpl::refresh(const char* op) {
  // See Note [Checked shape arithmetic]: numel and numel * element size fit in int64.
  EMBER_INTERNAL_ASSERT(sizes.size() == strides.size(), op, ": sizes ", sizes, " and strides ", strides);
  const int64_t n = detail::checked_numel(sizes, op);
  (void)detail::checked_mul(n, static_cast<int64_t>(element_size(dtype)), op, sizes, "the byte count");
  numel = n;
  if (n == 0) {  // PyTorch treats every empty tensor as contiguous
    contiguous = true;
    return;
  }
  bool c = true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) { c = false; break; }
    expected *= sizes[d];
  }
  contiguous = c;
}

void TensorImpl::check_in_storage(const char* op) const {
  if (numel == 0) return;
  int64_t last = offset;  // element offset of the last element this geometry reaches
  for (size_t d = 0; d < sizes.size(); ++d) {
    EMBER_CHECK_T(ValueError, strides[d] >= 0, op, ": negative stride ", strides[d], " in ", strides);
    int64_t extent = detail::checked_mul(sizes[d] - 1, strides[d], op, sizes, "the extent in storage");
    last = detail::checked_add(last, extent, op, sizes, "the extent in storage");
  }
  const auto capacity = static_cast<int64_t>(storage.num_bytes() / element_size(dtype));
  EMBER_CHECK_T(IndexError, offset >= 0 && last < capacity, op, ": sizes ", sizes, ", strides ", strides,
                " and offset ", offset, " reach element ", last, " of a storage that holds ", capacity, " elements");
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // scalars accept dim 0 / -1 like PyTorch
  EMBER_CHECK_T(IndexError, dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [",
                -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

IntList contiguous_strides(const IntList& sizes, const char* op) {
  return detail::checked_contiguous_strides(sizes, op);
}

int64_t numel_of(const IntList& sizes, const char* op) { return detail::checked_numel(sizes, op); }

Tensor make_tensor(Storage storage, IntList sizes, IntList strides, int64_t offset, DType dtype, const char* op) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->refresh(op);
  impl->check_in_storage(op);
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const {
  auto* i = checked();
  EMBER_CHECK_T(IndexError, !i->sizes.empty(), "size: a 0-dim tensor has no dimension ", d);
  return i->sizes[wrap_dim(d, dim(), "size")];
}

int64_t Tensor::stride(int64_t d) const {
  auto* i = checked();
  EMBER_CHECK_T(IndexError, !i->sizes.empty(), "stride: a 0-dim tensor has no dimension ", d);
  return i->strides[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_pinned() const { return checked()->storage.is_pinned(); }

void Tensor::record_stream(Stream stream) const {
  const Storage& s = checked()->storage;
  if (!s.defined() || s.data() == nullptr) return;
  if (PinnedAllocator* pinned = PinnedAllocator::owner_of(s.data_ptr())) {
    pinned->record_stream(s.data(), stream);
  } else {
    ember::record_stream(s.data_ptr(), stream);
  }
}

double Tensor::item() const {
  EMBER_CHECK_T(ValueError, numel() == 1, "item: a Tensor with ", numel(),
                " elements cannot be converted to a number (expected exactly 1 element)");
  Tensor c = device().is_cpu() ? *this : native::to(*this, Device::cpu());
  return EMBER_DISPATCH_ALL(c.dtype(), "item", [&]() -> double {
    return static_cast<double>(*c.data_ptr<scalar_t>());
  });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = native::contiguous(device().is_cpu() ? *this : native::to(*this, Device::cpu()));
  std::vector<T> out(static_cast<size_t>(c.numel()));
  EMBER_DISPATCH_ALL(c.dtype(), "to_vector", [&] {
    const scalar_t* p = c.data_ptr<scalar_t>();
    for (size_t k = 0; k < out.size(); ++k) {
      if constexpr (sizeof(scalar_t) == 2) {
        out[k] = static_cast<T>(static_cast<float>(p[k]));
      } else {
        out[k] = static_cast<T>(p[k]);  // direct: int64 values above 2^53 stay exact
      }
    }
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  auto v = to_vector<int64_t>();
  return std::vector<bool>(v.begin(), v.end());
}

AutogradMeta& Tensor::ensure_autograd_meta() const {
  auto* i = checked();
  if (!i->autograd) i->autograd = std::make_unique<AutogradMeta>();
  return *i->autograd;
}

Tensor& Tensor::requires_grad_(bool on) {
  auto* i = checked();
  if (on) {
    EMBER_CHECK_T(TypeError, ember::is_floating_point(i->dtype),
                  "requires_grad_: only tensors of floating point dtype can require gradients, got ", i->dtype);
    EMBER_CHECK(!i->inference || InferenceModeState::is_enabled(),
                "requires_grad_: setting requires_grad=True on an inference tensor outside InferenceMode is not "
                "allowed (clone() it outside InferenceMode to get a normal tensor)");
  } else {
    EMBER_CHECK(is_leaf(), "requires_grad_(false): you can only change requires_grad flags of leaf variables. "
                "If you want to use a computed variable in a subgraph that doesn't require differentiation use "
                "detach()");
  }
  ensure_autograd_meta().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  auto* m = autograd_meta();
  return m && m->grad ? *m->grad : Tensor();
}

Tensor& Tensor::mutable_grad() const {
  auto& m = ensure_autograd_meta();
  if (!m.grad) m.grad = std::make_unique<Tensor>();
  return *m.grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> kNone;
  auto* m = autograd_meta();
  return m ? m->grad_fn : kNone;
}

void Tensor::retain_grad() const {
  EMBER_CHECK(requires_grad(), "retain_grad: can't retain_grad on a Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep .grad anyway
  ensure_autograd_meta().retains_grad = true;
}

namespace {

// Hooks of both kinds share one id counter, so an id names one hook of one tensor.
template <typename Hook>
int add_hook(AutogradMeta& m, std::vector<std::pair<int, Hook>>& hooks, Hook hook) {
  const int id = m.next_hook_id++;
  hooks.emplace_back(id, std::move(hook));
  return id;
}

template <typename Hook>
void erase_hook(std::vector<std::pair<int, Hook>>& hooks, int id) {
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

}  // namespace

int Tensor::register_hook(TensorHook hook) const {
  EMBER_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  auto& m = ensure_autograd_meta();
  return add_hook(m, m.hooks, std::move(hook));
}

void Tensor::remove_hook(int id) const {
  if (auto* m = autograd_meta()) erase_hook(m->hooks, id);
}

int Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  EMBER_CHECK(requires_grad() && is_leaf(),
              "register_post_accumulate_grad_hook: post accumulate grad hooks can only be registered on leaf "
              "tensors that require grad");
  auto& m = ensure_autograd_meta();
  return add_hook(m, m.post_accumulate_hooks, std::move(hook));
}

void Tensor::remove_post_accumulate_grad_hook(int id) const {
  if (auto* m = autograd_meta()) erase_hook(m->post_accumulate_hooks, id);
}

}  // namespace ember
