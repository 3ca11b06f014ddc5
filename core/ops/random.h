// Random tensors from the counter-based Philox generator (core/generator.h). A null
// generator means the default generator of the output's device. Same seed -> same numbers
// on CPU and CUDA. Each call advances the generator; thread-safe (the generator locks).
#pragma once
#include "core/generator.h"
#include "core/tensor.h"

namespace ember {

Tensor rand(const IntList& sizes, TensorOptions options = {}, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const IntList& sizes, TensorOptions options = {}, Generator* gen = nullptr);  // N(0, 1)
/// Integers uniform in [low, high); int64 unless options say otherwise. Throws ValueError if low >= high.
Tensor randint(int64_t low, int64_t high, const IntList& sizes, TensorOptions options = TensorOptions(kInt64),
               Generator* gen = nullptr);
/// A random permutation of 0..n-1 (int64).
Tensor randperm(int64_t n, TensorOptions options = TensorOptions(kInt64), Generator* gen = nullptr);
/// Each element 1 with probability p[i] (same shape and dtype as p). Throws ValueError unless 0 <= p <= 1.
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);
Tensor bernoulli(const IntList& sizes, double p, TensorOptions options = {}, Generator* gen = nullptr);
/// In place; returns self. Floating dtypes only.
Tensor& uniform_(Tensor& self, double from = 0.0, double to = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& self, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);

}  // namespace ember
