// Fuzz target: the DataLoader wire (data/detail/wire.*, data/detail/worker_reply.*,
// data/batch_codec.h): length-prefixed frames read from a stream socket with recv_frame, each
// frame then decoded both ways the engine decodes (data/detail/multiprocess_engine.cpp):
//   - as a task (kFetch/kReset) with ByteReader, as a worker does;
//   - as a worker's reply with decode_worker_reply, as the parent does (Note [Checking worker
//     replies]); a reply it accepts is then used as the parent uses it: a buffer of the size it
//     announces (when that is at most 1 MiB) is made, every tensor views it through from_blob
//     and is read end to end (so ASan sees a tensor reaching past the buffer), and the
//     structure bytes are decoded into a nested batch type with decode_batch.
// decode_worker_reply may throw only ValueError, ByteReader and decode_batch ember::Error; a
// crash, a sanitizer report, another exception type or an allocation the stream did not pay
// for (libFuzzer's -malloc_limit_mb) is a finding. Seeds: fuzz/corpus/dataloader_wire
// (fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "data/batch_codec.h"
#include "data/detail/wire.h"
#include "data/detail/worker_reply.h"
#include "fuzz/fuzz_util.h"

namespace {

using ember::data::detail::ByteReader;

constexpr uint64_t kMaxBuffer = uint64_t{1} << 20;

// A task as a worker reads it; returns a checksum so nothing is optimized out.
uint64_t decode_task(ByteReader& r) {
  const auto kind = r.get<uint8_t>();
  if (kind != 1) return kind;  // kReset carries nothing
  uint64_t sum = r.get<uint64_t>();  // batch id
  const auto n = r.get<uint64_t>();
  if (n > (uint64_t{1} << 32)) return sum;  // the count alone cannot be paid for by the frame
  const char* p = r.get_bytes(n * sizeof(uint64_t));
  for (uint64_t i = 0; i < n * sizeof(uint64_t); ++i) sum += static_cast<uint8_t>(p[i]);
  return sum;
}

// A reply as the parent reads and uses it.
uint64_t use_reply(const std::string& frame) {
  using namespace ember::data::detail;
  WorkerReply reply;
  try {
    reply = decode_worker_reply(frame, "fuzz worker");
  } catch (const ember::ValueError&) {
    return 1;
  }
  uint64_t sum = reply.id + reply.message.size();
  if (reply.kind != ReplyKind::kBatch || reply.buffer_bytes > kMaxBuffer) return sum;
  // Exactly the announced size, so a tensor reaching past it is a heap overflow ASan reports.
  auto* buffer = static_cast<unsigned char*>(std::malloc(reply.buffer_bytes ? reply.buffer_bytes : 1));
  std::memset(buffer, 0x5a, reply.buffer_bytes);
  std::vector<ember::Tensor> tensors;
  for (const TensorSlot& t : reply.tensors) {
    if (t.nbytes == 0) {
      tensors.push_back(ember::empty(t.sizes, ember::TensorOptions(t.dtype)));
      continue;
    }
    tensors.push_back(ember::from_blob(buffer + t.offset, t.sizes, t.dtype, [](void*) {}));
    const auto* p = static_cast<const unsigned char*>(tensors.back().raw_data());
    for (uint64_t i = 0; i < t.nbytes; i += 64) sum += p[i];
    sum += p[t.nbytes - 1];
  }
  try {
    using Batch = std::vector<std::map<std::string, std::optional<ember::Tensor>>>;
    sum += ember::data::decode_batch<Batch>(tensors, reply.meta).size();
  } catch (const ember::Error&) {
  }
  tensors.clear();
  std::free(buffer);
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ember::fuzz::SocketPair pair;
  ember::fuzz::write_all_or_die(pair.writer, data, size);
  pair.close_writer();
  uint64_t sum = 0;
  try {
    while (std::optional<std::string> frame = ember::data::detail::recv_frame(pair.reader)) {
      try {
        ByteReader task(*frame);
        sum += decode_task(task);
      } catch (const ember::Error&) {
      }
      sum += use_reply(*frame);
    }
  } catch (const ember::Error&) {
  }
  volatile uint64_t sink = sum;
  (void)sink;
  return 0;
}
