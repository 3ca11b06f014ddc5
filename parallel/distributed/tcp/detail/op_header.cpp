#include "parallel/distributed/tcp/detail/op_header.h"

#include <sstream>

namespace ember::parallel::tcp::detail {

OpHeader OpHeader::make(OpType type, uint64_t seq, uint32_t part, DType dtype, uint64_t num_bytes,
                        int root, ReduceOp op) {
  OpHeader h;
  h.op = static_cast<uint8_t>(type);
  h.reduce_op = static_cast<uint8_t>(op);
  h.dtype = static_cast<uint8_t>(dtype);
  h.root = root;
  h.seq = seq;
  h.part = part;
  h.num_bytes = num_bytes;
  return h;
}

bool OpHeader::operator==(const OpHeader& o) const {
  return magic == o.magic && op == o.op && reduce_op == o.reduce_op && dtype == o.dtype &&
         root == o.root && part == o.part && seq == o.seq && num_bytes == o.num_bytes;
}

std::string OpHeader::str() const {
  if (magic != kMagic) return "not an ember tcp header (stream out of sync)";
  std::ostringstream os;
  const auto type = static_cast<OpType>(op);
  os << op_type_name(type) << " #" << seq << " (";
  if (type == OpType::ALL_REDUCE || type == OpType::REDUCE || type == OpType::REDUCE_SCATTER)
    os << reduce_op_name(static_cast<ReduceOp>(reduce_op)) << ", ";
  if (root >= 0) os << (type == OpType::BARRIER ? "round " : "root ") << root << ", ";
  if (part > 0) os << "tensor " << part << ", ";
  os << static_cast<DType>(dtype) << ", " << num_bytes << " bytes)";
  return os.str();
}

}  // namespace ember::parallel::tcp::detail
