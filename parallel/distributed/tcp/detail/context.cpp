#include "parallel/distributed/tcp/detail/context.h"

#include "core/error.h"

namespace ember::parallel::tcp::detail {

std::string describe_failure(const OpInfo& info, const PipelineFailure& f, int64_t timeout_ms) {
  std::string msg = info.description + " failed: ";
  const std::string peer = "rank " + std::to_string(f.peer);
  if (!f.message.empty()) return msg + f.message;
  msg += (f.sending ? "sending to " : "receiving from ") + peer + ": ";
  switch (f.io.status) {
    case IoStatus::CLOSED:
      return msg + peer + " closed the connection (it died, or its process group broke or was destroyed)";
    case IoStatus::TIMEOUT:
      return msg + "timed out after " + std::to_string(timeout_ms) + " ms (" + peer +
             " is hung, too slow, or has not called this collective)";
    default:
      return msg + f.io.describe() + " (" + peer + " died or its process group broke)";
  }
}

void Context::run(const OpInfo& info, PipelinePlan& plan) {
  state->check_not_broken(info.description);
  PipelineFailure failure;
  current_ = &info;
  failure_message_.clear();
  const bool ok = pipeline->run(plan, &failure);
  current_ = nullptr;
  if (ok) return;
  if (!failure_message_.empty()) EMBER_THROW(DistributedError, failure_message_);
  // Someone else broke the group first (abort(), destruction, a failed send/recv); our
  // failure is the consequence of their shutting the sockets down.
  EMBER_THROW(DistributedError, info.description, " aborted: ", state->reason());
}

void Context::on_pipeline_failure(const PipelineFailure& f) {
  // Runs on the failing thread (sender or receiver) while run() waits for the pipeline.
  const std::string msg = describe_failure(*current_, f, timeout_ms);
  if (state->break_group(msg)) failure_message_ = msg;
}

uint8_t* Context::tmp(size_t n) {
  if (tmp_.size() < n) tmp_.resize(n);
  return tmp_.data();
}

uint8_t* Context::scratch(size_t n) {
  if (scratch_.size() < n) scratch_.resize(n);
  return scratch_.data();
}

}  // namespace ember::parallel::tcp::detail
