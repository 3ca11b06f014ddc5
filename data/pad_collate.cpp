#include "data/pad_collate.h"

#include <algorithm>
#include <cstring>

#include "core/detail/checked_math.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::data {

std::pair<Tensor, Tensor> PadCollate::operator()(const std::vector<Tensor>& samples) const {
  EMBER_CHECK_T(ValueError, !samples.empty(), "PadCollate: empty batch");
  const DType dtype = samples[0].dtype();
  const int64_t B = static_cast<int64_t>(samples.size());
  Tensor lengths = empty({B}, TensorOptions(kInt64));
  int64_t* len = lengths.data_ptr<int64_t>();
  int64_t T = 0;
  for (int64_t b = 0; b < B; ++b) {
    const Tensor& s = samples[b];
    EMBER_CHECK_T(ValueError, s.dim() == 1, "PadCollate: expected 1-D sequences, sample ", b, " has shape ",
                  s.sizes());
    EMBER_CHECK_T(ValueError, s.dtype() == dtype, "PadCollate: sample 0 is ", dtype, " but sample ", b, " is ",
                  s.dtype());
    EMBER_CHECK_T(ValueError, s.device().is_cpu(), "PadCollate: sample ", b, " is on ", s.device(),
                  ", expected cpu");
    len[b] = s.size(0);
    T = std::max(T, len[b]);
  }
  // Copy each sequence and write the padding only where it goes (no fill-then-overwrite).
  // See Note [Checked shape arithmetic] in core/detail/checked_math.cpp: B * T is checked first.
  const IntList out_sizes = batch_first_ ? IntList{B, T} : IntList{T, B};
  (void)ember::detail::checked_nbytes(out_sizes, element_size(dtype), "PadCollate");
  Tensor padded = empty(out_sizes, TensorOptions(dtype));
  const size_t es = element_size(dtype);
  char pad[16];
  {
    Tensor one = full({1}, padding_value_, TensorOptions(dtype));  // the value in this dtype's bytes
    std::memcpy(pad, one.raw_data(), es);
  }
  char* out = static_cast<char*>(padded.raw_data());
  auto put_pad = [&](char* dst) { std::memcpy(dst, pad, es); };
  for (int64_t b = 0; b < B; ++b) {
    Tensor s = samples[b].is_contiguous() ? samples[b] : native::contiguous(samples[b]);
    const char* src = static_cast<const char*>(s.raw_data());
    if (batch_first_) {
      char* row = out + static_cast<size_t>(b * T) * es;
      std::memcpy(row, src, static_cast<size_t>(len[b]) * es);
      for (int64_t t = len[b]; t < T; ++t) put_pad(row + static_cast<size_t>(t) * es);
    } else {
      for (int64_t t = 0; t < len[b]; ++t) std::memcpy(out + static_cast<size_t>(t * B + b) * es, src + t * es, es);
      for (int64_t t = len[b]; t < T; ++t) put_pad(out + static_cast<size_t>(t * B + b) * es);
    }
  }
  return {std::move(padded), std::move(lengths)};
}

}  // namespace ember::data
