// Fuzz target: the tcp backend's op header check (parallel/distributed/tcp/detail/op_header.*,
// pipeline.cpp): what a rank does with the 32-byte header and the data a peer sends at the
// start of a collective. The input is what the peer sent (header, then payload), after two
// bytes that pick this rank's side: byte 0 = the collective (mod 8) and, bit 3, the threaded
// pipeline instead of the inline one; byte 1 = the dtype (mod 7). This rank expects 64 bytes in
// two receives. A match, a mismatch (DistributedError text naming both headers) and a short
// stream are all fine; a crash, a sanitizer report or a hang is a finding.
// Seeds: fuzz/corpus/tcp_op_header (fuzz/make_seeds.cpp).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_util.h"
#include "parallel/distributed/tcp/detail/op_header.h"
#include "parallel/distributed/tcp/detail/pipeline.h"
#include "parallel/distributed/tcp/detail/socket.h"

namespace {

using namespace ember::parallel::tcp::detail;
using ember::parallel::OpType;

constexpr size_t kRecvBytes = 64;

// A connected non-blocking pair: [0] becomes a Socket (owned), [1] stays with the harness.
void nonblocking_pair(int fds[2]) {
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto type = static_cast<OpType>(data[0] % 8);
  const bool threaded = (data[0] & 8) != 0;
  const auto dtype = static_cast<ember::DType>(data[1] % 7);
  // inline_send_bytes 0 sends every plan with data through the sender thread.
  static Pipeline inline_pipeline([](const PipelineFailure&) {}, Pipeline::kInlineSendBytes);
  static Pipeline threaded_pipeline([](const PipelineFailure&) {}, 0);

  int recv_fds[2], send_fds[2];
  nonblocking_pair(recv_fds);
  nonblocking_pair(send_fds);
  ember::fuzz::write_all_or_die(recv_fds[1], data + 2, size - 2);
  ::close(recv_fds[1]);  // the peer sent this much, then went away
  Socket recv_socket(recv_fds[0]);
  Socket send_socket(send_fds[0]);

  const bool rooted = type == OpType::BROADCAST || type == OpType::REDUCE;
  uint8_t received[kRecvBytes];
  const uint8_t outgoing[16] = {};
  PipelinePlan plan;
  plan.recv_socket = &recv_socket;
  plan.recv_peer = 1;
  plan.send_socket = &send_socket;
  plan.send_peer = 2;
  plan.header = OpHeader::make(type, /*seq=*/1, /*part=*/0, dtype, kRecvBytes, rooted ? 0 : -1);
  plan.sends.push_back({outgoing, sizeof outgoing, -1});
  plan.recvs.push_back({received, kRecvBytes / 2, -1});
  plan.recvs.push_back({received + kRecvBytes / 2, kRecvBytes / 2, -1});
  uint64_t sum = 0;
  plan.on_received = [&](size_t i) {
    for (size_t k = 0; k < kRecvBytes / 2; ++k) sum += received[i * (kRecvBytes / 2) + k];
  };
  plan.deadline = Clock::now() + std::chrono::seconds(10);
  PipelineFailure failure;
  const bool ok = (threaded ? threaded_pipeline : inline_pipeline).run(plan, &failure);
  if (!ok) {
    // What the group would put into its DistributedError.
    const std::string text = failure.message + failure.io.describe();
    if (failure.io.status == IoStatus::TIMEOUT) std::abort();  // the whole stream was there: a hang
    volatile size_t sink = text.size();
    (void)sink;
  }
  // Also format a header made of the raw bytes, as a mismatch message would.
  if (size >= 2 + sizeof(OpHeader)) {
    OpHeader theirs;
    std::memcpy(&theirs, data + 2, sizeof theirs);
    volatile size_t sink = theirs.str().size() + sum;
    (void)sink;
  }
  ::close(send_fds[1]);
  return 0;
}
