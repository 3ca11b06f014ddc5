// barrier: a dissemination barrier over the mesh. In round k = 0 .. ceil(log2 n)-1 rank r
// sends a header to rank r + 2^k and waits for one from rank r - 2^k; after the last round
// every rank has (transitively) heard from every other, so all have entered the barrier.
#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

void barrier(detail::Context& ctx, const OpInfo& info) {
  for (int dist = 1, round = 0; dist < ctx.size; dist *= 2, ++round) {
    detail::PipelinePlan plan;
    const int to = ctx.peer_at(dist);
    const int from = ctx.peer_at(-dist);
    plan.send_socket = &ctx.socket(to);
    plan.send_peer = to;
    plan.recv_socket = &ctx.socket(from);
    plan.recv_peer = from;
    plan.header = detail::OpHeader::make(info.type, info.seq, 0, kFloat32, 0, round);
    plan.deadline = ctx.deadline();
    ctx.run(info, plan);
  }
}

}  // namespace ember::parallel::tcp
