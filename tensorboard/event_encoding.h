// TensorBoard's event-file format, encoded without protobuf: the Event messages a SummaryWriter
// writes (tensorflow/core/util/event.proto and summary.proto, the fields below only) and the
// record framing around each. Pure functions; thread-safe.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tensorboard {

/// The first event of every file: Event{wall_time, file_version: "brain.Event:2"}.
std::string encode_file_version_event(double wall_time);

/// Event{wall_time, step, summary{value{tag, simple_value}}}: a scalar.
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

/// A histogram as HistogramProto holds it: bucket i counts the values in
/// (bucket_limit[i-1], bucket_limit[i]] (the first from min), as TensorBoard reads it.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  ///< right edges, ascending; the last is max
  std::vector<double> bucket;        ///< counts, one per edge
};

/// Summarizes `values` into `bins` equal-width buckets from min to max. Throws ValueError when
/// `values` is empty, holds a NaN or an infinity, or `bins` < 1.
Histogram make_histogram(std::span<const double> values, int bins);

/// Event{wall_time, step, summary{value{tag, histo}}}.
std::string encode_histogram_event(double wall_time, int64_t step, std::string_view tag,
                                   const Histogram& h);

/// Event{wall_time, step, summary{value{tag, metadata{plugin "text"}, tensor}}}: a DT_STRING
/// tensor of shape [1] holding `text` (Markdown), as TensorBoard's text plugin reads it.
std::string encode_text_event(double wall_time, int64_t step, std::string_view tag,
                              std::string_view text);

/// One record of the file: length (uint64 little-endian), its masked CRC-32C, the data and the
/// data's masked CRC-32C. Appends to `out`.
void append_record(std::string& out, std::string_view data);

}  // namespace ember::tensorboard
