// The parent's check of a DataLoader worker's reply (data/detail/worker_reply.h, Note
// [Checking worker replies]): what a worker writes decodes to the same slots, and each kind of
// forged reply (counts, shapes, offsets and sizes that overflow or point past the batch buffer)
// is a ValueError naming the worker and what arrived, before anything is sized from it.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "data/batch_codec.h"
#include "data/detail/wire.h"
#include "data/detail/worker_reply.h"
#include "tests/support/error_text.h"

namespace ember::data::detail {
namespace {

using ::testing::HasSubstr;
using support::error_of;

const std::string kWho = "DataLoader worker 1 (pid 42)";

struct Slot {
  int8_t dtype;
  std::vector<int64_t> sizes;
  uint64_t offset;
};

// A kBatch reply written field by field, so that any field can lie.
std::string forged_batch(uint64_t buffer_bytes, const std::vector<Slot>& slots, const std::string& meta = "",
                         uint64_t count_override = 0) {
  ByteWriter w;
  w.put<uint8_t>(1);
  w.put<uint64_t>(7);  // batch id
  w.put<uint64_t>(buffer_bytes);
  w.put<uint64_t>(count_override ? count_override : slots.size());
  for (const Slot& s : slots) {
    w.put<int8_t>(s.dtype);
    w.put<uint64_t>(s.sizes.size());
    for (int64_t d : s.sizes) w.put<int64_t>(d);
    w.put<uint64_t>(s.offset);
  }
  w.put_string(meta);
  return w.take();
}

const int8_t kI64 = static_cast<int8_t>(kInt64);
const int8_t kF32 = static_cast<int8_t>(kFloat32);

TEST(WorkerReply, WhatAWorkerWritesDecodesToTheSameSlots) {
  std::vector<Tensor> tensors{zeros({3, 5}), zeros({0, 2}, TensorOptions(kInt64)), zeros({4}, TensorOptions(kInt64))};
  std::string frame = batch_reply(9, 192, tensors, {0, 64, 64}, "meta!");
  WorkerReply r = decode_worker_reply(frame, kWho);
  EXPECT_EQ(r.kind, ReplyKind::kBatch);
  EXPECT_EQ(r.id, 9u);
  EXPECT_EQ(r.buffer_bytes, 192u);
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_EQ(r.tensors[0].dtype, kFloat32);
  EXPECT_EQ(r.tensors[0].sizes, (IntList{3, 5}));
  EXPECT_EQ(r.tensors[0].nbytes, 60u);
  EXPECT_EQ(r.tensors[1].nbytes, 0u);
  EXPECT_EQ(r.tensors[2].offset, 64u);
  EXPECT_EQ(r.tensors[2].nbytes, 32u);
  EXPECT_EQ(r.meta, "meta!");

  WorkerReply e = decode_worker_reply(error_reply(3, ErrorCode::kIndex, "no such sample", "data/x.cpp:7:get"), kWho);
  EXPECT_EQ(e.kind, ReplyKind::kError);
  EXPECT_EQ(e.error_code, ErrorCode::kIndex);
  EXPECT_EQ(e.message, "no such sample");
  EXPECT_EQ(e.where, "data/x.cpp:7:get");
  EXPECT_EQ(decode_worker_reply(exhausted_reply(4), kWho).kind, ReplyKind::kExhausted);
}

// The bug: the parent built tensors from whatever sizes and offsets a worker sent, so a worker
// whose byte count n * 8 overflowed (or that lied) produced a tensor viewing far past the mapped
// buffer. Each of these once reached from_blob.
TEST(WorkerReply, TensorWhoseByteCountOverflowsIsValueErrorNamingTheWorker) {
  // 2^61 int64 elements are 2^64 bytes: n * 8 wraps to 0 and "fits" any buffer.
  EXPECT_THAT(error_of<ValueError>([] { decode_worker_reply(forged_batch(4096, {{kI64, {int64_t{1} << 61}, 0}}), kWho); }),
              HasSubstr("DataLoader worker 1 (pid 42) sent a bad reply: tensor 0 of shape [2305843009213693952] is "
                        "not a valid shape"));
  EXPECT_THROW(decode_worker_reply(forged_batch(4096, {{kF32, {int64_t{1} << 40, int64_t{1} << 40}, 0}}), kWho),
               ValueError);
  EXPECT_THROW(decode_worker_reply(forged_batch(4096, {{kF32, {4, -1}, 0}}), kWho), ValueError);
}

TEST(WorkerReply, TensorPastTheBufferIsValueError) {
  EXPECT_THAT(error_of<ValueError>([] { decode_worker_reply(forged_batch(4096, {{kI64, {1024}, 0}}), kWho); }),
              HasSubstr("DataLoader worker 1 (pid 42) sent a bad reply: tensor 0 (int64, shape [1024], 8192 bytes at "
                        "offset 0) does not lie inside the 4096-byte batch buffer"));
  // offset + nbytes wraps around 2^64: checked without the addition.
  EXPECT_THROW(decode_worker_reply(forged_batch(4096, {{kI64, {2}, ~uint64_t{0} - 7}}), kWho), ValueError);
  EXPECT_THROW(decode_worker_reply(forged_batch(4096, {{kI64, {2}, 4096}}), kWho), ValueError);
  EXPECT_THROW(decode_worker_reply(forged_batch(0, {{kI64, {1}, 0}}), kWho), ValueError);  // no buffer at all
  // Exactly filling the buffer is fine; so is an empty tensor at its end.
  EXPECT_NO_THROW(decode_worker_reply(forged_batch(4096, {{kI64, {8}, 4032}, {kI64, {0}, 4096}}), kWho));
}

TEST(WorkerReply, MisalignedTensorIsValueError) {
  EXPECT_THAT(error_of<ValueError>([] { decode_worker_reply(forged_batch(4096, {{kI64, {2}, 4}}), kWho); }),
              HasSubstr("is at offset 4, not a multiple of its element size 8"));
}

TEST(WorkerReply, CountsLargerThanTheFrameAreRefusedBeforeAnyAllocation) {
  // 2^60 tensors, or a tensor of 2^60 dimensions, in a frame of a few dozen bytes.
  EXPECT_THAT(error_of<ValueError>([] { decode_worker_reply(forged_batch(0, {}, "", uint64_t{1} << 60), kWho); }),
              HasSubstr("announces 1152921504606846976 tensors but only 8 bytes of the 33-byte frame are left"));
  ByteWriter w;
  w.put<uint8_t>(1);
  w.put<uint64_t>(7);
  w.put<uint64_t>(64);
  w.put<uint64_t>(1);
  w.put<int8_t>(kF32);
  w.put<uint64_t>(uint64_t{1} << 60);  // ndim
  w.put<uint64_t>(0);
  w.put<uint64_t>(0);
  EXPECT_THAT(error_of<ValueError>([&] { decode_worker_reply(w.bytes(), kWho); }), HasSubstr("announces 1152921504606846976 dimensions"));
}

TEST(WorkerReply, MalformedFramesAreValueError) {
  const std::string good = forged_batch(64, {{kI64, {2}, 0}}, "m");
  for (size_t cut = 0; cut < good.size(); ++cut) {  // every truncation
    EXPECT_THROW(decode_worker_reply(good.substr(0, cut), kWho), ValueError) << "cut at " << cut;
  }
  EXPECT_THAT(error_of<ValueError>([&] { decode_worker_reply(good + "x", kWho); }), HasSubstr("1 unexpected bytes after the last field"));
  EXPECT_THAT(error_of<ValueError>([] { decode_worker_reply(forged_batch(64, {{99, {2}, 0}}), kWho); }),
              HasSubstr("tensor 0 has dtype code 99, which is no ember dtype"));
  std::string unknown = exhausted_reply(5);
  unknown[0] = 9;
  EXPECT_THAT(error_of<ValueError>([&] { decode_worker_reply(unknown, kWho); }), HasSubstr("unknown reply kind 9"));
}

// The structure bytes come from the worker too: a vector count of 2^60 once reserved 2^60
// elements (std::bad_alloc, or an abort under ASan) before reading any of them.
TEST(BatchCodec, VectorCountLargerThanTheStructureBytesIsAnErrorNotAnAllocation) {
  ByteWriter meta;
  meta.put<uint64_t>(uint64_t{1} << 60);
  meta.put<int64_t>(1);
  EXPECT_THROW(decode_batch<std::vector<int64_t>>({}, meta.bytes()), Error);
  ByteWriter tensors_meta;
  tensors_meta.put<uint64_t>(2);
  tensors_meta.put<uint8_t>(1);
  tensors_meta.put<uint8_t>(1);
  EXPECT_THAT(error_of<ValueError>([&] { decode_batch<std::vector<Tensor>>({zeros({1})}, tensors_meta.bytes()); }),
              HasSubstr("ask for more than the 1 tensors that arrived"));
}

}  // namespace
}  // namespace ember::data::detail
