// Fuzz target: the DataLoader wire (data/detail/wire.*): length-prefixed frames read from a
// stream socket with recv_frame, and the bounds-checked ByteReader that decodes them. The
// input is the byte stream a worker (or the parent) sent; every frame that arrives is decoded
// with the ByteReader calls the engine makes for both message directions
// (data/detail/multiprocess_engine.cpp: kFetch/kReset tasks, kBatch/kError/kExhausted
// replies). What the engine then does with the decoded values (mapping the batch segment) is
// not reached here. Truncation must be an ember::Error; a crash, a sanitizer report, an
// allocation the stream did not pay for (libFuzzer's -malloc_limit_mb) or another exception
// type is a finding. Seeds: fuzz/corpus/dataloader_wire (fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "data/detail/wire.h"
#include "fuzz/fuzz_util.h"

namespace {

using ember::data::detail::ByteReader;

// Each function mirrors one message layout; it returns a checksum so nothing is optimized out.
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

uint64_t decode_reply(ByteReader& r) {
  const auto kind = r.get<uint8_t>();
  uint64_t sum = r.get<uint64_t>();  // batch id
  if (kind == 1) {  // kBatch
    sum += r.get_string().size();  // segment name
    sum += r.get<uint64_t>();      // segment bytes
    const auto n = r.get<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) {
      sum += static_cast<uint8_t>(r.get<int8_t>());  // dtype
      const auto ndim = r.get<uint64_t>();
      for (uint64_t d = 0; d < ndim; ++d) sum += static_cast<uint64_t>(r.get<int64_t>());
      sum += r.get<uint64_t>();  // offset
    }
    sum += r.get_string().size();  // structure bytes
  } else if (kind == 2) {  // kError
    sum += r.get<uint8_t>();
    sum += r.get_string().size();
  }
  return sum + (r.done() ? 1 : 0);
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
      try {
        ByteReader reply(*frame);
        sum += decode_reply(reply);
      } catch (const ember::Error&) {
      }
    }
  } catch (const ember::Error&) {
  }
  volatile uint64_t sink = sum;
  (void)sink;
  return 0;
}
