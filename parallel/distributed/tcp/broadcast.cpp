// broadcast: a pipelined chain root -> root+1 -> ... -> root-1 over the ring connections.
// Every rank but the root receives each segment in place and (unless it is the chain's
// last) forwards it as soon as it arrived, so all links carry data at once and the time is
// about bytes / bandwidth plus (n-2) segments. See Note [Ring pipeline] in all_reduce.cpp.
#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

namespace {

void broadcast_one(detail::Context& ctx, const OpInfo& info, Tensor& t, uint32_t part, int root) {
  const int n = ctx.size;
  const int pos = ((ctx.rank - root) % n + n) % n;  // 0 = root, n-1 = last of the chain
  uint8_t* base = static_cast<uint8_t*>(t.raw_data());
  const size_t nbytes = t.nbytes();
  const size_t seg = std::max<size_t>(ctx.segment_bytes / t.element_size(), 1) * t.element_size();
  const size_t nseg = std::max<size_t>(1, (nbytes + seg - 1) / seg);

  detail::PipelinePlan plan;
  plan.header = detail::OpHeader::make(info.type, info.seq, part, t.dtype(), nbytes, root);
  plan.deadline = ctx.deadline();
  // Note [Rooted headers]: every rank sends its header to the next and reads the previous
  // one's, the chain's ends included, so the check covers the whole ring: if any two ranks'
  // roots (or sizes, dtypes, ops) differ, some neighbours differ and fail. With headers only
  // along the chain, ranks that each believed themselves the root would all send, none would
  // receive, and all would return. And the chain's end acknowledges to its start (8 bytes,
  // the operation's number) once it has everything, so the start completes only when the
  // whole chain did: a rank that failed (and shut its connections down) fails every rank's
  // call, the root's included, instead of leaving the root believing it succeeded.
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  for (size_t k = 0; k < nseg; ++k) {
    const size_t b = std::min(nbytes, k * seg);
    const size_t len = std::min(nbytes, b + seg) - b;
    if (pos > 0) plan.recvs.push_back({base + b, len});
    if (pos < n - 1) plan.sends.push_back({base + b, len, pos == 0 ? -1 : static_cast<int64_t>(k)});
  }
  detail::ChainAck ack(info.seq);
  ack.add_to(plan, /*is_start=*/pos == 0, /*is_end=*/pos == n - 1, nseg);
  if (pos == 0) plan.on_received = [&](size_t) { ack.check(plan.recv_peer); };
  ctx.run(info, plan);
}

}  // namespace

void broadcast(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, int root) {
  if (ctx.size == 1) return;
  for (size_t p = 0; p < tensors.size(); ++p) broadcast_one(ctx, info, tensors[p], static_cast<uint32_t>(p), root);
}

}  // namespace ember::parallel::tcp
