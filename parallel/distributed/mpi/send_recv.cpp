// send/recv: one MPI_Isend / MPI_Irecv per tensor with the caller's tag. MPI's
// non-overtaking rule keeps a multi-tensor message in order; the worker tests the requests.
#include "core/error.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

namespace {
void check_tag(const OpInfo& info, int tag) {
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  EMBER_CHECK_T(ValueError, tag >= 0 && (!flag || tag <= *ub), info.description, ": MPI tags must be in [0, ",
                flag ? *ub : 32767, "], got ", tag);
}
void check_count(const OpInfo& info, const Tensor& t) {
  EMBER_CHECK_T(ValueError, t.numel() <= kMaxCount, info.description, ": the mpi backend sends at most ",
                kMaxCount, " elements per tensor, got ", t.numel());
}

// Checks the tag, then for each tensor (after checking its count) post(data, count, datatype, &request)
// posts its request.
template <typename Post>
std::vector<MPI_Request> post_each(const OpInfo& info, std::vector<Tensor>& tensors, int tag, Post&& post) {
  check_tag(info, tag);
  std::vector<MPI_Request> reqs;
  for (auto& t : tensors) {
    check_count(info, t);
    MPI_Request req;
    post(t.raw_data(), static_cast<int>(t.numel()), detail::mpi_datatype(t.dtype()), &req);
    reqs.push_back(req);
  }
  return reqs;
}
}  // namespace

std::vector<MPI_Request> isend(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int dst, int tag) {
  return post_each(info, tensors, tag, [&](void* data, int count, MPI_Datatype type, MPI_Request* req) {
    EMBER_MPI_CHECK(MPI_Isend(data, count, type, dst, tag, c.comm, req), info.description);
  });
}

std::vector<MPI_Request> irecv(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int src, int tag) {
  return post_each(info, tensors, tag, [&](void* data, int count, MPI_Datatype type, MPI_Request* req) {
    EMBER_MPI_CHECK(MPI_Irecv(data, count, type, src, tag, c.comm, req), info.description);
  });
}

}  // namespace ember::parallel::mpi
