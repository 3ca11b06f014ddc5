// all_gather: the all-gather half of the ring in Note [Ring pipeline] (all_reduce.cpp).
// Rank r copies its input to outputs[r]; in step g = 0 .. n-2 it sends outputs[(r - g) mod n]
// to rank r+1 and receives outputs[(r - g - 1) mod n] in place from rank r-1, segment by
// segment, forwarding each segment as soon as it arrived.
#include <cstring>

#include "parallel/distributed/tcp/collectives.h"

namespace ember::parallel::tcp {

void all_gather(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input) {
  const int n = ctx.size;
  const int r = ctx.rank;
  const size_t nbytes = input.nbytes();
  if (nbytes > 0 && outputs[r].raw_data() != input.raw_data())
    std::memmove(outputs[r].raw_data(), input.raw_data(), nbytes);
  if (n == 1) return;
  const size_t esz = input.element_size();
  const size_t seg = std::max<size_t>(ctx.segment_bytes / esz, 1) * esz;
  const size_t nseg = std::max<size_t>(1, (nbytes + seg - 1) / seg);

  detail::PipelinePlan plan;
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  plan.header = detail::OpHeader::make(info.type, info.seq, 0, input.dtype(), nbytes);
  plan.deadline = ctx.deadline();
  for (int g = 0; g < n - 1; ++g) {
    uint8_t* send_base = static_cast<uint8_t*>(outputs[((r - g) % n + n) % n].raw_data());
    uint8_t* recv_base = static_cast<uint8_t*>(outputs[((r - g - 1) % n + n) % n].raw_data());
    for (size_t k = 0; k < nseg; ++k) {
      const size_t b = std::min(nbytes, k * seg);
      const size_t len = std::min(nbytes, b + seg) - b;
      const int64_t i = g * static_cast<int64_t>(nseg) + static_cast<int64_t>(k);
      plan.sends.push_back({send_base + b, len, g == 0 ? -1 : i - static_cast<int64_t>(nseg)});
      plan.recvs.push_back({recv_base + b, len});
    }
  }
  ctx.run(info, plan);
}

}  // namespace ember::parallel::tcp
