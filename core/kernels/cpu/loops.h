// The CPU element-wise driver: runs a functor over an ElementwisePlan with the thread pool.
// Rows of the innermost dimension are the unit of work; rows whose operands are all dense
// (or broadcast scalars) take a plain indexed loop the compiler vectorizes.
#pragma once
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/kernels/loops.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {

constexpr int64_t kGrainElements = 32768;

template <typename F, typename Out, typename... Ins, size_t... I>
inline void run_row(const F& f, char* const* base, const int64_t* st, int64_t n, std::index_sequence<I...>) {
  Out* out = reinterpret_cast<Out*>(base[0]);
  bool dense = st[0] == static_cast<int64_t>(sizeof(Out)) &&
               ((st[I + 1] == static_cast<int64_t>(sizeof(Ins))) && ...);
  if (dense) {
    std::tuple<const Ins*...> in{reinterpret_cast<const Ins*>(base[I + 1])...};
    for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i]...);
    return;
  }
  bool dense_or_scalar = st[0] == static_cast<int64_t>(sizeof(Out)) &&
                         ((st[I + 1] == static_cast<int64_t>(sizeof(Ins)) || st[I + 1] == 0) && ...);
  if (dense_or_scalar) {
    std::tuple<const Ins*...> in{reinterpret_cast<const Ins*>(base[I + 1])...};
    const int64_t step[] = {(st[I + 1] ? int64_t(1) : int64_t(0))..., 0};
    for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i * step[I]]...);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(base[0] + i * st[0]) = f(*reinterpret_cast<const Ins*>(base[I + 1] + i * st[I + 1])...);
  }
}

/// out[i] = f(in_0[i], ..., in_k[i]) over the plan; operand 0 is Out, operand j+1 is Ins[j].
template <typename Out, typename... Ins, typename F>
void cpu_kernel(const ElementwisePlan& p, const F& f) {
  if (p.numel == 0) return;
  constexpr int N = 1 + sizeof...(Ins);
  const int64_t inner = p.ndim > 0 ? p.sizes[p.ndim - 1] : 1;
  const int64_t outer = p.numel / inner;
  int64_t st[N];
  for (int k = 0; k < N; ++k) st[k] = p.ndim > 0 ? p.strides[k][p.ndim - 1] : 0;
  auto rows = [&](int64_t rb, int64_t re) {
    int64_t off[kMaxOperands];
    char* base[N];
    for (int64_t r = rb; r < re; ++r) {
      p.offsets(r * inner, off);
      for (int k = 0; k < N; ++k) base[k] = p.data[k] + off[k];
      run_row<F, Out, Ins...>(f, base, st, inner, std::index_sequence_for<Ins...>{});
    }
  };
  if (outer == 1 && inner >= 2 * kGrainElements && get_num_threads() > 1) {
    // One long row: split it.
    parallel_for(0, inner, kGrainElements, [&](int64_t b, int64_t e) {
      char* base[N];
      for (int k = 0; k < N; ++k) base[k] = p.data[k] + b * st[k];
      run_row<F, Out, Ins...>(f, base, st, e - b, std::index_sequence_for<Ins...>{});
    });
    return;
  }
  if (p.numel < 2 * kGrainElements) {
    rows(0, outer);
    return;
  }
  parallel_for(0, outer, std::max<int64_t>(1, kGrainElements / inner), rows);
}

}  // namespace ember::kernels::cpu
