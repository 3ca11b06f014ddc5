// What train.cpp and train_ft.cpp (--ft) share: the checkpoint's run identity and path, the
// per-sample dropout masks of Note [Shard steps]. Internal to examples/rnn_dp.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "examples/rnn_dp/options.h"
#include "examples/rnn_dp/train.h"

namespace rnn_dp {

/// --ft: the loop of train_ft.cpp (Note [FT mode]); train() calls it.
std::vector<EpochResult> train_ft(const Options& options, std::FILE* out);

namespace detail {

/// What a checkpoint must agree on with this run for --resume to continue the same run.
std::map<std::string, std::string> run_identity(const Options& o);
/// <dir>/last.safetensors
std::string last_checkpoint_path(const std::string& dir);
/// Dropout keep masks [positions, width] (0 or 1 / (1 - p)): sample at `positions[i]` of epoch
/// `epoch` draws from its own generator, seeded from (seed, epoch, position) (Note [Shard steps]).
ember::Tensor dropout_keep(uint64_t seed, int epoch, const std::vector<uint64_t>& positions, int64_t width, double p);

}  // namespace detail
}  // namespace rnn_dp
