// Shared checks for the process-group tests (tcp ranks as threads, tcp as forked processes,
// mpi under mpirun): each runs one collective on one rank's ProcessGroup with values whose
// result has a closed form, and returns "" or what went wrong (plain strings, so a forked
// child can use them without GoogleTest). Rank r contributes value(r, i) = r + 1 + i % 3 to
// element i: the sum is n(n+1)/2 + n(i % 3), the max n + i % 3, the min 1 + i % 3. Small
// integers, so every dtype (bf16 too) holds every result exactly.
#pragma once
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel::test {

inline constexpr DType kDTypes[] = {kFloat32, kFloat64, kInt64, kBFloat16};
inline constexpr ReduceOp kOps[] = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN, ReduceOp::PRODUCT};
/// 0 elements, fewer elements than ranks, odd sizes, and one that spans many segments.
inline constexpr int64_t kSizes[] = {0, 1, 3, 7, 1001, 100003};

inline double value(int r, int64_t i) { return r + 1 + static_cast<double>(i % 3); }

inline double expected_reduction(ReduceOp op, DType dtype, int n, int64_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i);
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: acc += v; break;
      case ReduceOp::PRODUCT: acc *= v; break;
      case ReduceOp::MAX: acc = std::max(acc, v); break;
      case ReduceOp::MIN: acc = std::min(acc, v); break;
    }
  }
  if (op == ReduceOp::AVG) acc = is_floating_point(dtype) ? acc / n : std::trunc(acc / n);
  return acc;
}

/// Where the checks make their tensors: each rank thread sets its own (nccl: its GPU).
inline thread_local Device t_device = Device::cpu();

/// A 1-D tensor of `dtype` on t_device with element i = f(i).
template <typename F>
Tensor make_tensor_of(DType dtype, int64_t numel, F f) {
  std::vector<double> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[static_cast<size_t>(i)] = f(i);
  Tensor t = native::to(from_vector<double>(v, {numel}), dtype);
  return t_device.is_cpu() ? t : native::to(t, t_device);
}

inline Tensor rank_values(DType dtype, int64_t numel, int r) {
  return make_tensor_of(dtype, numel, [r](int64_t i) { return value(r, i); });
}

/// "" when t[i] == want(i) for all i, else the first difference.
template <typename F>
std::string compare(const std::string& what, const Tensor& t, int64_t numel, F want) {
  if (t.numel() != numel) return what + ": expected " + std::to_string(numel) + " elements, got " + std::to_string(t.numel());
  const std::vector<double> got = t.to_vector<double>();
  for (int64_t i = 0; i < numel; ++i) {
    const double w = want(i);
    if (got[static_cast<size_t>(i)] != w) {
      std::ostringstream os;
      os << what << ": element " << i << " of " << numel << " is " << got[static_cast<size_t>(i)] << ", expected " << w;
      return os.str();
    }
  }
  return "";
}

inline std::string tag(const ProcessGroup& pg, const char* op, DType dtype, int64_t numel) {
  std::ostringstream os;
  os << "rank " << pg.rank() << "/" << pg.size() << " " << op << " " << dtype << " numel " << numel;
  return os.str();
}

inline std::string check_all_reduce(ProcessGroup& pg, DType dtype, int64_t numel, ReduceOp op) {
  Tensor t = rank_values(dtype, numel, pg.rank());
  pg.all_reduce(t, op)->wait();
  std::ostringstream what;
  what << tag(pg, "all_reduce", dtype, numel) << " " << op;
  return compare(what.str(), t, numel, [&](int64_t i) { return expected_reduction(op, dtype, pg.size(), i); });
}

/// Several tensors in one call, each reduced on its own.
inline std::string check_all_reduce_many(ProcessGroup& pg, DType dtype) {
  std::vector<Tensor> ts = {rank_values(dtype, 5, pg.rank()), rank_values(dtype, 0, pg.rank()),
                            rank_values(dtype, 1234, pg.rank())};
  pg.all_reduce(ts, ReduceOp::SUM)->wait();
  for (const auto& t : ts) {
    auto err = compare(tag(pg, "all_reduce(3 tensors)", dtype, t.numel()), t, t.numel(),
                       [&](int64_t i) { return expected_reduction(ReduceOp::SUM, dtype, pg.size(), i); });
    if (!err.empty()) return err;
  }
  return "";
}

inline std::string check_broadcast(ProcessGroup& pg, DType dtype, int64_t numel, int root) {
  Tensor t = rank_values(dtype, numel, pg.rank());
  pg.broadcast(t, root)->wait();
  return compare(tag(pg, "broadcast", dtype, numel) + " root " + std::to_string(root), t, numel,
                 [&](int64_t i) { return value(root, i); });
}

inline std::string check_reduce(ProcessGroup& pg, DType dtype, int64_t numel, int root, ReduceOp op) {
  Tensor t = rank_values(dtype, numel, pg.rank());
  pg.reduce(t, root, op)->wait();
  std::ostringstream what;
  what << tag(pg, "reduce", dtype, numel) << " " << op << " root " << root;
  if (pg.rank() == root)
    return compare(what.str(), t, numel, [&](int64_t i) { return expected_reduction(op, dtype, pg.size(), i); });
  return compare(what.str() + " (non-root keeps its input)", t, numel, [&](int64_t i) { return value(pg.rank(), i); });
}

inline std::string check_all_gather(ProcessGroup& pg, DType dtype, int64_t numel) {
  Tensor in = rank_values(dtype, numel, pg.rank());
  std::vector<Tensor> outs;
  for (int r = 0; r < pg.size(); ++r) outs.push_back(make_tensor_of(dtype, numel, [](int64_t) { return -1.0; }));
  pg.all_gather(outs, in)->wait();
  for (int r = 0; r < pg.size(); ++r) {
    auto err = compare(tag(pg, "all_gather", dtype, numel) + " output " + std::to_string(r), outs[r], numel,
                       [&](int64_t i) { return value(r, i); });
    if (!err.empty()) return err;
  }
  return compare(tag(pg, "all_gather", dtype, numel) + " input unchanged", in, numel,
                 [&](int64_t i) { return value(pg.rank(), i); });
}

inline std::string check_reduce_scatter(ProcessGroup& pg, DType dtype, int64_t numel, ReduceOp op) {
  // inputs[c] on rank r holds value(r, i + c): output on rank r is the reduction of value(., i + r).
  const int n = pg.size();
  std::vector<Tensor> ins;
  for (int c = 0; c < n; ++c)
    ins.push_back(make_tensor_of(dtype, numel, [&](int64_t i) { return value(pg.rank(), i + c); }));
  Tensor out = make_tensor_of(dtype, numel, [](int64_t) { return -1.0; });
  pg.reduce_scatter(out, ins, op)->wait();
  std::ostringstream what;
  what << tag(pg, "reduce_scatter", dtype, numel) << " " << op;
  auto err = compare(what.str(), out, numel,
                     [&](int64_t i) { return expected_reduction(op, dtype, n, i + pg.rank()); });
  if (!err.empty()) return err;
  for (int c = 0; c < n; ++c) {
    err = compare(what.str() + " input " + std::to_string(c) + " unchanged", ins[c], numel,
                  [&](int64_t i) { return value(pg.rank(), i + c); });
    if (!err.empty()) return err;
  }
  return "";
}

/// Every rank sends to the next and receives from the previous one, all posted before any
/// wait (so a backend that blocks a send until its recv is posted would deadlock).
inline std::string check_send_recv(ProcessGroup& pg, DType dtype, int64_t numel) {
  const int n = pg.size();
  if (n == 1) return "";
  const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
  Tensor out = rank_values(dtype, numel, pg.rank());
  Tensor in = make_tensor_of(dtype, numel, [](int64_t) { return -1.0; });
  auto s = pg.send(out, next, 7);
  auto r = pg.recv(in, prev, 7);
  s->wait();
  r->wait();
  return compare(tag(pg, "send/recv", dtype, numel), in, numel, [&](int64_t i) { return value(prev, i); });
}

/// The whole table on one rank; every rank must call it (same order on all).
inline std::string run_all_checks(ProcessGroup& pg, bool quick = false) {
  std::string err;
  auto keep = [&](std::string e) {
    if (err.empty() && !e.empty()) err = std::move(e);
  };
  for (DType dtype : kDTypes) {
    for (int64_t numel : kSizes) {
      if (quick && numel > 1001) continue;
      for (ReduceOp op : kOps) {
        keep(check_all_reduce(pg, dtype, numel, op));
        keep(check_reduce(pg, dtype, numel, (pg.size() - 1) / 2, op));
        keep(check_reduce_scatter(pg, dtype, numel, op));
      }
      for (int root = 0; root < pg.size(); ++root) keep(check_broadcast(pg, dtype, numel, root));
      keep(check_all_gather(pg, dtype, numel));
      keep(check_send_recv(pg, dtype, numel));
    }
    keep(check_all_reduce_many(pg, dtype));
    pg.barrier()->wait();
  }
  return err;
}

}  // namespace ember::parallel::test
