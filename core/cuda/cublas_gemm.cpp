#include "core/cuda/cublas_gemm.h"

#include <climits>
#include <mutex>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/device.h"

namespace ember::cuda {
namespace {

struct HandleSlot {
  std::once_flag created;
  std::mutex mutex;  // guards use of `handle`
  cublasHandle_t handle = nullptr;
};
HandleSlot g_handles[kMaxDevicesPerType];

// The handle of the current device (`device_index`), created on first use.
HandleSlot& handle_for(int device_index) {
  EMBER_CHECK(device_index >= 0 && device_index < kMaxDevicesPerType, "gemm: CUDA device index ", device_index,
              " is out of range");
  HandleSlot& slot = g_handles[device_index];
  std::call_once(slot.created, [&] {
    cublasHandle_t h = nullptr;
    EMBER_CUBLAS_CHECK(cublasCreate(&h));
    slot.handle = h;
  });
  return slot;
}

}  // namespace

// cuBLAS is column-major. A row-major matrix with row stride ld is, read column-major, its
// transpose with leading dimension ld. So row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: operands swapped, m and n swapped, the same op flags.
void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, int device_index) {
  const bool low = dtype == kBFloat16 || dtype == kFloat16;
  EMBER_CHECK_T(TypeError, dtype == kFloat32 || dtype == kFloat64 || low,
                "mm: cuBLAS supports float32, float64, bfloat16 and float16, got ", dtype);
  for (int64_t v : {m, n, k, lda, ldb, ldc}) {
    EMBER_CHECK(v >= 0 && v <= INT_MAX, "mm: matrix size or stride ", v, " exceeds cuBLAS's limit of ", INT_MAX,
                " (m=", m, ", n=", n, ", k=", k, ")");
  }
  if (m == 0 || n == 0) return;
  CudaDeviceGuard guard(device_index);
  HandleSlot& slot = handle_for(device_index);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  std::lock_guard<std::mutex> lock(slot.mutex);
  // Bound to the caller's current stream on every call: the handle is shared by threads whose
  // current streams differ (Note [Current stream]).
  EMBER_CUBLAS_CHECK(cublasSetStream(slot.handle, current_stream(device_index)));
  if (low) {
    // 16-bit operands and result, float32 accumulation (what autocast's products run on).
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    const cudaDataType_t t = dtype == kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
    EMBER_CUBLAS_CHECK(cublasGemmEx(slot.handle, op_b, op_a, in, im, ik, &fa, b, t, static_cast<int>(ldb), a, t,
                                    static_cast<int>(lda), &fb, c, t, static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
  } else if (dtype == kFloat32) {
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    EMBER_CUBLAS_CHECK(cublasSgemm(slot.handle, op_b, op_a, in, im, ik, &fa, static_cast<const float*>(b),
                                   static_cast<int>(ldb), static_cast<const float*>(a), static_cast<int>(lda), &fb,
                                   static_cast<float*>(c), static_cast<int>(ldc)));
  } else {
    EMBER_CUBLAS_CHECK(cublasDgemm(slot.handle, op_b, op_a, in, im, ik, &alpha, static_cast<const double*>(b),
                                   static_cast<int>(ldb), static_cast<const double*>(a), static_cast<int>(lda), &beta,
                                   static_cast<double*>(c), static_cast<int>(ldc)));
  }
}

}  // namespace ember::cuda
