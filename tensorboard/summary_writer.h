// SummaryWriter: PyTorch's torch.utils.tensorboard.SummaryWriter for ember. It writes TensorBoard
// event files (tensorboard/event_encoding.h) into a run directory from a background thread, so
// that a training step never waits on the disk. All methods are thread-safe.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"

namespace ember {

/// How a SummaryWriter writes; every field has a usable default.
struct SummaryWriterOptions {
  /// Events waiting for the writer thread at most; one more is dropped and counted (never waited for).
  size_t max_queue = 1024;
  /// Appended to every event file's name.
  std::string filename_suffix;
  /// false: only rank 0 writes (Note [SummaryWriter on one rank]); true: every process writes.
  bool all_ranks = false;
};

// Note [SummaryWriter on one rank]
// Under DistributedDataParallel every rank holds the same model and (after the all-reduce) the
// same gradients, so N writers would draw N copies of one curve into one run directory. By
// default a writer whose process is not rank 0 is disabled: it creates nothing and its calls
// return at once. The rank is the default process group's when one is initialized, else the
// launcher's environment (RANK from ember-run or torchrun, OMPI_COMM_WORLD_RANK from mpirun),
// else 0. SummaryWriterOptions::all_ranks turns this off.

// Note [Event file durability]
// The writer thread frames whole records in memory and hands each batch to the kernel in one
// write(2) on an O_APPEND descriptor, with no user-space buffer in between: once a call returns
// the event is in the queue, and once the thread has written it a crash of the process (even
// SIGKILL) loses nothing of it. A record is whole or absent unless the machine itself stops in
// the middle of a write, and then TensorBoard's reader stops at the torn record (its length and
// data carry CRCs), keeping every record before it. flush() waits for the queue and fsyncs.

/// A TensorBoard run directory with one event file (plus one per add_scalars series, in
/// subdirectories, as PyTorch writes them). Methods before close() never block on I/O.
class SummaryWriter {
 public:
  /// Creates `log_dir` (and parents); empty: runs/DATE_TIME_HOST as PyTorch names it. Throws
  /// ember::Error naming the path when the directory or the file cannot be created.
  explicit SummaryWriter(std::string log_dir = "", SummaryWriterOptions options = {});
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  /// One point of the curve `tag` (stored as float32). `walltime`: seconds since the epoch, default now.
  void add_scalar(const std::string& tag, double value, int64_t global_step = 0,
                  std::optional<double> walltime = std::nullopt);
  /// Several curves on one chart: each key K becomes the run LOG_DIR/MAIN_TAG_K holding
  /// the scalar `main_tag` (PyTorch's layout, so TensorBoard overlays them).
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& tag_scalar_dict,
                   int64_t global_step = 0, std::optional<double> walltime = std::nullopt);
  /// A histogram of every element of `values` (any dtype and device; copied to the CPU as
  /// float64) in `bins` equal-width buckets. Throws ValueError for an empty tensor or one
  /// holding NaN or infinity.
  void add_histogram(const std::string& tag, const Tensor& values, int64_t global_step = 0,
                     int bins = 64, std::optional<double> walltime = std::nullopt);
  /// add_histogram over plain numbers.
  void add_histogram(const std::string& tag, std::span<const double> values, int64_t global_step = 0,
                     int bins = 64, std::optional<double> walltime = std::nullopt);
  /// A text entry (Markdown) for TensorBoard's text tab.
  void add_text(const std::string& tag, const std::string& text, int64_t global_step = 0,
                std::optional<double> walltime = std::nullopt);

  /// Waits until every event added before the call is written and fsynced. Throws ember::Error
  /// naming the file when a write failed since the last flush.
  void flush();
  /// flush(), then stops the thread and closes the files; later calls are ignored. Idempotent.
  void close();

  /// The run directory (set even when this rank writes nothing).
  const std::string& log_dir() const { return log_dir_; }
  /// The main event file's path; empty when disabled.
  const std::string& file_path() const;
  /// false on a rank that does not write (Note [SummaryWriter on one rank]) and after close().
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Events dropped because the queue was full.
  int64_t dropped_events() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct EventFile;
  struct Pending {
    EventFile* file;
    std::string event;
  };
  void enqueue(EventFile* file, std::string event, const std::string& tag, int64_t step);
  EventFile* scalars_file(const std::string& main_tag, const std::string& key);
  static std::unique_ptr<EventFile> open_event_file(const std::string& dir, const std::string& suffix,
                                                    double wall_time);
  void run();
  static double now();

  std::string log_dir_;
  SummaryWriterOptions options_;
  std::atomic<bool> enabled_{false};
  std::atomic<int64_t> dropped_{0};
  EventFile* main_file_ = nullptr;  // files_[0], set before the thread starts

  std::mutex mu_;
  std::condition_variable cv_;       // the thread waits for work or stop; flush() for written_
  std::vector<Pending> queue_;       // guarded by mu_
  std::vector<std::unique_ptr<EventFile>> files_;  // guarded by mu_; files_[0] is the main file
  std::map<std::string, EventFile*> scalars_files_;  // guarded by mu_
  uint64_t enqueued_ = 0, written_ = 0;  // guarded by mu_: events accepted / handed to the kernel
  std::string write_error_;          // guarded by mu_: the first failed write since the last flush
  bool stop_ = false;                // guarded by mu_
  std::thread thread_;
};

}  // namespace ember
