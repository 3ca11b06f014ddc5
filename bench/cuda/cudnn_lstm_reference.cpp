#include "bench/cuda/cudnn_lstm_reference.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace ember::bench {
namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Failure(std::string(what) + ": " + cudnnGetErrorString(s));
}

// Device buffers freed at scope exit.
struct Buffers {
  std::vector<void*> ptrs;
  void* get(size_t num_bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(num_bytes, 16)), "cudaMalloc");
    ptrs.push_back(p);
    return p;
  }
  ~Buffers() {
    for (void* p : ptrs) (void)cudaFree(p);
  }
};

}  // namespace

double cudnn_lstm_reference_ms(int device_index, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                               const std::vector<int>& sorted_lengths, int reps, std::string* error) {
  cudnnHandle_t h = nullptr;
  cudnnDropoutDescriptor_t drop = nullptr;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t xd = nullptr, yd = nullptr;
  cudnnTensorDescriptor_t hd = nullptr;
  cudaStream_t stream = nullptr;
  double result = -1;
  try {
    check(cudaSetDevice(device_index), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudnnCreate(&h), "cudnnCreate");
    check(cudnnSetStream(h, stream), "cudnnSetStream");
    check(cudnnCreateDropoutDescriptor(&drop), "cudnnCreateDropoutDescriptor");
    check(cudnnSetDropoutDescriptor(drop, h, 0.0f, nullptr, 0, 0), "cudnnSetDropoutDescriptor");
    check(cudnnCreateRNNDescriptor(&rnn), "cudnnCreateRNNDescriptor");
    const int in = static_cast<int>(input_size), hid = static_cast<int>(hidden_size);
    const int layers = static_cast<int>(num_layers), batch = static_cast<int>(sorted_lengths.size());
    const int steps = sorted_lengths.empty() ? 0 : sorted_lengths[0];
    int64_t rows = 0;
    for (int l : sorted_lengths) rows += l;
    check(cudnnSetRNNDescriptor_v8(rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                   CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                   CUDNN_FMA_MATH, in, hid, hid, layers, drop, CUDNN_RNN_PADDED_IO_DISABLED),
          "cudnnSetRNNDescriptor_v8");
    check(cudnnCreateRNNDataDescriptor(&xd), "cudnnCreateRNNDataDescriptor");
    check(cudnnCreateRNNDataDescriptor(&yd), "cudnnCreateRNNDataDescriptor");
    check(cudnnSetRNNDataDescriptor(xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, steps, batch, in,
                                    sorted_lengths.data(), nullptr),
          "cudnnSetRNNDataDescriptor(x)");
    check(cudnnSetRNNDataDescriptor(yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, steps, batch, hid,
                                    sorted_lengths.data(), nullptr),
          "cudnnSetRNNDataDescriptor(y)");
    check(cudnnCreateTensorDescriptor(&hd), "cudnnCreateTensorDescriptor");
    const int dims[3] = {layers, batch, hid}, strides[3] = {batch * hid, hid, 1};
    check(cudnnSetTensorNdDescriptor(hd, CUDNN_DATA_FLOAT, 3, dims, strides), "cudnnSetTensorNdDescriptor");
    size_t wbytes = 0, wsbytes = 0, rsbytes = 0;
    check(cudnnGetRNNWeightSpaceSize(h, rnn, &wbytes), "cudnnGetRNNWeightSpaceSize");
    check(cudnnGetRNNTempSpaceSizes(h, rnn, CUDNN_FWD_MODE_TRAINING, xd, &wsbytes, &rsbytes),
          "cudnnGetRNNTempSpaceSizes");
    Buffers b;
    const size_t xbytes = static_cast<size_t>(rows) * in * 4, ybytes = static_cast<size_t>(rows) * hid * 4;
    const size_t hbytes = static_cast<size_t>(layers) * batch * hid * 4;
    void *x = b.get(xbytes), *y = b.get(ybytes), *dy = b.get(ybytes), *dx = b.get(xbytes);
    void *hy = b.get(hbytes), *cy = b.get(hbytes), *dhx = b.get(hbytes), *dcx = b.get(hbytes);
    void *w = b.get(wbytes), *dw = b.get(wbytes), *ws = b.get(wsbytes), *rs = b.get(rsbytes);
    auto* lens = static_cast<int32_t*>(b.get(sorted_lengths.size() * 4));
    check(cudaMemcpy(lens, sorted_lengths.data(), sorted_lengths.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    // Small values: the timings do not depend on them, but NaNs would be a poor peer.
    for (auto [p, n] : {std::pair{x, xbytes}, {dy, ybytes}, {w, wbytes}}) {
      check(cudaMemset(p, 0, n), "cudaMemset");
    }
    // cudaMemset runs on the legacy default stream, which does not order `stream` (non-blocking).
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    auto step = [&] {
      check(cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_TRAINING, lens, xd, x, yd, y, hd, nullptr, hy, hd, nullptr, cy,
                            wbytes, w, wsbytes, ws, rsbytes, rs),
            "cudnnRNNForward");
      check(cudnnRNNBackwardData_v8(h, rnn, lens, yd, y, dy, xd, dx, hd, nullptr, nullptr, dhx, hd, nullptr, nullptr,
                                    dcx, wbytes, w, wsbytes, ws, rsbytes, rs),
            "cudnnRNNBackwardData_v8");
      check(cudaMemsetAsync(dw, 0, wbytes, stream), "cudaMemsetAsync");
      check(cudnnRNNBackwardWeights_v8(h, rnn, CUDNN_WGRAD_MODE_ADD, lens, xd, x, hd, nullptr, yd, y, wbytes, dw,
                                       wsbytes, ws, rsbytes, rs),
            "cudnnRNNBackwardWeights_v8");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    };
    for (int i = 0; i < 3; ++i) step();
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    result = ms[ms.size() / 2];
  } catch (const Failure& f) {
    if (error != nullptr) *error = f.what();
    result = -1;
  }
  if (hd) (void)cudnnDestroyTensorDescriptor(hd);
  if (xd) (void)cudnnDestroyRNNDataDescriptor(xd);
  if (yd) (void)cudnnDestroyRNNDataDescriptor(yd);
  if (rnn) (void)cudnnDestroyRNNDescriptor(rnn);
  if (drop) (void)cudnnDestroyDropoutDescriptor(drop);
  if (h) (void)cudnnDestroy(h);
  if (stream) (void)cudaStreamDestroy(stream);
  return result;
}

}  // namespace ember::bench
