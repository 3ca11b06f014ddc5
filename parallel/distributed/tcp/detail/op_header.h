// OpHeader: the 32 bytes a rank sends each peer it talks to at the start of a collective, so
// that ranks which called different collectives (or the same one with other sizes, dtypes
// or roots) get a DistributedError saying so instead of garbage or a hang. Value type.
#pragma once
#include <cstdint>
#include <string>

#include "parallel/distributed/process_group.h"

namespace ember::parallel::tcp::detail {

struct OpHeader {
  static constexpr uint32_t kMagic = 0x454d4252;  // "EMBR"
  uint32_t magic = kMagic;
  uint8_t op = 0;         // OpType
  uint8_t reduce_op = 0;  // ReduceOp (0 when none)
  uint8_t dtype = 0;      // DType
  uint8_t reserved = 0;
  int32_t root = -1;       // broadcast/reduce root; barrier round
  uint32_t part = 0;       // which tensor of the call
  uint64_t seq = 0;
  uint64_t num_bytes = 0;  // per rank, as the caller's tensors

  static OpHeader make(OpType type, uint64_t seq, uint32_t part, DType dtype, uint64_t num_bytes,
                       int root = -1, ReduceOp op = ReduceOp::SUM);
  bool operator==(const OpHeader& o) const;
  /// "all_reduce #3 (sum, float32, 4096 bytes)", for mismatch messages.
  std::string str() const;
};
static_assert(sizeof(OpHeader) == 32, "OpHeader is a wire format");

}  // namespace ember::parallel::tcp::detail
