#include "core/profiler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fd_io.h"

namespace ember::profiler {
namespace detail {
std::atomic<bool> g_enabled{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

namespace {

// One per thread that ever recorded, kept for the life of the process (a thread's events
// outlive it until the next start()).
struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events;  // guarded by mu
  std::string name;           // guarded by mu
  uint32_t track = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;  // guarded by mu
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

ThreadBuffer& this_thread_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> buf = [] {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    b->track = static_cast<uint32_t>(r.buffers.size()) + 1;
    b->name = "thread " + std::to_string(b->track);
    r.buffers.push_back(b);
    return b;
  }();
  return *buf;
}

const char* category_name(Category c) {
  switch (c) {
    case Category::kOp: return "op";
    case Category::kAutograd: return "autograd";
    case Category::kDataLoader: return "dataloader";
    case Category::kDataParallel: return "data_parallel";
    case Category::kComm: return "comm";
    case Category::kCommWait: return "comm_wait";
    case Category::kUser: return "user";
  }
  return "user";
}

using Interval = std::pair<int64_t, int64_t>;

// Sorted, disjoint intervals covering the same time as `v`.
std::vector<Interval> merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// `a` less `b`, both sorted and disjoint.
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (Interval cur : a) {
    while (j < b.size() && b[j].second <= cur.first) ++j;
    for (size_t k = j; k < b.size() && b[k].first < cur.second; ++k) {
      if (b[k].first > cur.first) out.emplace_back(cur.first, b[k].first);
      cur.first = std::max(cur.first, b[k].second);
    }
    if (cur.first < cur.second) out.push_back(cur);
  }
  return out;
}

// Total length of the overlap of two sorted, disjoint interval lists.
int64_t overlap_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t total = 0;
  size_t j = 0;
  for (const Interval& c : a) {
    while (j < b.size() && b[j].second <= c.first) ++j;
    for (size_t k = j; k < b.size() && b[k].first < c.second; ++k) {
      total += std::min(c.second, b[k].second) - std::max(c.first, b[k].first);
    }
  }
  return total;
}

}  // namespace

namespace detail {
void record(Event event) {
  ThreadBuffer& b = this_thread_buffer();
  if (event.track == 0) event.track = b.track;
  std::lock_guard<std::mutex> lock(b.mu);
  b.events.push_back(std::move(event));
}
}  // namespace detail

void Span::end() {
  Event e;
  e.end_ns = detail::now_ns();
  e.name = name_;
  e.category = category_;
  e.start_ns = start_ns_;
  detail::record(std::move(e));
}

void AsyncSpan::finish() const {
  if (start_ns_ < 0 || !enabled()) return;
  Event e;
  e.name = name_;
  e.category = Category::kComm;
  e.start_ns = start_ns_;
  e.end_ns = detail::now_ns();
  e.track = kCommTrack;
  e.bucket = bucket_;
  e.num_bytes = num_bytes_;
  detail::record(std::move(e));
}

void start() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    b->events.clear();
  }
  detail::g_enabled.store(true, std::memory_order_relaxed);
}

void stop() { detail::g_enabled.store(false, std::memory_order_relaxed); }

std::vector<Event> events() {
  std::vector<Event> all;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    all.insert(all.end(), b->events.begin(), b->events.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return all;
}

void set_thread_name(std::string name) {
  ThreadBuffer& b = this_thread_buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.name = std::move(name);
}

uint32_t current_track() { return this_thread_buffer().track; }

double comm_overlap(const std::vector<Event>& events) {
  std::vector<Interval> comm, compute, waits;
  for (const Event& e : events) {
    if (e.category == Category::kComm) comm.emplace_back(e.start_ns, e.end_ns);
    else if (e.category == Category::kOp || e.category == Category::kAutograd) compute.emplace_back(e.start_ns, e.end_ns);
    else if (e.category == Category::kCommWait) waits.emplace_back(e.start_ns, e.end_ns);
  }
  comm = merge(std::move(comm));
  compute = subtract(merge(std::move(compute)), merge(std::move(waits)));
  int64_t total = 0;
  for (const Interval& c : comm) total += c.second - c.first;
  if (total == 0) return -1;
  return static_cast<double>(overlap_length(comm, compute)) / static_cast<double>(total);
}

std::string trace_events_json(const std::vector<Event>& events, int rank) {
  using nlohmann::json;
  std::string out;
  auto add = [&](const json& j) {
    if (!out.empty()) out += ",\n";
    out += j.dump();
  };
  add(json{{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
  add(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& b : r.buffers) {
      std::lock_guard<std::mutex> bl(b->mu);
      bool used = std::any_of(events.begin(), events.end(), [&](const Event& e) { return e.track == b->track; });
      if (used) add(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", b->track}, {"args", {{"name", b->name}}}});
    }
  }
  add(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", kCommTrack}, {"args", {{"name", "communication"}}}});
  for (const Event& e : events) {
    json j{{"ph", "X"},
           {"name", e.name},
           {"cat", category_name(e.category)},
           {"pid", rank},
           {"tid", e.track},
           {"ts", static_cast<double>(e.start_ns) / 1000.0},
           {"dur", static_cast<double>(e.end_ns - e.start_ns) / 1000.0}};
    if (e.bucket >= 0) j["args"]["bucket"] = e.bucket;
    if (e.num_bytes >= 0) j["args"]["bytes"] = e.num_bytes;
    add(j);
  }
  return out;
}

std::string chrome_trace_json(const std::vector<std::string>& rank_fragments) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (const std::string& f : rank_fragments) {
    if (f.empty()) continue;
    if (!first) out += ",\n";
    out += f;
    first = false;
  }
  out += "\n]}\n";
  return out;
}

void write_trace_file(const std::string& path, const std::string& json) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  io::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  EMBER_CHECK(fd.valid(), "profiler: cannot create the trace file '", tmp, "': ", std::strerror(errno));
  io::Transfer t = io::write_full(fd.get(), json.data(), json.size());
  EMBER_CHECK(t.complete(json.size()), "profiler: cannot write the trace file '", tmp, "': ", std::strerror(t.error));
  fd.reset();
  EMBER_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "profiler: cannot rename '", tmp, "' to '", path, "': ",
              std::strerror(errno));
}

void export_chrome_trace(const std::string& path) {
  write_trace_file(path, chrome_trace_json({trace_events_json(events(), 0)}));
}

}  // namespace ember::profiler
