// reduce_scatter: the reduce-scatter half of the ring in Note [Ring pipeline]
// (all_reduce.cpp), with chunk c = inputs[c], which stay unmodified. In step g = 0 .. n-2
// rank r sends the partial result of chunk (r - g - 1) mod n (its own input at g = 0) and
// receives the partial result of chunk (r - g - 2) mod n, combining it with its own
// inputs[that chunk] into one of two alternating scratch buffers, or, at the last step
// (chunk r), into output. Two buffers suffice: step g+2 overwrites step g's partial only
// after the peer received it in step g+1 (the ring's causality).
#include <cstring>

#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

void reduce_scatter(detail::Context& ctx, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs,
                    ReduceOp op) {
  const int n = ctx.size;
  const int r = ctx.rank;
  const size_t nbytes = output.nbytes();
  const DType dtype = output.dtype();
  const size_t esz = output.element_size();
  if (n == 1) {
    if (nbytes > 0 && output.raw_data() != inputs[0].raw_data())
      std::memmove(output.raw_data(), inputs[0].raw_data(), nbytes);
    return;
  }
  const size_t seg = std::max<size_t>(ctx.segment_bytes / esz, 1) * esz;
  const size_t nseg = std::max<size_t>(1, (nbytes + seg - 1) / seg);
  uint8_t* tmp = ctx.tmp(seg);
  uint8_t* partial[2] = {ctx.scratch(2 * nbytes), nullptr};
  partial[1] = partial[0] + nbytes;
  auto chunk_of = [&](int g) { return ((r - g - 2) % n + n) % n; };  // received at step g
  auto dst_of = [&](int g) { return g == n - 2 ? static_cast<uint8_t*>(output.raw_data()) : partial[g % 2]; };

  detail::PipelinePlan plan;
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  plan.header = detail::OpHeader::make(info.type, info.seq, 0, dtype, nbytes, -1, op);
  plan.deadline = ctx.deadline();
  for (int g = 0; g < n - 1; ++g) {
    const uint8_t* send_base =
        g == 0 ? static_cast<const uint8_t*>(inputs[((r - 1) % n + n) % n].raw_data()) : dst_of(g - 1);
    for (size_t k = 0; k < nseg; ++k) {
      const size_t b = std::min(nbytes, k * seg);
      const size_t len = std::min(nbytes, b + seg) - b;
      const int64_t i = g * static_cast<int64_t>(nseg) + static_cast<int64_t>(k);
      plan.sends.push_back({send_base + b, len, g == 0 ? -1 : i - static_cast<int64_t>(nseg)});
      // Step g combines into the buffer that step g-1 sent from (two steps back it was written).
      plan.recvs.push_back({tmp, len, g >= 2 ? i - static_cast<int64_t>(nseg) : -1});
    }
  }
  plan.on_received = [&](size_t i) {
    const int g = static_cast<int>(i / nseg);
    const size_t b = std::min(nbytes, (i % nseg) * seg);
    const int64_t len = static_cast<int64_t>(plan.recvs[i].num_bytes / esz);
    uint8_t* dst = dst_of(g) + b;
    const uint8_t* own = static_cast<const uint8_t*>(inputs[chunk_of(g)].raw_data()) + b;
    parallel::detail::reduce_into(dtype, op, dst, own, tmp, len);
    if (op == ReduceOp::AVG && g == n - 2) parallel::detail::divide_by(dtype, dst, len, n);
  };
  ctx.run(info, plan);
}

}  // namespace ember::parallel::tcp
