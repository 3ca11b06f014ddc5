// A DataLoader worker's reply to a fetch, as it travels over the worker's socket: the frame
// layout of kBatch / kError / kExhausted (Note [DataLoader workers] in multiprocess_engine.cpp),
// written by the worker and decoded by the parent. The parent trusts nothing in a reply: every
// count, dimension, size and offset is checked, with checked arithmetic, against the bytes
// that arrived and against the batch buffer it announces (Note [Checking worker replies] in
// worker_reply.cpp), before any memory is sized from it or any tensor views the buffer.
// Stateless functions; thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error_code.h"
#include "core/tensor.h"

namespace ember::data::detail {

enum class ReplyKind : uint8_t { kBatch = 1, kError = 2, kExhausted = 3 };

/// Where one batch tensor lies in the batch buffer.
struct TensorSlot {
  DType dtype = kFloat32;
  IntList sizes;
  uint64_t offset = 0;  // bytes from the buffer's start; a multiple of the element size
  uint64_t nbytes = 0;  // numel * element size; offset + nbytes <= the buffer's size
};

struct WorkerReply {
  ReplyKind kind = ReplyKind::kExhausted;
  uint64_t id = 0;  // the batch id the worker answers
  // kBatch
  uint64_t buffer_bytes = 0;  // the size of the attached buffer (none when 0)
  std::vector<TensorSlot> tensors;
  std::string meta;  // the batch's structure bytes (data/batch_codec.h)
  // kError
  ErrorCode error_code = ErrorCode::kError;
  std::string message;
  std::string where;  // Error::where() of the worker's error; "" when not known
};

/// The worker side: a kBatch reply for tensors (contiguous, CPU) at `offsets` in a buffer of
/// buffer_bytes, with structure bytes `meta`.
std::string batch_reply(uint64_t id, uint64_t buffer_bytes, const std::vector<Tensor>& tensors,
                        const std::vector<uint64_t>& offsets, std::string_view meta);
/// The worker side: a kError reply (`where`: the error's Error::where(), "" when not known).
std::string error_reply(uint64_t id, ErrorCode code, std::string_view message, std::string_view where = {});
/// The worker side: a kExhausted reply (an iterable dataset has no more batches).
std::string exhausted_reply(uint64_t id);

/// The parent side: decodes and checks one reply frame from `who` (e.g. "DataLoader worker 1
/// (pid 123)"). Throws ValueError "<who> sent a bad reply: <what arrived>" for a truncated
/// frame, an unknown kind, a bad dtype, more tensors or dimensions than the frame can hold, a
/// negative or overflowing shape, a tensor that does not lie inside the announced buffer or is
/// misaligned for its dtype, or trailing bytes. Never allocates more than the frame's size.
WorkerReply decode_worker_reply(std::string_view frame, const std::string& who);

}  // namespace ember::data::detail
