#include "data/detail/worker_reply.h"

#include "core/detail/checked_math.h"
#include "data/detail/wire.h"

// Note [Checking worker replies]
// A worker is a forked copy of the parent, but what it sends is still input: user code runs in
// it (datasets, collate functions, custom BatchCodecs) and can corrupt memory or the socket,
// and a worker's arithmetic can overflow (a batch of n elements is n * element size bytes). A
// reply that says "tensor of shape [2^61, 8] at offset 64" in a 4 KiB buffer once made the
// parent build a tensor viewing far past the mapping. So the parent decodes a reply with these
// rules, each a ValueError naming the worker and what arrived, before anything is sized from
// it or mapped:
//   - every read is bounded by the frame; a count (tensors, dimensions) is checked against the
//     bytes left before a container of that count is made (a tensor slot takes at least 17
//     bytes, a dimension 8), so a reply never costs more memory than its own length;
//   - a dtype is one of ember's; a shape's numel and byte count go through checked_nbytes
//     (Note [Checked shape arithmetic] in core/detail/checked_math.cpp);
//   - a tensor lies inside the announced buffer: offset <= buffer_bytes and nbytes <=
//     buffer_bytes - offset (no addition that could wrap), and its offset is a multiple of its
//     element size;
//   - nothing follows the last field.
// The announced buffer size is then checked against the descriptor that came with the frame
// (map_shared_buffer: its fstat size), and the reply's batch id against the one the worker owes.
// The worker side (batch_reply) writes the same layout; fuzz/dataloader_wire_fuzz.cpp feeds
// decode_worker_reply arbitrary frames.

namespace ember::data::detail {
namespace {

constexpr uint64_t kMinSlotBytes = sizeof(int8_t) + sizeof(uint64_t) + sizeof(uint64_t);  // dtype, ndim, offset

// A ByteReader whose every shortfall is the worker's fault: ValueError naming it.
class ReplyReader {
 public:
  ReplyReader(std::string_view frame, const std::string& who) : r_(frame), who_(who), size_(frame.size()) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    return r_.get<T>();
  }
  std::string get_string(const char* what) {
    const auto n = get<uint64_t>(what);
    need(n, what);
    return std::string(r_.get_bytes(static_cast<size_t>(n)), static_cast<size_t>(n));
  }
  // A count of items of at least min_bytes each, checked against the bytes left.
  uint64_t get_count(const char* what, uint64_t min_bytes) {
    const auto n = get<uint64_t>(what);
    if (n > r_.remaining() / min_bytes)
      bad("announces ", n, " ", what, " but only ", r_.remaining(), " bytes of the ", size_, "-byte frame are left");
    return n;
  }
  void expect_end() {
    if (!r_.done()) bad(r_.remaining(), " unexpected bytes after the last field of the ", size_, "-byte frame");
  }
  template <typename... Args>
  [[noreturn]] void bad(const Args&... args) const {
    EMBER_THROW(ValueError, who_, " sent a bad reply: ", args...);
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > r_.remaining())
      bad("the ", size_, "-byte frame ends inside ", what, " (", n, " bytes needed, ", r_.remaining(), " left)");
  }
  ByteReader r_;
  const std::string& who_;
  size_t size_;
};

bool valid_dtype(int8_t d) {
  return d >= static_cast<int8_t>(DType::Float32) && d <= static_cast<int8_t>(DType::Float16);
}

}  // namespace

std::string batch_reply(uint64_t id, uint64_t buffer_bytes, const std::vector<Tensor>& tensors,
                        const std::vector<uint64_t>& offsets, std::string_view meta) {
  ByteWriter w;
  w.put<uint8_t>(static_cast<uint8_t>(ReplyKind::kBatch));
  w.put<uint64_t>(id);
  w.put<uint64_t>(buffer_bytes);
  w.put<uint64_t>(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    w.put<int8_t>(static_cast<int8_t>(t.dtype()));
    w.put<uint64_t>(static_cast<uint64_t>(t.dim()));
    for (int64_t s : t.sizes()) w.put<int64_t>(s);
    w.put<uint64_t>(offsets[i]);
  }
  w.put_string(meta);
  return w.take();
}

std::string error_reply(uint64_t id, ErrorCode code, std::string_view message, std::string_view where) {
  ByteWriter w;
  w.put<uint8_t>(static_cast<uint8_t>(ReplyKind::kError));
  w.put<uint64_t>(id);
  w.put<uint8_t>(static_cast<uint8_t>(code));
  w.put_string(message);
  w.put_string(where);
  return w.take();
}

std::string exhausted_reply(uint64_t id) {
  ByteWriter w;
  w.put<uint8_t>(static_cast<uint8_t>(ReplyKind::kExhausted));
  w.put<uint64_t>(id);
  return w.take();
}

WorkerReply decode_worker_reply(std::string_view frame, const std::string& who) {
  ReplyReader r(frame, who);
  WorkerReply reply;
  const auto kind = r.get<uint8_t>("the reply kind");
  reply.id = r.get<uint64_t>("the batch id");
  switch (kind) {
    case static_cast<uint8_t>(ReplyKind::kBatch): {
      reply.kind = ReplyKind::kBatch;
      reply.buffer_bytes = r.get<uint64_t>("the buffer size");
      const uint64_t n = r.get_count("tensors", kMinSlotBytes);
      reply.tensors.reserve(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) {
        TensorSlot slot;
        const auto dtype = r.get<int8_t>("a tensor's dtype");
        if (!valid_dtype(dtype)) r.bad("tensor ", i, " has dtype code ", int(dtype), ", which is no ember dtype");
        slot.dtype = static_cast<DType>(dtype);
        const uint64_t ndim = r.get_count("dimensions", sizeof(int64_t));
        slot.sizes.resize(static_cast<size_t>(ndim));
        for (auto& s : slot.sizes) s = r.get<int64_t>("a tensor's shape");
        slot.offset = r.get<uint64_t>("a tensor's offset");
        const uint64_t es = element_size(slot.dtype);
        try {
          slot.nbytes = ember::detail::checked_nbytes(slot.sizes, es, "DataLoader batch tensor");
        } catch (const ValueError& e) {
          r.bad("tensor ", i, " of shape ", slot.sizes, " is not a valid shape (", e.what(), ")");
        }
        if (slot.offset > reply.buffer_bytes || slot.nbytes > reply.buffer_bytes - slot.offset)
          r.bad("tensor ", i, " (", dtype_name(slot.dtype), ", shape ", slot.sizes, ", ", slot.nbytes,
                " bytes at offset ", slot.offset, ") does not lie inside the ", reply.buffer_bytes, "-byte batch buffer");
        if (slot.offset % es != 0)
          r.bad("tensor ", i, " (", dtype_name(slot.dtype), ") is at offset ", slot.offset,
                ", not a multiple of its element size ", es);
        reply.tensors.push_back(std::move(slot));
      }
      reply.meta = r.get_string("the structure bytes");
      break;
    }
    case static_cast<uint8_t>(ReplyKind::kError):
      reply.kind = ReplyKind::kError;
      reply.error_code = static_cast<ErrorCode>(r.get<uint8_t>("the error type"));
      reply.message = r.get_string("the error message");
      reply.where = r.get_string("the error location");
      break;
    case static_cast<uint8_t>(ReplyKind::kExhausted):
      reply.kind = ReplyKind::kExhausted;
      break;
    default:
      r.bad("unknown reply kind ", int(kind), " (expected 1 batch, 2 error or 3 exhausted) for batch ", reply.id);
  }
  r.expect_end();
  return reply;
}

}  // namespace ember::data::detail
