// The ordering of a copy between two GPUs (Note [Copies between devices]): the sequence of stream
// operations native::detail::copy_between_devices issues, recorded by a fake PeerCopyOps, so it is
// checked on CPU. (The CUDA operations themselves: tests/core/cuda/cuda_stream_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/detail/peer_copy.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

using native::detail::CopyEnd;
using native::detail::copy_between_devices;

// Records each call as text; events are numbered from 1 in creation order. `fail_at` names a call
// (by its text's first word) that throws ember::Error instead.
class FakeOps final : public native::detail::PeerCopyOps {
 public:
  mutable std::vector<std::string> calls;
  mutable std::vector<int> live_events;
  std::string fail_at;

  void* record_event(int device_index, uint64_t stream) const override {
    maybe_fail("record");
    const int id = ++next_event_;
    live_events.push_back(id);
    calls.push_back("record cuda:" + std::to_string(device_index) + "/s" + std::to_string(stream) + " -> e" +
                    std::to_string(id));
    return reinterpret_cast<void*>(static_cast<intptr_t>(id));
  }
  void wait_event(int device_index, uint64_t stream, void* event) const override {
    maybe_fail("wait");
    calls.push_back("wait cuda:" + std::to_string(device_index) + "/s" + std::to_string(stream) + " on e" +
                    std::to_string(id_of(event)));
  }
  void destroy_event(void* event) const override {
    const int id = id_of(event);
    std::erase(live_events, id);
    calls.push_back("destroy e" + std::to_string(id));
    maybe_fail("destroy");
  }
  void copy(void* dst, int dst_device, const void* src, int src_device, size_t num_bytes, int stream_device,
            uint64_t stream) const override {
    maybe_fail("copy");
    EXPECT_EQ(dst, kDst);
    EXPECT_EQ(src, kSrc);
    calls.push_back("copy " + std::to_string(num_bytes) + "B cuda:" + std::to_string(src_device) + "->cuda:" +
                    std::to_string(dst_device) + " on cuda:" + std::to_string(stream_device) + "/s" +
                    std::to_string(stream));
  }
  void synchronize(int device_index, uint64_t stream) const override {
    maybe_fail("sync");
    calls.push_back("sync cuda:" + std::to_string(device_index) + "/s" + std::to_string(stream));
  }

  static inline char dst_byte = 0, src_byte = 0;
  static inline void* const kDst = &dst_byte;
  static inline const void* const kSrc = &src_byte;

 private:
  static int id_of(void* event) { return static_cast<int>(reinterpret_cast<intptr_t>(event)); }
  void maybe_fail(const char* what) const {
    if (fail_at == what) EMBER_CHECK(false, "fake ", what, " failed");
  }
  mutable int next_event_ = 0;
};

constexpr CopyEnd kDstEnd{1, 22};  // cuda:1, a side stream
constexpr CopyEnd kSrcEnd{0, 11};  // cuda:0, another side stream

TEST(PeerCopy, SourceStreamIsWaitedForThenTheCopyIsWaitedForByTheSourceStream) {
  FakeOps ops;
  copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 64, /*non_blocking=*/true);
  const std::vector<std::string> want = {
      "record cuda:0/s11 -> e1",           // the source's producers are before e1
      "wait cuda:1/s22 on e1",             // the destination's stream waits for them
      "copy 64B cuda:0->cuda:1 on cuda:1/s22",  // after earlier users of the destination block
      "record cuda:1/s22 -> e2",           // after the copy
      "wait cuda:0/s11 on e2",             // later work on the source block waits for the copy
      "destroy e1",
      "destroy e2",
  };
  EXPECT_EQ(ops.calls, want);
  EXPECT_TRUE(ops.live_events.empty());
}

TEST(PeerCopy, ABlockingCopyWaitsForTheCopyStreamLast) {
  FakeOps ops;
  copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 8, /*non_blocking=*/false);
  ASSERT_EQ(ops.calls.size(), 8u);
  EXPECT_EQ(ops.calls.back(), "sync cuda:1/s22");
  EXPECT_EQ(ops.calls[2], "copy 8B cuda:0->cuda:1 on cuda:1/s22");
}

TEST(PeerCopy, DefaultStreamsAreHandshakenLikeSideStreams) {
  // Stream 0 is each device's legacy default stream; the events still order the pair (their
  // device is made current by the operations, so 0 means the right device's stream).
  FakeOps ops;
  copy_between_devices(ops, FakeOps::kDst, CopyEnd{3, 0}, FakeOps::kSrc, CopyEnd{2, 0}, 4, true);
  ASSERT_GE(ops.calls.size(), 5u);
  EXPECT_EQ(ops.calls[0], "record cuda:2/s0 -> e1");
  EXPECT_EQ(ops.calls[1], "wait cuda:3/s0 on e1");
  EXPECT_EQ(ops.calls[4], "wait cuda:2/s0 on e2");
}

TEST(PeerCopy, ZeroBytesIssueNothing) {
  FakeOps ops;
  copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 0, false);
  EXPECT_TRUE(ops.calls.empty());
}

TEST(PeerCopy, AFailedCopyIsReportedAndLeaksNoEvent) {
  FakeOps ops;
  ops.fail_at = "copy";
  const std::string what = support::error_of<Error>(
      [&] { copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 64, false); });
  EXPECT_NE(what.find("fake copy failed"), std::string::npos) << what;
  EXPECT_TRUE(ops.live_events.empty());
  EXPECT_EQ(ops.calls.back(), "destroy e1");
}

TEST(PeerCopy, AFailedWaitOfTheSourceStreamLeaksNoEvent) {
  FakeOps ops;
  ops.fail_at = "wait";
  EXPECT_THROW(copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 64, true), Error);
  EXPECT_TRUE(ops.live_events.empty());
}

TEST(PeerCopy, AFailedEventDestroyIsReported) {
  FakeOps ops;
  ops.fail_at = "destroy";
  EXPECT_THROW(copy_between_devices(ops, FakeOps::kDst, kDstEnd, FakeOps::kSrc, kSrcEnd, 64, false), Error);
  // The second event is still destroyed while the first one's error propagates.
  EXPECT_TRUE(ops.live_events.empty());
}

}  // namespace
}  // namespace ember
