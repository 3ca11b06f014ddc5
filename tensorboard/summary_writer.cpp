#include "tensorboard/summary_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "core/error.h"
#include "core/fd_io.h"
#include "core/warning.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/process_group.h"
#include "tensorboard/event_encoding.h"

namespace ember {

struct SummaryWriter::EventFile {
  std::string path;
  io::UniqueFd fd;
  std::string batch;  // used by the writer thread only: records framed for the next write
};

namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// See Note [SummaryWriter on one rank].
int process_rank() {
  if (parallel::is_initialized()) return parallel::default_process_group()->rank();
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      char* end = nullptr;
      long r = std::strtol(v, &end, 10);
      if (end != nullptr && *end == '\0') return static_cast<int>(r);
    }
  }
  return 0;
}

std::string default_log_dir() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%b%d_%H-%M-%S", &tm);
  return "runs/" + std::string(stamp) + "_" + host_name();
}

void check_tag(const char* op, const std::string& tag) {
  EMBER_CHECK_T(ValueError, !tag.empty(), op, ": expected a non-empty tag");
}

}  // namespace

double SummaryWriter::now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Opens <dir>/events.out.tfevents.<seconds>.<host>.<pid><suffix> with O_EXCL (a second writer in
// the same second takes the next free name) and writes the file_version record synchronously,
// so that every file TensorBoard sees starts with it.
std::unique_ptr<SummaryWriter::EventFile> SummaryWriter::open_event_file(const std::string& dir,
                                                                         const std::string& suffix,
                                                                         double wall_time) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  EMBER_CHECK(!ec, "SummaryWriter: cannot create the run directory '", dir, "': ", ec.message());
  const std::string base = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) +
                           "." + host_name() + "." + std::to_string(getpid());
  auto f = std::make_unique<SummaryWriter::EventFile>();
  for (int n = 0;; ++n) {
    f->path = base;
    if (n > 0) f->path.append(".").append(std::to_string(n));
    f->path += suffix;
    int fd = ::open(f->path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      f->fd.reset(fd);
      break;
    }
    EMBER_CHECK(errno == EEXIST && n < 1000, "SummaryWriter: cannot create the event file '", f->path,
                "': ", std::strerror(errno));
  }
  std::string rec;
  tensorboard::append_record(rec, tensorboard::encode_file_version_event(wall_time));
  io::Transfer t = io::write_full(f->fd.get(), rec.data(), rec.size());
  EMBER_CHECK(t.complete(rec.size()), "SummaryWriter: cannot write the event file '", f->path, "': ",
              std::strerror(t.error));
  return f;
}

// Defined here so that EventFile is complete where the unique_ptrs are destroyed.
SummaryWriter::SummaryWriter(std::string log_dir, SummaryWriterOptions options)
    : log_dir_(log_dir.empty() ? default_log_dir() : std::move(log_dir)), options_(std::move(options)) {
  EMBER_CHECK_T(ValueError, options_.max_queue >= 1, "SummaryWriter: expected max_queue >= 1, got ",
                options_.max_queue);
  if (!options_.all_ranks && process_rank() != 0) return;
  files_.push_back(open_event_file(log_dir_, options_.filename_suffix, now()));
  main_file_ = files_[0].get();
  queue_.reserve(options_.max_queue);
  enabled_.store(true, std::memory_order_relaxed);
  thread_ = std::thread([this] { run(); });
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    EMBER_WARN("SummaryWriter: ", e.what());
  }
}

const std::string& SummaryWriter::file_path() const {
  static const std::string kNone;
  return main_file_ == nullptr ? kNone : main_file_->path;
}

void SummaryWriter::enqueue(EventFile* file, std::string event, const std::string& tag, int64_t step) {
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    if (queue_.size() < options_.max_queue) {
      queue_.push_back(Pending{file, std::move(event)});
      ++enqueued_;
    } else {
      dropped = dropped_.fetch_add(1, std::memory_order_relaxed) + 1;
    }
  }
  if (dropped == 0) {
    cv_.notify_all();
    return;
  }
  // The first drop and then every power of two: a slow disk shows up without flooding stderr.
  if ((dropped & (dropped - 1)) == 0) {
    EMBER_WARN("SummaryWriter: the queue is full (", options_.max_queue, " events waiting for ", file->path,
               "); dropped '", tag, "' at step ", static_cast<long long>(step), " (",
               static_cast<long long>(dropped), " dropped so far)");
  }
}

SummaryWriter::EventFile* SummaryWriter::scalars_file(const std::string& main_tag, const std::string& key) {
  std::string run = main_tag + "_" + key;
  for (char& c : run) {
    if (c == '/') c = '_';
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return nullptr;
  auto it = scalars_files_.find(run);
  if (it != scalars_files_.end()) return it->second;
  files_.push_back(open_event_file(log_dir_ + "/" + run, options_.filename_suffix, now()));
  return scalars_files_[run] = files_.back().get();
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t global_step,
                               std::optional<double> walltime) {
  if (!enabled()) return;
  check_tag("add_scalar", tag);
  enqueue(main_file_,
          tensorboard::encode_scalar_event(walltime.value_or(now()), global_step, tag, static_cast<float>(value)),
          tag, global_step);
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::map<std::string, double>& tag_scalar_dict,
                                int64_t global_step, std::optional<double> walltime) {
  if (!enabled()) return;
  check_tag("add_scalars", main_tag);
  const double t = walltime.value_or(now());
  for (const auto& [key, value] : tag_scalar_dict) {
    EMBER_CHECK_T(ValueError, !key.empty(), "add_scalars: expected non-empty keys under '", main_tag, "'");
    EventFile* f = scalars_file(main_tag, key);
    if (f == nullptr) return;
    enqueue(f, tensorboard::encode_scalar_event(t, global_step, main_tag, static_cast<float>(value)), main_tag,
            global_step);
  }
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t global_step, int bins,
                                  std::optional<double> walltime) {
  if (!enabled()) return;
  EMBER_CHECK_T(ValueError, values.defined(), "add_histogram: expected a defined tensor for '", tag, "'");
  Tensor v = values.detach().to(Device::cpu(), kFloat64).contiguous();
  add_histogram(tag, std::span<const double>(v.data_ptr<double>(), static_cast<size_t>(v.numel())), global_step,
                bins, walltime);
}

void SummaryWriter::add_histogram(const std::string& tag, std::span<const double> values, int64_t global_step,
                                  int bins, std::optional<double> walltime) {
  if (!enabled()) return;
  check_tag("add_histogram", tag);
  tensorboard::Histogram h = tensorboard::make_histogram(values, bins);
  enqueue(main_file_, tensorboard::encode_histogram_event(walltime.value_or(now()), global_step, tag, h), tag,
          global_step);
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t global_step,
                             std::optional<double> walltime) {
  if (!enabled()) return;
  check_tag("add_text", tag);
  enqueue(main_file_, tensorboard::encode_text_event(walltime.value_or(now()), global_step, tag, text), tag,
          global_step);
}

// The writer thread: takes the whole queue, frames its records per file and writes each file's
// batch with one write(2). See Note [Event file durability].
void SummaryWriter::run() {
  std::vector<Pending> work;
  work.reserve(options_.max_queue);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    work.swap(queue_);
    lock.unlock();
    std::vector<EventFile*> touched;
    for (Pending& p : work) {
      if (p.file->batch.empty()) touched.push_back(p.file);
      tensorboard::append_record(p.file->batch, p.event);
    }
    std::string error;
    for (EventFile* f : touched) {
      io::Transfer t = io::write_full(f->fd.get(), f->batch.data(), f->batch.size());
      if (!t.complete(f->batch.size()) && error.empty()) {
        error = "cannot write the event file '" + f->path + "': " + std::strerror(t.error);
      }
      f->batch.clear();
    }
    const size_t n = work.size();
    work.clear();
    lock.lock();
    written_ += n;
    if (!error.empty() && write_error_.empty()) {
      write_error_ = error;
      EMBER_WARN("SummaryWriter: ", error);
    }
    cv_.notify_all();
  }
}

void SummaryWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable()) return;
  const uint64_t target = enqueued_;
  cv_.wait(lock, [&] { return written_ >= target; });
  for (auto& f : files_) ::fsync(f->fd.get());
  std::string error = std::move(write_error_);
  write_error_.clear();
  lock.unlock();
  EMBER_CHECK(error.empty(), "SummaryWriter: ", error);
}

void SummaryWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable() || stop_) return;
  }
  enabled_.store(false, std::memory_order_relaxed);
  std::string error;
  try {
    flush();
  } catch (const Error& e) {
    error = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& f : files_) f->fd.reset();
  if (dropped_events() > 0) {
    EMBER_WARN("SummaryWriter: ", static_cast<long long>(dropped_events()), " events dropped in all for ", log_dir_,
               " (queue of ", options_.max_queue, " full)");
  }
  if (!error.empty()) throw Error(error);
}

}  // namespace ember
