// Matrix products: checks, then gemm_stub (core/ops/linalg_stubs.h: OpenBLAS on CPU, cuBLAS on
// CUDA). Transposed operands are passed to BLAS as transposes rather than copied.
#include "core/ops/linalg_stubs.h"

#include "core/profiler.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<GemmFn> gemm_stub;

namespace {

struct GemmOperand {
  Tensor t;        // possibly a contiguous copy
  bool trans;      // BLAS sees op(X)
  int64_t ld;
};

// Describes a 2-D matrix for row-major BLAS without copying when its strides allow.
GemmOperand as_gemm_operand(const Tensor& m) {
  int64_t rows = m.sizes()[0], cols = m.sizes()[1];
  int64_t s0 = m.strides()[0], s1 = m.strides()[1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) return {m, false, s0};
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) return {m, true, s1};
  Tensor c = clone(m);
  return {c, false, std::max<int64_t>(cols, 1)};
}

void check_mm_args(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_same_device(op, {&a, &b});
  EMBER_CHECK_T(TypeError, a.dtype() == b.dtype(), op, ": expected both matrices to have the same dtype, but got ",
                a.dtype(), " != ", b.dtype());
}

template <typename T>
void naive_gemm(int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, const Tensor& b, double beta, Tensor& c) {
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(c.raw_data());
  int64_t as0 = a.strides()[0], as1 = a.strides()[1], bs0 = b.strides()[0], bs1 = b.strides()[1];
  int64_t cs0 = c.strides()[0], cs1 = c.strides()[1];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += pa[i * as0 + p * as1] * pb[p * bs0 + j * bs1];
      T& out = pc[i * cs0 + j * cs1];
      out = static_cast<T>((beta == 0 ? 0 : beta * static_cast<double>(out)) + alpha * static_cast<double>(acc));
    }
  }
}

// c[m,n] = alpha * a[m,k] @ b[k,n] + beta * c, c row-major with unit column stride.
void gemm_into(Tensor& c, const Tensor& a, const Tensor& b, double beta, double alpha) {
  EMBER_PROFILE_SCOPE("gemm", kOp);
  int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) {
      zero_(c);
    } else {
      mul_(c, beta);
    }
    return;
  }
  DType dt = a.dtype();
  if ((dt == kBFloat16 || dt == kFloat16) && a.device().is_cpu()) {
    // No 16-bit GEMM on CPU: the float32 product of the (exact) widened operands, rounded once
    // into c. See Note [16-bit floats on CPU] (core/ops/elementwise.cpp).
    Tensor c32 = beta == 0 ? empty(c.sizes(), TensorOptions(kFloat32).device(c.device())) : to(c, kFloat32);
    gemm_into(c32, to(a, kFloat32), to(b, kFloat32), beta, alpha);
    copy_(c, c32);
    return;
  }
  if (dt != kFloat32 && dt != kFloat64 && dt != kBFloat16 && dt != kFloat16) {
    EMBER_CHECK(a.device().is_cpu(), "mm: integer matrix products are only supported on CPU");
    EMBER_DISPATCH_NUMERIC(dt, "mm", [&] { naive_gemm<scalar_t>(m, n, k, alpha, a, b, beta, c); });
    return;
  }
  GemmOperand ga = as_gemm_operand(a), gb = as_gemm_operand(b);
  int64_t ldc = c.strides()[0];
  gemm_stub.kernel(a.device(), "mm")(dt, ga.trans, gb.trans, m, n, k, alpha, ga.t.raw_data(), ga.ld, gb.t.raw_data(),
                                     gb.ld, beta, c.raw_data(), ldc, a.device().index);
}

}  // namespace

void addmm_out(Tensor& out, const Tensor& a, const Tensor& b, double beta, double alpha) {
  check_mm_args("addmm_out", a, b);
  EMBER_CHECK_T(ValueError, a.dim() == 2 && b.dim() == 2 && a.sizes()[1] == b.sizes()[0], "addmm_out: mat1 and mat2 shapes cannot be multiplied (",
                a.sizes(), " and ", b.sizes(), ")");
  EMBER_CHECK_T(ValueError, out.dim() == 2 && out.sizes()[0] == a.sizes()[0] && out.sizes()[1] == b.sizes()[1] &&
                    (out.strides()[1] == 1 || out.sizes()[1] == 1) && out.dtype() == a.dtype(),
                "addmm_out: expected out of shape [", a.sizes()[0], ", ", b.sizes()[1], "] with unit column stride and dtype ",
                a.dtype(), ", got ", out.sizes(), " ", out.dtype());
  gemm_into(out, a, b, beta, alpha);
  out.bump_version();
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_mm_args("mm", a, b);
  EMBER_CHECK_T(ValueError, a.dim() == 2, "mm: self must be a matrix, got a ", a.dim(), "-D tensor of shape ", a.sizes());
  EMBER_CHECK_T(ValueError, b.dim() == 2, "mm: mat2 must be a matrix, got a ", b.dim(), "-D tensor of shape ", b.sizes());
  EMBER_CHECK_T(ValueError, a.sizes()[1] == b.sizes()[0], "mm: mat1 and mat2 shapes cannot be multiplied (",
                a.sizes()[0], "x", a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
  Tensor out = empty({a.sizes()[0], b.sizes()[1]}, TensorOptions(a.dtype()).device(a.device()));
  gemm_into(out, a, b, 0.0, 1.0);
  return out;
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  check_mm_args("addmm", a, b);
  EMBER_CHECK_T(ValueError, a.dim() == 2 && b.dim() == 2 && a.sizes()[1] == b.sizes()[0],
                "addmm: mat1 and mat2 shapes cannot be multiplied (", a.sizes(), " and ", b.sizes(), ")");
  Tensor out = empty({a.sizes()[0], b.sizes()[1]}, TensorOptions(a.dtype()).device(a.device()));
  if (beta != 0) {
    copy_(out, bias);
  }
  gemm_into(out, a, b, beta, alpha);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_mm_args("bmm", a, b);
  EMBER_CHECK_T(ValueError, a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", a.sizes(), " and ", b.sizes());
  EMBER_CHECK_T(ValueError, a.sizes()[0] == b.sizes()[0] && a.sizes()[2] == b.sizes()[1],
                "bmm: batch1 and batch2 shapes cannot be multiplied (", a.sizes(), " and ", b.sizes(), ")");
  int64_t B = a.sizes()[0];
  Tensor out = empty({B, a.sizes()[1], b.sizes()[2]}, TensorOptions(a.dtype()).device(a.device()));
  for (int64_t i = 0; i < B; ++i) {
    Tensor o = select(out, 0, i);
    gemm_into(o, select(a, 0, i), select(b, 0, i), 0.0, 1.0);
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  EMBER_CHECK_T(ValueError, a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need to be at least 1D, but they are ",
                a.dim(), "D and ", b.dim(), "D");
  if (a.dim() == 1 && b.dim() == 1) {
    EMBER_CHECK_T(ValueError, a.sizes()[0] == b.sizes()[0], "matmul: inconsistent tensor size, expected tensor [",
                  a.sizes()[0], "] and src [", b.sizes()[0], "] to have the same number of elements");
    return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  }
  if (a.dim() == 2 && b.dim() == 1) return squeeze(mm(a, unsqueeze(b, 1)), 1);
  if (a.dim() == 1 && b.dim() == 2) return squeeze(mm(unsqueeze(a, 0), b), 0);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  if (a.dim() >= 3 && b.dim() <= 2) {
    // Fold batch into rows: [..., n, k] @ [k, m]
    Tensor bb = b.dim() == 1 ? unsqueeze(b, 1) : b;
    IntList lead(a.sizes().begin(), a.sizes().end() - 1);
    Tensor a2 = reshape(a, {-1, a.sizes().back()});
    Tensor r = mm(a2, bb);
    IntList out_sizes = lead;
    if (b.dim() == 2) out_sizes.push_back(b.sizes()[1]);
    return reshape(r, out_sizes);
  }
  // General batched with broadcasting.
  Tensor aa = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor bb = b.dim() == 1 ? unsqueeze(b, 1) : b;
  IntList ba(aa.sizes().begin(), aa.sizes().end() - 2), bbs(bb.sizes().begin(), bb.sizes().end() - 2);
  IntList batch = broadcast_shapes(ba, bbs, "matmul");
  int64_t n = aa.sizes()[aa.dim() - 2], k = aa.sizes().back(), m = bb.sizes().back();
  EMBER_CHECK_T(ValueError, bb.sizes()[bb.dim() - 2] == k, "matmul: shapes cannot be multiplied (", a.sizes(), " and ",
                b.sizes(), ")");
  IntList ea = batch, eb = batch;
  ea.push_back(n); ea.push_back(k);
  eb.push_back(k); eb.push_back(m);
  int64_t B = numel_of(batch);
  Tensor r = bmm(reshape(expand(aa, ea), {B, n, k}), reshape(expand(bb, eb), {B, k, m}));
  IntList out_sizes = batch;
  if (a.dim() > 1) out_sizes.push_back(n);
  if (b.dim() > 1) out_sizes.push_back(m);
  return reshape(r, out_sizes);
}

}  // namespace ember::native
