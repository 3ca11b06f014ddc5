#include "parallel/ft/state_transfer.h"

#include <cstring>

#include "core/error.h"
#include "core/ops/factory.h"

namespace ember::parallel::ft {

namespace {

constexpr DType kDTypes[] = {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kFloat16};

// The header: length-prefixed strings and integers in one byte buffer.
class Writer {
 public:
  void u64(uint64_t v) { append(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    append(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t u64() {
    uint64_t v;
    take(&v, sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    EMBER_CHECK_T(DistributedError, n <= n_ - at_, "ft: a malformed state header (a string of ", n,
                  " bytes with ", n_ - at_, " left)");
    std::string s(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n;
    return s;
  }

 private:
  void take(void* out, size_t n) {
    EMBER_CHECK_T(DistributedError, n <= n_ - at_, "ft: a malformed state header (truncated)");
    std::memcpy(out, p_ + at_, n);
    at_ += n;
  }
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

DType dtype_named(const std::string& name) {
  for (DType t : kDTypes)
    if (name == dtype_name(t)) return t;
  EMBER_THROW(DistributedError, "ft: the state holds a tensor of dtype '", name, "', which cannot be sent");
}

}  // namespace

int64_t send_state(ProcessGroup& group, const StateDict& state, int dst) {
  Writer w;
  w.u64(state.metadata.size());
  for (const auto& [k, v] : state.metadata) {
    w.str(k);
    w.str(v);
  }
  std::vector<Tensor> tensors;
  w.u64(state.tensors.size());
  int64_t bytes = 0;
  for (const auto& [name, t] : state.tensors) {
    EMBER_CHECK_T(ValueError, t.device().is_cpu(), "ft: state tensor '", name, "' is on ", t.device(),
                  "; hand the manager CPU tensors");
    dtype_named(dtype_name(t.dtype()));
    w.str(name);
    w.str(dtype_name(t.dtype()));
    w.u64(static_cast<uint64_t>(t.dim()));
    for (int64_t s : t.sizes()) w.u64(static_cast<uint64_t>(s));
    tensors.push_back(t.detach().contiguous());
    bytes += static_cast<int64_t>(t.nbytes());
  }
  std::vector<uint8_t>& header = w.bytes();
  const int64_t words = static_cast<int64_t>((header.size() + 7) / 8);
  Tensor head = zeros({words}, kInt64);
  std::memcpy(head.raw_data(), header.data(), header.size());
  group.send(from_vector(std::vector<int64_t>{static_cast<int64_t>(header.size())}, {1}), dst, kStateTag)->wait();
  group.send(head, dst, kStateTag)->wait();
  if (!tensors.empty()) group.send(tensors, dst, kStateTag)->wait();
  return bytes + static_cast<int64_t>(header.size());
}

StateDict recv_state(ProcessGroup& group, int src) {
  Tensor len = zeros({1}, kInt64);
  group.recv(len, src, kStateTag)->wait();
  const int64_t n = len.to_vector<int64_t>()[0];
  EMBER_CHECK_T(DistributedError, n >= 0 && n < (int64_t{1} << 32), "ft: a state header of ", n, " bytes");
  Tensor head = zeros({(n + 7) / 8}, kInt64);
  group.recv(head, src, kStateTag)->wait();
  Reader r(static_cast<const uint8_t*>(head.raw_data()), static_cast<size_t>(n));
  StateDict out;
  const uint64_t entries = r.u64();
  for (uint64_t i = 0; i < entries; ++i) {
    std::string k = r.str();
    out.metadata[k] = r.str();
  }
  const uint64_t count = r.u64();
  std::vector<Tensor> tensors;
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = r.str();
    const DType dtype = dtype_named(r.str());
    const uint64_t dim = r.u64();
    std::vector<int64_t> sizes;
    for (uint64_t d = 0; d < dim; ++d) sizes.push_back(static_cast<int64_t>(r.u64()));
    Tensor t = empty(sizes, dtype);
    tensors.push_back(t);
    out.tensors.emplace_back(std::move(name), t);
  }
  if (!tensors.empty()) group.recv(tensors, src, kStateTag)->wait();
  return out;
}

}  // namespace ember::parallel::ft
