// all_reduce: ring reduce-scatter followed by ring all-gather, chunked and pipelined.
//
// Note [Ring pipeline]
// The tensor is cut into size() chunks (nearly equal; some may be empty) and each chunk into
// nseg segments of at most segment_bytes. Step g = 0 .. 2(n-1)-1: rank r sends chunk
// (r - g) mod n to rank r+1 and receives chunk (r - g - 1) mod n from rank r-1. During the
// first n-1 steps (reduce-scatter) a received segment lands in a one-segment buffer and is
// reduced into place; after them rank r holds the reduced chunk (r + 1) mod n, and in the
// last n-1 steps (all-gather) received segments land in place directly. Item i = g*nseg + k
// is segment k of step g. Send i (for g > 0) forwards what receive i - nseg produced, so it
// waits for exactly that receive: the sender thread streams segments as soon as each is
// reduced while the receiving thread takes in the next, and the kernel's socket buffers
// keep the wire busy while a segment is being reduced. Causality makes the in-place writes
// safe: receive i can only arrive after the peer got our send i - nseg, so memory is never
// overwritten before it was sent. AVG divides each segment by n right after its last
// reduction, before the all-gather sends it. Large tensors run the ring block by block
// (block_bytes each, back to back in one plan): a block's data is still in the cache when
// its all-gather sends what its reduce-scatter just wrote, which halves the memory traffic.
#include <cstring>

#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

namespace {

void all_reduce_one(detail::Context& ctx, const OpInfo& info, Tensor& t, uint32_t part, ReduceOp op) {
  const int n = ctx.size;
  const int r = ctx.rank;
  const int64_t numel = t.numel();
  const int64_t esz = static_cast<int64_t>(t.element_size());
  const DType dtype = t.dtype();
  uint8_t* base = static_cast<uint8_t*>(t.raw_data());
  const int64_t seg_elems = std::max<int64_t>(1, static_cast<int64_t>(ctx.segment_bytes) / esz);
  const int64_t block_elems = std::max<int64_t>(n, static_cast<int64_t>(ctx.block_bytes) / esz);
  const int steps = 2 * (n - 1);
  uint8_t* tmp = ctx.tmp(static_cast<size_t>(seg_elems * esz));

  detail::PipelinePlan plan;
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  plan.header = detail::OpHeader::make(info.type, info.seq, part, dtype, t.nbytes(), -1, op);
  plan.deadline = ctx.deadline();
  struct RecvInfo {
    int64_t begin;     // first element it covers
    bool reduce;       // reduce-scatter: combine tmp into place
    bool last_reduce;  // its final reduction (AVG divides here)
  };
  std::vector<RecvInfo> infos;
  // See Note [Ring pipeline]: the ring runs over one block at a time, the blocks back to back.
  for (int64_t b0 = 0; b0 < numel; b0 += block_elems) {
    const int64_t blen = std::min(block_elems, numel - b0);
    const int64_t max_chunk = (blen + n - 1) / n;
    const int64_t nseg = std::max<int64_t>(1, (max_chunk + seg_elems - 1) / seg_elems);
    const int64_t first = static_cast<int64_t>(plan.recvs.size());  // this block's receive 0
    auto seg_range = [&](int c, int64_t k, int64_t* begin, int64_t* len) {
      const int64_t cb = b0 + detail::part_begin(blen, n, c);
      const int64_t ce = b0 + detail::part_begin(blen, n, c + 1);
      const int64_t b = std::min(ce, cb + k * seg_elems);
      *begin = b;
      *len = std::min(ce, b + seg_elems) - b;
    };
    for (int g = 0; g < steps; ++g) {
      const int send_chunk = ((r - g) % n + n) % n;
      const int recv_chunk = ((r - g - 1) % n + n) % n;
      const bool reducing = g < n - 1;
      for (int64_t k = 0; k < nseg; ++k) {
        int64_t b, len;
        seg_range(send_chunk, k, &b, &len);
        plan.sends.push_back({base + b * esz, static_cast<size_t>(len * esz), g == 0 ? -1 : first + (g - 1) * nseg + k});
        seg_range(recv_chunk, k, &b, &len);
        // All-gather writes in place over what step g+1-n sent from there.
        const int64_t after_send = reducing ? -1 : first + (g + 1 - n) * nseg + k;
        plan.recvs.push_back({reducing ? tmp : base + b * esz, static_cast<size_t>(len * esz), after_send});
        infos.push_back({b, reducing, g == n - 2});
      }
    }
  }
  plan.on_received = [&](size_t i) {
    const RecvInfo& ri = infos[i];
    if (!ri.reduce) return;  // all-gather: already in place
    const int64_t len = static_cast<int64_t>(plan.recvs[i].num_bytes) / esz;
    uint8_t* dst = base + ri.begin * esz;
    parallel::detail::reduce_into(dtype, op, dst, dst, tmp, len);
    if (op == ReduceOp::AVG && ri.last_reduce) parallel::detail::divide_by(dtype, dst, len, n);
  };
  ctx.run(info, plan);
}

}  // namespace

void all_reduce(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  if (ctx.size == 1) return;  // the sum (avg, max, ...) of one value is that value
  for (size_t p = 0; p < tensors.size(); ++p) all_reduce_one(ctx, info, tensors[p], static_cast<uint32_t>(p), op);
}

}  // namespace ember::parallel::tcp
