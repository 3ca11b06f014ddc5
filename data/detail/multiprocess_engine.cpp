#include "data/detail/multiprocess_engine.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <poll.h>
#include <unistd.h>

#include "core/error_code.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "data/detail/wire.h"
#include "data/detail/worker_reply.h"
#include "data/worker_info.h"

// Note [DataLoader workers]
// Workers are fork()ed children, each with one AF_UNIX stream socket to the parent (a
// socket rather than two pipes so that writes to a dead peer fail with EPIPE instead of
// raising SIGPIPE). Messages are length-prefixed frames (data/detail/wire.h):
//   parent -> worker  kFetch(batch id, sample indices) | kReset (new epoch)
//   worker -> parent  kBatch(batch id, buffer size, tensor descriptors, structure bytes) with
//                     the batch buffer's descriptor attached (see Note [Nameless batches]), or,
//                     for a batch of at most kInlineBatchBytes, no descriptor and the buffer's
//                     bytes as the very next frame (Note [Inline batches])
//                     | kError(batch id, exception type, message, where) | kExhausted(batch id)
// Batch b of an epoch goes to worker b % num_workers (iterable datasets: the next worker not
// yet exhausted), so which worker makes which batch, and hence each worker's random stream,
// depends only on the seed. A worker answers its requests in order; the parent keeps answers
// in a reorder buffer and hands them out by batch id. A worker exits when its socket reaches
// end-of-stream (the parent closed it or died) and always leaves through _exit().
// Shutdown closes every socket, gives workers a moment, SIGKILLs stragglers and reaps them
// all. Batch buffers have no names, so there is nothing to clean up after anyone: a buffer
// still queued in a socket is freed with the socket.

// Note [Inline batches]
// A shared buffer costs a fixed price per batch on both sides: memfd_create, ftruncate, mmap,
// a page fault per page written and read, munmap, and the kernel freeing the pages; descriptor
// passing adds its own work to each message. For a small batch that price is larger than the
// bytes: the batches of 64 sequences of ember-bench-data are about 26 KB. So a batch of at
// most kInlineBatchBytes travels through the socket itself, as a second frame right after its
// reply, and the parent copies it into a tensor of its own (64-byte aligned by the allocator,
// as the buffer's page was). The reply says which way it came: its buffer size is non-zero and
// no descriptor came with it. The payload frame is checked to be exactly that size.

namespace ember::data::detail {
namespace {

enum : uint8_t { kFetch = 1, kReset = 2 };
constexpr size_t kAlignment = 64;
constexpr size_t kInlineBatchBytes = 32 * 1024;
constexpr int kShutdownGraceMs = 1000;
constexpr int kFailGraceMs = 50;
constexpr int kPollSliceMs = 100;
constexpr int64_t kDrainTimeoutMs = 60000;

std::atomic<uint64_t> g_next_engine_id{0};

// Worker side: copies the batch's tensors into a fresh shared buffer, or into *inline_bytes for a
// small batch (Note [Inline batches]), and describes them. Returns the frame; *buffer receives the
// buffer (left empty when every tensor is empty or the batch goes inline).
std::string batch_frame(uint64_t id, BatchEncoder& enc, const std::string& who, SharedBuffer* buffer,
                        std::string* inline_bytes) {
  auto& tensors = enc.tensors();
  std::vector<uint64_t> offsets(tensors.size());
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor& t = tensors[i];
    EMBER_CHECK(t.device().is_cpu(), who, ": a batch tensor is on ", t.device(),
                "; tensors leave workers through host shared memory, so collate on the CPU");
    if (!t.is_contiguous()) t = native::contiguous(t);
    total = (total + kAlignment - 1) / kAlignment * kAlignment;
    offsets[i] = total;
    total += t.nbytes();
  }
  if (total > 0 && total <= kInlineBatchBytes) {
    inline_bytes->assign(total, '\0');
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].nbytes() > 0) std::memcpy(inline_bytes->data() + offsets[i], tensors[i].raw_data(), tensors[i].nbytes());
    }
  } else if (total > 0) {
    *buffer = create_shared_buffer(total, who);
    char* base = static_cast<char*>(buffer->mapping->data());
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].nbytes() > 0) std::memcpy(base + offsets[i], tensors[i].raw_data(), tensors[i].nbytes());
    }
    buffer->mapping.reset();  // the worker is done with it; the descriptor keeps the memory
  }
  return batch_reply(id, total, tensors, offsets, enc.meta());
}

void worker_main(int fd, int worker_id, int num_workers, uint64_t base_seed, void* dataset, const WorkerBody& body) {
  // Ctrl-C reaches the whole process group: let the parent handle it; workers then see
  // end-of-stream and leave (as PyTorch's workers ignore SIGINT).
  std::signal(SIGINT, SIG_IGN);
  const uint64_t seed = base_seed + static_cast<uint64_t>(worker_id);
  set_worker_info(WorkerInfo{worker_id, num_workers, seed, dataset});
  default_generator().manual_seed(seed);
  const std::string who = "DataLoader worker " + std::to_string(worker_id);

  // An error outside a fetch (worker_init_fn, reset) is the answer to the next fetch.
  std::optional<ErrorDescription> init_error, reset_error;
  auto capture = [](auto& slot, auto&& f) {
    try {
      f();
    } catch (...) {
      slot = describe_exception(std::current_exception());
    }
  };
  if (body.init) capture(init_error, [&] { body.init(worker_id); });

  std::vector<size_t> indices;
  while (auto frame = recv_frame(fd)) {
    ByteReader r(*frame);
    auto kind = r.get<uint8_t>();
    if (kind == kReset) {
      reset_error.reset();
      if (body.reset) capture(reset_error, [&] { body.reset(); });
      continue;
    }
    EMBER_INTERNAL_ASSERT(kind == kFetch, "unknown DataLoader task kind ", int(kind));
    auto id = r.get<uint64_t>();
    auto n = r.get<uint64_t>();
    indices.resize(n);
    if (n > 0) std::memcpy(indices.data(), r.get_bytes(n * sizeof(uint64_t)), n * sizeof(uint64_t));

    std::string reply, inline_bytes;
    SharedBuffer buffer;
    if (init_error) {
      reply = error_reply(id, init_error->code, "worker_init_fn: " + init_error->message, init_error->where);
    } else if (reset_error) {
      reply = error_reply(id, reset_error->code, reset_error->message, reset_error->where);
      reset_error.reset();
    } else {
      std::optional<ErrorDescription> err;
      capture(err, [&] {
        std::optional<BatchEncoder> enc = body.fetch(indices);
        if (!enc) {
          reply = exhausted_reply(id);
        } else {
          reply = batch_frame(id, *enc, who, &buffer, &inline_bytes);
        }
      });
      if (err) {
        buffer = SharedBuffer();
        inline_bytes.clear();
        reply = error_reply(id, err->code, err->message, err->where);
      }
    }
    if (!send_frame(fd, reply, buffer.fd.get())) break;
    if (!inline_bytes.empty() && !send_frame(fd, inline_bytes)) break;
  }
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

MultiprocessEngine::MultiprocessEngine(EngineOptions options, void* dataset, WorkerBody body)
    : options_(options), dataset_(dataset), body_(std::move(body)), id_(g_next_engine_id++) {
  EMBER_CHECK_T(ValueError, options_.num_workers > 0, "DataLoader: num_workers must be > 0 here, got ",
                options_.num_workers);
  EMBER_CHECK_T(ValueError, options_.prefetch_factor > 0, "DataLoader: prefetch_factor must be > 0, got ",
                options_.prefetch_factor);
}

MultiprocessEngine::~MultiprocessEngine() { shutdown(); }

std::vector<pid_t> MultiprocessEngine::worker_pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : workers_) pids.push_back(w->pid());
  return pids;
}

std::string MultiprocessEngine::worker_name(int w) const {
  return "DataLoader worker " + std::to_string(w) + " (pid " + std::to_string(workers_[w]->pid()) + ")";
}

void MultiprocessEngine::start(uint64_t base_seed) {
  EMBER_INTERNAL_ASSERT(!started());
  if (broken_) broken_.reset();
  const int n = options_.num_workers;
  try {
    for (int i = 0; i < n; ++i) {
      workers_.push_back(WorkerProcess::spawn([&, i](int fd) { worker_main(fd, i, n, base_seed, dataset_, body_); }));
    }
  } catch (...) {
    shutdown();
    throw;
  }
  pending_.assign(n, {});
}

void MultiprocessEngine::begin_epoch(std::vector<std::vector<size_t>> batches) {
  EMBER_INTERNAL_ASSERT(started() && !in_epoch_);
  if (broken_) throw Error("DataLoader: the workers failed earlier: " + *broken_);
  in_epoch_ = true;
  batches_ = std::move(batches);
  epoch_base_ += next_send_;
  next_send_ = next_recv_ = 0;
  inflight_ = 0;
  reorder_.clear();
  active_.assign(workers_.size(), true);
  rr_ = 0;
  if (options_.iterable) {
    ByteWriter w;
    w.put<uint8_t>(kReset);
    std::string frame = w.take();
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!send_frame(workers_[i]->fd(), frame)) fail_dead_worker(static_cast<int>(i));
    }
  }
  dispatch();
}

void MultiprocessEngine::dispatch() {
  const uint64_t W = workers_.size();
  const uint64_t cap = static_cast<uint64_t>(options_.prefetch_factor) * W;
  static const std::vector<size_t> kNoIndices;
  while (inflight_ < cap) {
    int w;
    const std::vector<size_t>* indices = &kNoIndices;
    if (options_.iterable) {
      size_t tries = 0;
      while (tries < W && !active_[rr_]) rr_ = (rr_ + 1) % W, ++tries;
      if (tries == W) return;  // every worker exhausted
      w = static_cast<int>(rr_);
      rr_ = (rr_ + 1) % W;
    } else {
      if (next_send_ >= batches_.size()) return;
      w = static_cast<int>(next_send_ % W);
      indices = &batches_[next_send_];
    }
    const uint64_t id = epoch_base_ + next_send_;
    ByteWriter f;
    f.put<uint8_t>(kFetch);
    f.put<uint64_t>(id);
    f.put<uint64_t>(indices->size());
    static_assert(sizeof(size_t) == sizeof(uint64_t));
    f.put_bytes(indices->data(), indices->size() * sizeof(size_t));
    if (!send_frame(workers_[w]->fd(), f.bytes())) fail_dead_worker(w);
    pending_[w].push_back(id);
    ++next_send_;
    ++inflight_;
  }
}

bool MultiprocessEngine::epoch_done() const {
  if (!options_.iterable) return next_recv_ >= batches_.size();
  if (next_recv_ < next_send_) return false;
  for (bool a : active_) {
    if (a) return false;
  }
  return true;
}

std::optional<RawBatch> MultiprocessEngine::next() {
  if (broken_) throw Error("DataLoader: the workers failed earlier: " + *broken_);
  EMBER_INTERNAL_ASSERT(in_epoch_);
  while (true) {
    dispatch();
    if (epoch_done()) {
      in_epoch_ = false;
      return std::nullopt;
    }
    const uint64_t want = epoch_base_ + next_recv_;
    auto it = reorder_.find(want);
    if (it == reorder_.end()) {
      wait_for_results(want);
      continue;
    }
    Slot slot = std::move(it->second);
    reorder_.erase(it);
    ++next_recv_;
    switch (slot.kind) {
      case SlotKind::kBatch: return std::move(slot.batch);
      case SlotKind::kExhausted: continue;
      case SlotKind::kError:
        dispatch();  // keep the pipeline full for whoever continues after catching
        throw_exception(slot.error_code, worker_name(slot.worker) + " raised: " + slot.message, slot.where);
    }
  }
}

void MultiprocessEngine::wait_for_results(uint64_t awaited_id) {
  const int64_t deadline = options_.timeout_ms > 0 ? now_ms() + options_.timeout_ms : 0;
  int owner = -1;
  for (size_t w = 0; w < pending_.size() && owner < 0; ++w) {
    for (uint64_t id : pending_[w]) {
      if (id == awaited_id) owner = static_cast<int>(w);
    }
  }
  EMBER_INTERNAL_ASSERT(owner >= 0, "DataLoader: batch ", awaited_id, " was never requested");
  std::vector<pollfd> fds(workers_.size());
  while (reorder_.find(awaited_id) == reorder_.end()) {
    int slice = kPollSliceMs;
    if (deadline) {
      int64_t left = deadline - now_ms();
      if (left <= 0) {
        fail("DataLoader timed out after " + std::to_string(options_.timeout_ms) + " ms waiting for batch " +
                 std::to_string(awaited_id - epoch_base_) + " from " + worker_name(owner),
             ErrorCode::kTimeout);
      }
      slice = static_cast<int>(std::min<int64_t>(left, slice));
    }
    for (size_t w = 0; w < workers_.size(); ++w) fds[w] = pollfd{workers_[w]->fd(), POLLIN, 0};
    int r = ::poll(fds.data(), fds.size(), slice);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(std::string("DataLoader: poll failed: ") + std::strerror(errno), ErrorCode::kError);
    }
    if (r == 0) {
      // Nothing arrived: make sure nobody died without the socket telling us.
      for (size_t w = 0; w < workers_.size(); ++w) {
        if (workers_[w]->check_exited()) fail_dead_worker(static_cast<int>(w));
      }
      continue;
    }
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (fds[w].revents == 0) continue;
      // Read everything already there, so one busy worker cannot starve the others.
      do {
        if (!receive_from(static_cast<int>(w), false)) fail_dead_worker(static_cast<int>(w));
        pollfd again{workers_[w]->fd(), POLLIN, 0};
        if (::poll(&again, 1, 0) <= 0 || !(again.revents & POLLIN)) break;
      } while (true);
    }
  }
}

bool MultiprocessEngine::receive_from(int w, bool discard) {
  io::UniqueFd buffer_fd;
  std::optional<std::string> frame = recv_frame(workers_[w]->fd(), &buffer_fd);
  if (!frame) return false;
  // Nothing in the reply is trusted (Note [Checking worker replies] in worker_reply.cpp): a
  // bad one breaks the engine with a ValueError naming the worker and what arrived.
  WorkerReply reply;
  std::shared_ptr<ShmMapping> map;
  std::optional<std::string> inline_frame;
  Tensor inline_storage;
  try {
    reply = decode_worker_reply(*frame, worker_name(w));
    const auto& pend = pending_[w];
    EMBER_CHECK_T(ValueError, !pend.empty() && pend.front() == reply.id, worker_name(w),
                  " sent a bad reply: an answer for batch ", reply.id, " while the batch it owes is ",
                  pend.empty() ? std::string("none") : std::to_string(pend.front()));
    if (reply.kind == ReplyKind::kBatch && reply.buffer_bytes > 0 && !buffer_fd.valid()) {
      // Note [Inline batches]: the bytes are the next frame (read even when discarding).
      EMBER_CHECK_T(ValueError, reply.buffer_bytes <= kInlineBatchBytes, worker_name(w), " sent a bad reply: a ",
                    reply.buffer_bytes, "-byte batch without its buffer");
      inline_frame = recv_frame(workers_[w]->fd());
      if (!inline_frame) return false;
      EMBER_CHECK_T(ValueError, inline_frame->size() == reply.buffer_bytes, worker_name(w),
                    " sent a bad reply: a ", reply.buffer_bytes, "-byte batch followed by ", inline_frame->size(),
                    " bytes");
      if (!discard) {
        // Raw bytes: the storage of an int64 tensor rounded up to whole elements.
        inline_storage = empty({static_cast<int64_t>((reply.buffer_bytes + 7) / 8)}, TensorOptions(kInt64));
        std::memcpy(inline_storage.raw_data(), inline_frame->data(), inline_frame->size());
      }
    } else if (reply.kind == ReplyKind::kBatch && reply.buffer_bytes > 0 && !discard) {
      map = map_shared_buffer(buffer_fd.get(), reply.buffer_bytes, worker_name(w));
    }
  } catch (const ValueError& e) {
    fail(e.what(), ErrorCode::kValue);
  }
  pending_[w].pop_front();
  --inflight_;
  if (discard) return true;  // closing buffer_fd frees the buffer
  Slot slot;
  slot.worker = w;
  switch (reply.kind) {
    case ReplyKind::kBatch:
      slot.kind = SlotKind::kBatch;
      slot.batch.tensors.reserve(reply.tensors.size());
      for (const TensorSlot& t : reply.tensors) {
        if (t.nbytes == 0) {
          slot.batch.tensors.push_back(empty(t.sizes, TensorOptions(t.dtype)));
        } else if (inline_storage.defined()) {
          void* p = static_cast<char*>(inline_storage.raw_data()) + t.offset;
          slot.batch.tensors.push_back(from_blob(p, t.sizes, t.dtype, [s = inline_storage](void*) mutable { s = Tensor(); }));
        } else {
          void* p = static_cast<char*>(map->data()) + t.offset;
          slot.batch.tensors.push_back(from_blob(p, t.sizes, t.dtype, [m = map](void*) mutable { m.reset(); }));
        }
      }
      slot.batch.meta = std::move(reply.meta);
      break;
    case ReplyKind::kError:
      slot.kind = SlotKind::kError;
      slot.error_code = reply.error_code;
      slot.message = std::move(reply.message);
      slot.where = std::move(reply.where);
      break;
    case ReplyKind::kExhausted:
      slot.kind = SlotKind::kExhausted;
      if (options_.iterable) active_[w] = false;
      break;
  }
  reorder_.emplace(reply.id, std::move(slot));
  return true;
}

void MultiprocessEngine::fail_dead_worker(int w) {
  auto& proc = *workers_[w];
  // The socket closes a moment before the process can be reaped.
  proc.wait_exit(kShutdownGraceMs);
  std::string how = proc.status() ? WorkerProcess::describe_status(*proc.status())
                                  : "closed its connection unexpectedly";
  fail(worker_name(w) + " " + how, ErrorCode::kError);
}

void MultiprocessEngine::fail(const std::string& message, ErrorCode code) {
  shutdown(kFailGraceMs);  // a stuck, dead or corrupt worker is not worth waiting for
  broken_ = message;
  throw_exception(code, message);
}

void MultiprocessEngine::end_epoch(bool keep_workers) {
  if (!in_epoch_) {
    if (!keep_workers) shutdown();
    return;
  }
  in_epoch_ = false;
  reorder_.clear();
  if (!keep_workers || broken_) {
    shutdown();
    return;
  }
  // Drain what is in flight so the next epoch starts clean.
  const int64_t deadline = now_ms() + (options_.timeout_ms > 0 ? options_.timeout_ms : kDrainTimeoutMs);
  try {
    while (inflight_ > 0) {
      std::vector<pollfd> fds(workers_.size());
      for (size_t w = 0; w < workers_.size(); ++w) fds[w] = pollfd{workers_[w]->fd(), POLLIN, 0};
      int64_t left = deadline - now_ms();
      if (left <= 0) throw TimeoutError("DataLoader: timed out draining batches in flight");
      int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, kPollSliceMs)));
      if (r < 0 && errno != EINTR)
        throw Error(std::string("DataLoader: poll failed while draining batches in flight: ") + std::strerror(errno));
      for (size_t w = 0; r > 0 && w < workers_.size(); ++w) {
        if (fds[w].revents != 0 && !receive_from(static_cast<int>(w), true))
          throw Error("DataLoader: worker " + std::to_string(w) + " died while batches were draining");
      }
    }
  } catch (...) {
    shutdown();
  }
}

void MultiprocessEngine::shutdown(int grace_ms) noexcept {
  in_epoch_ = false;
  reorder_.clear();
  if (workers_.empty()) return;
  for (auto& w : workers_) w->close_socket();
  // One grace period for all workers together, then SIGKILL whoever is left.
  const int64_t deadline = now_ms() + grace_ms;
  for (auto& w : workers_) {
    int64_t left = deadline - now_ms();
    w->wait_exit(static_cast<int>(std::max<int64_t>(left, 0)));
  }
  for (auto& w : workers_) w->terminate(0);
  workers_.clear();
  pending_.clear();
  inflight_ = 0;
}

}  // namespace ember::data::detail
