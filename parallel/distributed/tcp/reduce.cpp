// reduce: a pipelined chain root+1 -> root+2 -> ... -> root. Each rank on the way receives
// a segment of the partial result, combines it with its own values into scratch memory and
// forwards that; the root combines into its tensor. Non-root tensors are left unchanged.
// See Note [Ring pipeline] in all_reduce.cpp.
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

namespace {

void reduce_one(detail::Context& ctx, const OpInfo& info, Tensor& t, uint32_t part, int root, ReduceOp op) {
  const int n = ctx.size;
  const int pos = ((ctx.rank - root - 1) % n + n) % n;  // 0 starts the chain, n-1 = root
  const DType dtype = t.dtype();
  const size_t esz = t.element_size();
  uint8_t* base = static_cast<uint8_t*>(t.raw_data());
  const size_t nbytes = t.nbytes();
  const size_t seg = std::max<size_t>(ctx.segment_bytes / esz, 1) * esz;
  const size_t nseg = std::max<size_t>(1, (nbytes + seg - 1) / seg);
  const bool first = pos == 0;
  const bool is_root = pos == n - 1;
  uint8_t* tmp = ctx.tmp(seg);
  uint8_t* partial = (first || is_root) ? nullptr : ctx.scratch(nbytes);

  detail::PipelinePlan plan;
  plan.header = detail::OpHeader::make(info.type, info.seq, part, dtype, nbytes, root, op);
  plan.deadline = ctx.deadline();
  // The chain's ends exchange headers too, and the root acknowledges to the chain's start
  // (Note [Rooted headers] in broadcast.cpp), so mismatched roots fail on every rank instead of
  // timing out, or of returning on the ranks that only send.
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  std::vector<size_t> offsets;
  for (size_t k = 0; k < nseg; ++k) {
    const size_t b = std::min(nbytes, k * seg);
    const size_t len = std::min(nbytes, b + seg) - b;
    offsets.push_back(b);
    if (!first) plan.recvs.push_back({tmp, len});
    if (!is_root) plan.sends.push_back({(first ? base : partial) + b, len, first ? -1 : static_cast<int64_t>(k)});
  }
  detail::ChainAck ack(info.seq);
  ack.add_to(plan, /*is_start=*/first, /*is_end=*/is_root, nseg);
  plan.on_received = [&](size_t k) {
    if (first) return ack.check(plan.recv_peer);  // the start receives only the root's acknowledgement
    const int64_t len = static_cast<int64_t>(plan.recvs[k].num_bytes / esz);
    uint8_t* own = base + offsets[k];
    uint8_t* dst = is_root ? own : partial + offsets[k];
    parallel::detail::reduce_into(dtype, op, dst, own, tmp, len);
    if (is_root && op == ReduceOp::AVG) parallel::detail::divide_by(dtype, dst, len, n);
  };
  ctx.run(info, plan);
}

}  // namespace

void reduce(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op) {
  if (ctx.size == 1) return;
  for (size_t p = 0; p < tensors.size(); ++p) reduce_one(ctx, info, tensors[p], static_cast<uint32_t>(p), root, op);
}

}  // namespace ember::parallel::tcp
