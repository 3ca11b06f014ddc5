// The mpi backend's operations, one per file, mirroring tcp/: thin calls of MPI's own
// collectives on the group's communicator. Run on the group's worker thread with the MPI
// lock held (mpi/detail/mpi_types.h); throw DistributedError via EMBER_MPI_CHECK.
#pragma once
#include <algorithm>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/mpi/detail/mpi_types.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel::mpi {

struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
};

void all_reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op);
void broadcast(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root);
void reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op);
void all_gather(const Comm& c, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input);
void reduce_scatter(const Comm& c, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs, ReduceOp op);
void barrier(const Comm& c, const OpInfo& info);
/// Posts one MPI_Isend / MPI_Irecv per tensor (in order, same tag) and returns the requests.
std::vector<MPI_Request> isend(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int dst, int tag);
std::vector<MPI_Request> irecv(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int src, int tag);

/// MPI counts are int: calls over more elements go in pieces of at most this many.
inline constexpr int64_t kMaxCount = int64_t{1} << 30;

/// Calls chunk(data, count) for t's elements in pieces of at most kMaxCount (MPI counts are int):
/// `data` points at the piece's first element.
template <typename F>
void for_each_chunk(Tensor& t, F&& chunk) {
  char* data = static_cast<char*>(t.raw_data());
  for (int64_t begin = 0; begin < t.numel(); begin += kMaxCount)
    chunk(data + begin * static_cast<int64_t>(t.element_size()),
          static_cast<int>(std::min(kMaxCount, t.numel() - begin)));
}

}  // namespace ember::parallel::mpi
