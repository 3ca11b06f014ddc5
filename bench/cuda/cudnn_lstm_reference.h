// The peer of ember's cuDNN LSTM in ember-bench-lstm --device cuda:N: the same forward and
// backward (data, then weights) called directly on cuDNN 9, with every buffer allocated once,
// so that gpu_lstm_vs_cudnn_ratio shows what ember adds around cuDNN. Plain C++ interface; the
// cuDNN calls are in cudnn_lstm_reference.cpp (built when cuDNN is found).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::bench {

/// Median milliseconds over `reps` steps (after 3 warm-up steps) of a float32 LSTM
/// (input_size -> hidden_size, num_layers, unidirectional, CUDNN_FMA_MATH) over packed
/// sequence-major data with `sorted_lengths` (longest first) on cuda:device_index: per step
/// cudnnRNNForward (training), cudnnRNNBackwardData_v8, a zeroed weight gradient and
/// cudnnRNNBackwardWeights_v8, the stream synchronized at the end. Returns a negative value and
/// sets *error when anything fails.
double cudnn_lstm_reference_ms(int device_index, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                               const std::vector<int>& sorted_lengths, int reps, std::string* error);

}  // namespace ember::bench
