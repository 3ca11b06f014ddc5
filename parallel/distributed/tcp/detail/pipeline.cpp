#include "parallel/distributed/tcp/detail/pipeline.h"

#include <exception>

#include "core/error.h"

namespace ember::parallel::tcp::detail {

void ChainAck::add_to(PipelinePlan& plan, bool is_start, bool is_end, size_t nseg) {
  if (is_end) plan.sends.push_back({&sent, sizeof sent, static_cast<int64_t>(nseg) - 1});
  if (is_start) plan.recvs.push_back({&received, sizeof received});
}

void ChainAck::check(int peer) const {
  EMBER_CHECK_T(DistributedError, received == expected, "rank ", peer, " acknowledged operation #", received,
                " at the end of the chain, expected #", expected);
}

Pipeline::Pipeline(std::function<void(const PipelineFailure&)> abort, size_t inline_send_bytes)
    : abort_(std::move(abort)), inline_send_bytes_(inline_send_bytes) {
  sender_ = std::thread([this] { sender_loop(); });
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  sender_.join();
}

void Pipeline::record_failure(PipelineFailure f) {
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (have_failure_) return;
    have_failure_ = true;
    failure_ = f;
  }
  {
    std::lock_guard<std::mutex> lock(progress_mutex_);
    failed_.store(true);
  }
  progress_cv_.notify_all();
  abort_(f);
}

void Pipeline::sender_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || plan_ != nullptr; });
    if (plan_ == nullptr) return;  // stop_
    PipelinePlan* plan = plan_;
    plan_ = nullptr;
    lock.unlock();
    run_sends(*plan);
    lock.lock();
    sender_busy_ = false;
    cv_.notify_all();
  }
}

void Pipeline::run_sends(PipelinePlan& plan) {
  OpHeader header = plan.header;
  // The header goes out with the first segment that needs no receive first (one syscall).
  size_t i = 0;
  iovec iov[2];
  iov[0] = {&header, sizeof header};
  int iovcnt = 1;
  if (!plan.sends.empty() && plan.sends[0].after_recv < 0) {
    iov[1] = {const_cast<void*>(plan.sends[0].data), plan.sends[0].num_bytes};
    iovcnt = 2;
    i = 1;
  }
  IoResult r = plan.send_socket->sendv_all(iov, iovcnt, plan.deadline);
  if (!r.ok()) return record_failure({true, plan.send_peer, r, ""});
  if (i == 1) {
    {
      std::lock_guard<std::mutex> lock(progress_mutex_);
      sends_done_ = 1;
    }
    progress_cv_.notify_all();
  }
  for (; i < plan.sends.size(); ++i) {
    const SendItem& s = plan.sends[i];
    if (s.after_recv >= 0) {
      wait_progress(recvs_done_, s.after_recv + 1);
      if (failed_.load()) return;
    }
    if (s.num_bytes > 0) {
      r = plan.send_socket->send_all(s.data, s.num_bytes, plan.deadline);
      if (!r.ok()) return record_failure({true, plan.send_peer, r, ""});
    }
    {
      std::lock_guard<std::mutex> lock(progress_mutex_);
      sends_done_ = static_cast<int64_t>(i) + 1;
    }
    progress_cv_.notify_all();
  }
}

void Pipeline::wait_progress(const int64_t& counter, int64_t at_least) {
  std::unique_lock<std::mutex> lock(progress_mutex_);
  progress_cv_.wait(lock, [&] { return counter >= at_least || failed_.load(); });
}

bool Pipeline::run_inline(PipelinePlan& plan, PipelineFailure* failure) {
  auto fail = [&](PipelineFailure f) {
    *failure = f;
    abort_(f);
    return false;
  };
  if (plan.send_socket != nullptr) {
    OpHeader header = plan.header;
    IoResult r = plan.send_socket->send_all(&header, sizeof header, plan.deadline);
    if (!r.ok()) return fail({true, plan.send_peer, r, ""});
  }
  size_t next_recv = 0;
  bool header_read = plan.recv_socket == nullptr;
  // Receives (in order) until `count` of them are done.
  auto receive_until = [&](size_t count) -> bool {
    if (!header_read) {
      OpHeader theirs;
      IoResult r = plan.recv_socket->recv_all(&theirs, sizeof theirs, plan.deadline);
      if (!r.ok()) return fail({false, plan.recv_peer, r, ""});
      if (!(theirs == plan.header))
        return fail({false, plan.recv_peer, {}, "rank " + std::to_string(plan.recv_peer) + " is running " +
                                                    theirs.str() + " but this rank is running " + plan.header.str()});
      header_read = true;
    }
    for (; next_recv < count; ++next_recv) {
      const RecvItem& item = plan.recvs[next_recv];
      if (item.num_bytes > 0) {
        IoResult r = plan.recv_socket->recv_all(item.data, item.num_bytes, plan.deadline);
        if (!r.ok()) return fail({false, plan.recv_peer, r, ""});
      }
      if (plan.on_received) {
        try {
          plan.on_received(next_recv);
        } catch (const std::exception& e) {
          return fail({false, plan.recv_peer, {}, e.what()});
        }
      }
    }
    return true;
  };
  for (const SendItem& s : plan.sends) {
    if (s.after_recv >= 0 && !receive_until(static_cast<size_t>(s.after_recv) + 1)) return false;
    if (s.num_bytes == 0) continue;
    IoResult r = plan.send_socket->send_all(s.data, s.num_bytes, plan.deadline);
    if (!r.ok()) return fail({true, plan.send_peer, r, ""});
  }
  return plan.recv_socket == nullptr || receive_until(plan.recvs.size());
}

bool Pipeline::run(PipelinePlan& plan, PipelineFailure* failure) {
  size_t send_bytes = 0;
  for (const SendItem& s : plan.sends) send_bytes += s.num_bytes;
  if (send_bytes <= inline_send_bytes_) return run_inline(plan, failure);
  {
    std::lock_guard<std::mutex> lock(progress_mutex_);
    recvs_done_ = 0;
    sends_done_ = 0;
    failed_.store(false);
  }
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    have_failure_ = false;
    failure_ = {};
  }
  if (plan.send_socket != nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    plan_ = &plan;
    sender_busy_ = true;
    cv_.notify_all();
  }

  if (plan.recv_socket != nullptr) {
    OpHeader theirs;
    IoResult r = plan.recv_socket->recv_all(&theirs, sizeof theirs, plan.deadline);
    if (!r.ok()) {
      record_failure({false, plan.recv_peer, r, ""});
    } else if (!(theirs == plan.header)) {
      record_failure({false, plan.recv_peer, {}, "rank " + std::to_string(plan.recv_peer) +
                                                     " is running " + theirs.str() +
                                                     " but this rank is running " + plan.header.str()});
    } else {
      for (size_t i = 0; i < plan.recvs.size() && !failed_.load(std::memory_order_relaxed); ++i) {
        const RecvItem& item = plan.recvs[i];
        if (item.after_send >= 0 && plan.send_socket != nullptr) {
          wait_progress(sends_done_, item.after_send + 1);
          if (failed_.load()) break;
        }
        if (item.num_bytes > 0) {
          r = plan.recv_socket->recv_all(item.data, item.num_bytes, plan.deadline);
          if (!r.ok()) {
            record_failure({false, plan.recv_peer, r, ""});
            break;
          }
        }
        if (plan.on_received) {
          try {
            plan.on_received(i);
          } catch (const std::exception& e) {
            record_failure({false, plan.recv_peer, {}, e.what()});
            break;
          }
        }
        {
          std::lock_guard<std::mutex> lock(progress_mutex_);
          recvs_done_ = static_cast<int64_t>(i) + 1;
        }
        progress_cv_.notify_all();
      }
    }
  }

  if (plan.send_socket != nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !sender_busy_; });
  }
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (!have_failure_) return true;
  *failure = failure_;
  return false;
}

}  // namespace ember::parallel::tcp::detail
