#include "core/kernels/cpu/optim.h"

#include "core/error.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

// terms: the step's bias corrections (adam_step_terms), which replace a.step's.
template <typename T, bool kCoupled, bool kAmsgrad>
void adam_impl(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, const AdamArgs& a, const AdamStepTerms& terms) {
  auto f = make_adam_step<T, kCoupled, kAmsgrad>(a);
  f.neg_step_size = static_cast<T>(terms.neg_step_size);
  f.bc2_sqrt = static_cast<T>(terms.bc2_sqrt);
  parallel_for(0, n, 16384, [=](int64_t b, int64_t end) {
    // Local restrict copies: through the closure GCC would reload the pointers every iteration.
    T* __restrict pl = p;
    const T* __restrict gl = g;
    T* __restrict ml = m;
    T* __restrict vl = v;
    T* __restrict vmaxl = vmax;
    for (int64_t i = b; i < end; ++i) {
      if constexpr (kAmsgrad) {
        f(pl[i], gl[i], ml[i], vl[i], vmaxl[i]);
      } else {
        T unused = T(0);
        f(pl[i], gl[i], ml[i], vl[i], unused);
      }
    }
  });
}

template <typename T>
void adam_typed(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, const AdamArgs& a, const AdamStepTerms& t) {
  const bool coupled = !a.decoupled && a.weight_decay != 0.0;
  if (coupled) {
    vmax ? adam_impl<T, true, true>(p, g, m, v, vmax, n, a, t) : adam_impl<T, true, false>(p, g, m, v, vmax, n, a, t);
  } else {
    vmax ? adam_impl<T, false, true>(p, g, m, v, vmax, n, a, t)
         : adam_impl<T, false, false>(p, g, m, v, vmax, n, a, t);
  }
}

void adam_terms(DType dtype, void* p, const void* g, void* m, void* v, void* vmax, int64_t n, const AdamArgs& a,
                const AdamStepTerms& t) {
  if (dtype == kFloat32) {
    return adam_typed(static_cast<float*>(p), static_cast<const float*>(g), static_cast<float*>(m),
                      static_cast<float*>(v), static_cast<float*>(vmax), n, a, t);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "adam_step: dtype ", dtype);
  adam_typed(static_cast<double*>(p), static_cast<const double*>(g), static_cast<double*>(m),
             static_cast<double*>(v), static_cast<double*>(vmax), n, a, t);
}

template <typename T>
void sgd_typed(T* p, const T* g, T* buf, bool init_buf, int64_t n, const SgdArgs& a) {
  const SgdStepF<T> f = make_sgd_step<T>(a, buf != nullptr, init_buf);
  parallel_for(0, n, 32768, [&](int64_t b, int64_t e) {
    if (buf != nullptr) {
      for (int64_t i = b; i < e; ++i) f(p[i], g[i], buf[i]);
    } else {
      T unused = T(0);
      for (int64_t i = b; i < e; ++i) f(p[i], g[i], unused);
    }
  });
}

void sgd_step(DType dtype, void* p, const void* g, void* buf, bool init_buf, int64_t n, const SgdArgs& a) {
  if (dtype == kFloat32) {
    return sgd_typed(static_cast<float*>(p), static_cast<const float*>(g), static_cast<float*>(buf), init_buf, n, a);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "sgd_step: dtype ", dtype);
  sgd_typed(static_cast<double*>(p), static_cast<const double*>(g), static_cast<double*>(buf), init_buf, n, a);
}

}  // namespace

void multi_tensor_adam(DType dtype, const AdamArgs& a, const MultiTensorEntry* entries, int64_t n,
                       int /*device_index*/) {
  for (int64_t i = 0; i < n; ++i) {
    const MultiTensorEntry& e = entries[i];
    adam_terms(dtype, e.ptr[0], e.ptr[1], e.ptr[2], e.ptr[3], e.ptr[4], e.numel, a,
               AdamStepTerms{e.arg[0], e.arg[1]});
  }
}

void multi_tensor_sgd(DType dtype, const SgdArgs& a, bool has_buf, const MultiTensorEntry* entries, int64_t n,
                      int /*device_index*/) {
  for (int64_t i = 0; i < n; ++i) {
    const MultiTensorEntry& e = entries[i];
    sgd_step(dtype, e.ptr[0], e.ptr[1], has_buf ? e.ptr[2] : nullptr, e.arg[0] != 0.0, e.numel, a);
  }
}

}  // namespace ember::kernels::cpu
