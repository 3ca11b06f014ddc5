#include "tensorboard/event_encoding.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tensorboard/detail/crc32c.h"
#include "tensorboard/detail/proto_writer.h"

namespace ember::tensorboard {
namespace {

using detail::ProtoWriter;

// Field numbers of the protos named in the header.
namespace event { constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5; }
namespace summary { constexpr int kValue = 1; }
namespace value { constexpr int kTag = 1, kSimpleValue = 2, kHisto = 5, kTensor = 8, kMetadata = 9; }
namespace histo {
constexpr int kMin = 1, kMax = 2, kNum = 3, kSum = 4, kSumSquares = 5, kBucketLimit = 6, kBucket = 7;
}
namespace metadata { constexpr int kPluginData = 1; }
namespace plugin_data { constexpr int kPluginName = 1; }
namespace tensor { constexpr int kDtype = 1, kShape = 2, kStringVal = 8; }
namespace shape { constexpr int kDim = 2; }
namespace dim { constexpr int kSize = 1; }
constexpr uint64_t kDtString = 7;  // tensorflow DataType DT_STRING

std::string event_with_value(double wall_time, int64_t step, const std::string& value_bytes) {
  ProtoWriter s;
  s.bytes(summary::kValue, value_bytes);
  ProtoWriter e;
  e.float64(event::kWallTime, wall_time);
  e.varint(event::kStep, static_cast<uint64_t>(step));
  e.bytes(event::kSummary, s.str());
  return e.take();
}

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void append_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  ProtoWriter e;
  e.float64(event::kWallTime, wall_time);
  e.bytes(event::kFileVersion, "brain.Event:2");
  return e.take();
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float v) {
  ProtoWriter val;
  val.bytes(value::kTag, tag);
  val.float32(value::kSimpleValue, v);
  return event_with_value(wall_time, step, val.str());
}

Histogram make_histogram(std::span<const double> values, int bins) {
  EMBER_CHECK_T(ValueError, bins >= 1, "add_histogram: expected bins >= 1, got ", bins);
  EMBER_CHECK_T(ValueError, !values.empty(), "add_histogram: expected at least one value, got none");
  Histogram h;
  h.min = values[0];
  h.max = values[0];
  size_t non_finite = 0;
  for (double v : values) {
    if (!std::isfinite(v)) {
      ++non_finite;
      continue;
    }
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
  }
  EMBER_CHECK_T(ValueError, non_finite == 0, "add_histogram: expected finite values, got ", non_finite,
                " NaN or infinite of ", values.size());
  h.num = static_cast<double>(values.size());
  const double width = (h.max - h.min) / bins;
  if (width == 0) {  // one distinct value: one bucket holding all of them
    h.bucket_limit = {h.max};
    h.bucket = {h.num};
    return h;
  }
  h.bucket.assign(static_cast<size_t>(bins), 0.0);
  h.bucket_limit.resize(static_cast<size_t>(bins));
  for (int i = 0; i < bins; ++i) h.bucket_limit[static_cast<size_t>(i)] = h.min + width * (i + 1);
  h.bucket_limit.back() = h.max;
  for (double v : values) {
    // Bucket i holds (limit[i-1], limit[i]]; the minimum goes to the first.
    auto it = std::lower_bound(h.bucket_limit.begin(), h.bucket_limit.end(), v);
    if (it == h.bucket_limit.end()) --it;
    h.bucket[static_cast<size_t>(it - h.bucket_limit.begin())] += 1;
  }
  return h;
}

std::string encode_histogram_event(double wall_time, int64_t step, std::string_view tag,
                                   const Histogram& h) {
  ProtoWriter hp;
  hp.float64(histo::kMin, h.min);
  hp.float64(histo::kMax, h.max);
  hp.float64(histo::kNum, h.num);
  hp.float64(histo::kSum, h.sum);
  hp.float64(histo::kSumSquares, h.sum_squares);
  hp.packed_float64(histo::kBucketLimit, h.bucket_limit);
  hp.packed_float64(histo::kBucket, h.bucket);
  ProtoWriter val;
  val.bytes(value::kTag, tag);
  val.bytes(value::kHisto, hp.str());
  return event_with_value(wall_time, step, val.str());
}

std::string encode_text_event(double wall_time, int64_t step, std::string_view tag,
                              std::string_view text) {
  ProtoWriter pd;
  pd.bytes(plugin_data::kPluginName, "text");  // content: TextPluginData{version 0}, all defaults
  ProtoWriter md;
  md.bytes(metadata::kPluginData, pd.str());
  ProtoWriter d;
  d.varint(dim::kSize, 1);
  ProtoWriter sh;
  sh.bytes(shape::kDim, d.str());
  ProtoWriter t;
  t.varint(tensor::kDtype, kDtString);
  t.bytes(tensor::kShape, sh.str());
  t.bytes(tensor::kStringVal, text);
  ProtoWriter val;
  val.bytes(value::kTag, tag);
  val.bytes(value::kTensor, t.str());
  val.bytes(value::kMetadata, md.str());
  return event_with_value(wall_time, step, val.str());
}

void append_record(std::string& out, std::string_view data) {
  std::string len;
  append_u64(len, data.size());
  out += len;
  append_u32(out, detail::mask_crc(detail::crc32c(len)));
  out.append(data);
  append_u32(out, detail::mask_crc(detail::crc32c(data)));
}

}  // namespace ember::tensorboard
