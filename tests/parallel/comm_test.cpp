// parallel::comm: broadcast, scatter, gather, reduce_add and the coalesced forms across CPU
// logical devices (cpu:0, cpu:1, cpu:2), checked against closed-form values.
#include "parallel/comm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

Tensor iota(const IntList& sizes, Device device = Device::cpu(0), DType dtype = kFloat32) {
  return native::to(native::reshape(arange(numel_of(sizes), TensorOptions(kInt64)), sizes), device, dtype);
}

void expect_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(native::to(a, Device::cpu(0), kFloat64).to_vector<double>(),
            native::to(b, Device::cpu(0), kFloat64).to_vector<double>());
}

TEST(Comm, BroadcastCopiesToEveryDeviceAndAliasesTheSource) {
  Tensor t = iota({3, 4}, Device::cpu(1));
  auto out = comm::broadcast(t, cpus(3));
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].device(), Device::cpu(i));
    expect_equal(out[i], t);
  }
  EXPECT_TRUE(out[1].is_same(t));
  EXPECT_NE(out[0].raw_data(), t.raw_data());
}

TEST(Comm, BroadcastCoalescedKeepsOrderAcrossDtypesAndBuckets) {
  std::vector<Tensor> ts = {iota({2, 3}), iota({5}, Device::cpu(0), kInt64), iota({0, 4}), iota({4, 4}, Device::cpu(0), kFloat64),
                            iota({7})};
  for (size_t buffer : {size_t{16}, size_t{64}, comm::kDefaultBufferBytes}) {
    auto out = comm::broadcast_coalesced(ts, cpus(3), buffer);
    ASSERT_EQ(out.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(out[i].size(), ts.size());
      for (size_t j = 0; j < ts.size(); ++j) {
        EXPECT_EQ(out[i][j].device(), Device::cpu(i)) << "buffer " << buffer << " tensor " << j;
        expect_equal(out[i][j], ts[j]);
      }
    }
    for (size_t j = 0; j < ts.size(); ++j) EXPECT_TRUE(out[0][j].is_same(ts[j]));
  }
}

TEST(Comm, BroadcastCoalescedRejectsMixedSourceDevices) {
  std::vector<Tensor> ts = {iota({2}), iota({2}, Device::cpu(1))};
  EXPECT_THROW(comm::broadcast_coalesced(ts, cpus(2)), ValueError);
}

TEST(Comm, ReduceAddSumsOnTheDestination) {
  // Replica i holds i + 1 everywhere: the sum over n replicas is n (n + 1) / 2.
  for (int n : {1, 2, 3}) {
    std::vector<Tensor> in;
    for (int i = 0; i < n; ++i) in.push_back(full({3, 2}, i + 1, TensorOptions().device(Device::cpu(i))));
    Tensor s = comm::reduce_add(in, Device::cpu(n - 1));
    EXPECT_EQ(s.device(), Device::cpu(n - 1));
    for (double v : s.to_vector<double>()) EXPECT_EQ(v, n * (n + 1) / 2);
    EXPECT_FALSE(s.is_same(in[0]));
  }
  EXPECT_THROW(comm::reduce_add({zeros({2}), zeros({3}, TensorOptions().device(Device::cpu(1)))}), ValueError);
}

TEST(Comm, ReduceAddCoalescedMatchesReduceAddPerTensor) {
  std::vector<std::vector<Tensor>> in(3);
  for (int i = 0; i < 3; ++i) {
    TensorOptions o = TensorOptions().device(Device::cpu(i));
    in[i] = {randn({4, 5}, o), randn({3}, o.dtype(kFloat64)), full({2, 2}, i, o.dtype(kInt64)), randn({0}, o), randn({6}, o)};
  }
  for (size_t buffer : {size_t{8}, size_t{48}, comm::kDefaultBufferBytes}) {
    auto out = comm::reduce_add_coalesced(in, Device::cpu(0), buffer);
    ASSERT_EQ(out.size(), in[0].size());
    for (size_t j = 0; j < out.size(); ++j) {
      EXPECT_EQ(out[j].device(), Device::cpu(0));
      expect_equal(out[j], comm::reduce_add({in[0][j], in[1][j], in[2][j]}, Device::cpu(0)));
    }
  }
}

TEST(Comm, ChunkSizesFollowTorchChunk) {
  EXPECT_EQ(comm::chunk_sizes_for(6, 3), (IntList{2, 2, 2}));
  EXPECT_EQ(comm::chunk_sizes_for(7, 3), (IntList{3, 3, 1}));
  EXPECT_EQ(comm::chunk_sizes_for(5, 4), (IntList{2, 2, 1}));  // torch.chunk: 3 chunks for 4 devices
  EXPECT_EQ(comm::chunk_sizes_for(2, 3), (IntList{1, 1}));
  EXPECT_EQ(comm::chunk_sizes_for(0, 3), (IntList{0}));
}

TEST(Comm, ScatterSplitsAlongDimAndPlacesChunks) {
  Tensor t = iota({4, 7, 2});
  auto out = comm::scatter(t, cpus(3), std::nullopt, 1);
  ASSERT_EQ(out.size(), 3u);
  int64_t off = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].device(), Device::cpu(i));
    expect_equal(out[i], native::narrow(t, 1, off, out[i].size(1)));
    off += out[i].size(1);
  }
  EXPECT_EQ(out[2].size(1), 1);
  auto explicit_sizes = comm::scatter(t, cpus(3), IntList{1, 3, 3}, 1);
  EXPECT_EQ(explicit_sizes[0].size(1), 1);
  EXPECT_EQ(explicit_sizes[2].size(1), 3);
  EXPECT_THROW(comm::scatter(t, cpus(3), IntList{1, 1}, 1), ValueError);
  EXPECT_THROW(comm::scatter(t, cpus(2), IntList{1, 3, 3}, 1), ValueError);
  EXPECT_THROW(comm::scatter(scalar_tensor(1.0), cpus(2)), IndexError);
}

TEST(Comm, GatherConcatenatesOnTheDestination) {
  Tensor t = iota({3, 5, 2});
  auto parts = comm::scatter(t, cpus(3), IntList{2, 0, 3}, 1);
  Tensor g = comm::gather(parts, 1, Device::cpu(2));
  EXPECT_EQ(g.device(), Device::cpu(2));
  expect_equal(g, t);
  expect_equal(comm::gather(comm::scatter(t, cpus(2)), 0), t);
}

TEST(Comm, GatherOfUnequalLengthsNamesTotalLength) {
  std::vector<Tensor> outs = {zeros({10, 2, 8}), zeros({7, 2, 8}, TensorOptions().device(Device::cpu(1)))};
  const std::string msg = support::error_of<ValueError>([&] { comm::gather(outs, 1, Device::cpu(0)); });
  EXPECT_NE(msg.find("gather: outputs of replicas have different sizes in dimension 0 ([10, 2, 8] on cpu:0 vs "
                     "[7, 2, 8] on cpu:1)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("pass total_length=<padded input length> to pad_packed_sequence"), std::string::npos) << msg;
  EXPECT_NO_THROW(comm::gather(outs, 0, Device::cpu(0)));  // along the differing dim it is fine
  EXPECT_THROW(comm::gather({zeros({2, 2}), zeros({2, 2, 1})}, 0), ValueError);
  EXPECT_THROW(comm::gather({zeros({2}), zeros({2}, TensorOptions(kInt64))}, 0), TypeError);
}

TEST(CommCuda, CopiesBetweenCudaAndCpuDevices) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA device: the CUDA copy paths are not exercised";
  std::vector<Device> devs{Device::cuda(0), Device::cpu(1)};
  Tensor t = iota({4, 3});
  auto b = comm::broadcast(t, devs);
  EXPECT_EQ(b[0].device(), Device::cuda(0));
  expect_equal(b[0], t);
  auto bc = comm::broadcast_coalesced({t, iota({5}, Device::cpu(0), kInt64)}, devs, 16);
  expect_equal(bc[0][1], iota({5}, Device::cpu(0), kInt64));
  auto parts = comm::scatter(t, devs, std::nullopt, 1);
  EXPECT_EQ(parts[0].device(), Device::cuda(0));
  expect_equal(comm::gather(parts, 1, Device::cuda(0)), t);
  expect_equal(comm::reduce_add({b[0], t}, Device::cuda(0)), native::mul(t, 2.0));
}

}  // namespace
}  // namespace ember::parallel
