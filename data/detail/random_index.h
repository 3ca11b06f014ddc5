// Host-side random index helpers for samplers and random_split, drawn from an ember
// Generator (so a seeded generator gives the same indices on every run). Thread-safe as the
// generator is (it locks per draw).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/generator.h"

namespace ember::data::detail {

/// Uniform in [0, n); n > 0.
size_t uniform_index(size_t n, Generator& gen);
/// Uniform in [0, 1) with 53 random bits.
double uniform_double(Generator& gen);
/// A uniformly random permutation of 0..n-1 (Fisher-Yates).
std::vector<size_t> randperm(size_t n, Generator& gen);
/// `gen` if set, else a fresh generator seeded from ember's default generator, as PyTorch's
/// samplers do when given no generator (so torch.manual_seed / ember::manual_seed governs them).
std::shared_ptr<Generator> generator_or_fresh(const std::shared_ptr<Generator>& gen);

}  // namespace ember::data::detail
