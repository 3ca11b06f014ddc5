// ember::profiler: spans of what a training step spends its time on (ops, autograd nodes,
// DataLoader waits, DataParallel's scatter/replicate/gather, DDP's bucket reductions), kept per
// thread and exported as Chrome trace-event JSON (Perfetto and chrome://tracing open it).
// Recording is thread-safe; start()/stop()/events() may be called from any thread.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::profiler {

// Note [Profiler cost]
// Off, a span site costs one relaxed load of a global flag and a branch: EMBER_PROFILE_SCOPE
// constructs a Span whose constructor reads enabled() and does nothing else when it is false,
// so the hot paths (an op's dispatch, the engine's node loop) keep their speed. On, a span takes
// two steady_clock reads and one append to its thread's buffer under that buffer's own mutex
// (never contended while recording: only events() and start() take it from elsewhere).

/// What a span measures; the trace's "cat" field. kCommWait: a thread blocked on communication
/// (not computing, even inside an op's or a node's span).
enum class Category : uint8_t { kOp, kAutograd, kDataLoader, kDataParallel, kComm, kCommWait, kUser };

/// One finished span. Times are steady_clock nanoseconds.
struct Event {
  std::string name;
  Category category = Category::kUser;
  int64_t start_ns = 0, end_ns = 0;
  uint32_t track = 0;       ///< a thread's track, or kCommTrack
  int64_t bucket = -1;      ///< DDP bucket index (kComm spans), else -1
  int64_t num_bytes = -1;   ///< bytes the span moved (kComm spans), else -1
};

/// The track of communication spans, which end on whichever thread finished the collective.
constexpr uint32_t kCommTrack = 1000000;

namespace detail {
extern std::atomic<bool> g_enabled;
int64_t now_ns();
void record(Event event);
}  // namespace detail

/// Whether spans are being recorded (one relaxed atomic load).
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

/// Drops every recorded event and starts recording.
void start();
/// Stops recording; the events stay until the next start().
void stop();
/// Every event recorded since start(), all threads', ordered by start time.
std::vector<Event> events();
/// Names the calling thread's track in the trace ("autograd cpu:1"); the default is "thread N".
void set_thread_name(std::string name);
/// The calling thread's track number.
uint32_t current_track();

/// A span from construction to destruction on the calling thread's track, recorded only when
/// the profiler was on at construction. `name` must outlive the span (a literal, an op's name).
/// Use EMBER_PROFILE_SCOPE.
class Span {
 public:
  Span(const char* name, Category category) : name_(name), category_(category) {
    if (enabled()) [[unlikely]] start_ns_ = detail::now_ns();
  }
  ~Span() {
    if (start_ns_ >= 0) [[unlikely]] end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  friend class DynamicSpan;
  explicit Span(Category category) : name_(nullptr), category_(category) {}  // not started
  void end();
  const char* name_;
  int64_t start_ns_ = -1;
  Category category_;
};

/// A Span whose name is made at run time (a backward node's name()), made only while recording.
/// Use EMBER_PROFILE_SCOPE_DYNAMIC.
class DynamicSpan {
 public:
  template <typename NameFn>
  DynamicSpan(NameFn&& name, Category category) : span_(category) {
    if (enabled()) [[unlikely]] {
      name_ = name();
      span_.name_ = name_.c_str();
      span_.start_ns_ = detail::now_ns();
    }
  }

 private:
  std::string name_;  // declared before span_, so it outlives the span's end()
  Span span_;
};

/// A span that ends on another thread (a collective finishing on the backend's thread): made
/// when the work starts, finish() when it ends. Recorded on kCommTrack. Copyable (into a callback).
class AsyncSpan {
 public:
  AsyncSpan(const char* name, int64_t bucket, int64_t num_bytes)
      : name_(name), start_ns_(enabled() ? detail::now_ns() : -1), bucket_(bucket), num_bytes_(num_bytes) {}
  /// Records the span (once the profiler was on at construction and is still on).
  void finish() const;

 private:
  const char* name_;
  int64_t start_ns_;
  int64_t bucket_, num_bytes_;
};

/// The share of communication time (union of kComm spans) during which computation ran, in
/// [0, 1]; -1 when there was no communication. Computation: the union of kOp and kAutograd spans
/// of every thread, less the kCommWait spans (a wait for a bucket inside a backward node's span
/// computes nothing).
double comm_overlap(const std::vector<Event>& events);

/// The events as the members of a Chrome trace's "traceEvents" array (no brackets), with
/// process id `rank` and track names; microseconds. Joined by commas with other ranks' into
/// one file by chrome_trace_json().
std::string trace_events_json(const std::vector<Event>& events, int rank);
/// A whole Chrome trace-event JSON document from per-rank trace_events_json() fragments.
std::string chrome_trace_json(const std::vector<std::string>& rank_fragments);
/// Writes chrome_trace_json({trace_events_json(events(), 0)}) to `path` (temporary file, then
/// rename). Throws ember::Error naming the path when it cannot be written.
void export_chrome_trace(const std::string& path);
/// Writes `json` to `path` as export_chrome_trace does.
void write_trace_file(const std::string& path, const std::string& json);

}  // namespace ember::profiler

#define EMBER_PROFILE_CONCAT_(a, b) a##b
#define EMBER_PROFILE_CONCAT(a, b) EMBER_PROFILE_CONCAT_(a, b)
/// A span named `name` (a string literal) of Category::k`category` until the end of the scope.
#define EMBER_PROFILE_SCOPE(name, category) \
  ::ember::profiler::Span EMBER_PROFILE_CONCAT(ember_profile_span_, __LINE__)(name, ::ember::profiler::Category::category)
/// As EMBER_PROFILE_SCOPE for a name computed at run time (evaluated only while recording).
#define EMBER_PROFILE_SCOPE_DYNAMIC(name_expr, category)             \
  ::ember::profiler::DynamicSpan EMBER_PROFILE_CONCAT(ember_profile_span_, __LINE__)( \
      [&] { return std::string(name_expr); }, ::ember::profiler::Category::category)
