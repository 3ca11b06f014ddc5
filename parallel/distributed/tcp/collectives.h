// The tcp backend's collective algorithms, one per file (all_reduce.cpp, broadcast.cpp, ...),
// as Gloo lays them out. Each runs on the group's collective worker thread, on tensors the
// ProcessGroup base class already checked (contiguous CPU tensors of a reducible dtype),
// and throws DistributedError (the group is broken then) when a peer fails.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/tcp/detail/context.h"

namespace ember::parallel::tcp {

void all_reduce(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op);
/// The tensors (one dtype) reduced as one flat tensor (ProcessGroup::all_reduce_coalesced).
void all_reduce_coalesced(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op);
void broadcast(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, int root);
void reduce(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op);
void all_gather(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input);
void reduce_scatter(detail::Context& ctx, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs,
                    ReduceOp op);
void barrier(detail::Context& ctx, const OpInfo& info);

}  // namespace ember::parallel::tcp
