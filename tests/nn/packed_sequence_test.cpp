// nn::utils::rnn: PackedSequence, pack_padded_sequence, pad_packed_sequence, pad_sequence,
// pack_sequence, invert_permutation — values against hand-built expectations, round trips,
// gradients (float64 gradcheck), and PyTorch's error texts.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <string>
#include <vector>

#include "tests/support/error_text.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/utils/rnn.h"

namespace ember::nn::utils::rnn {
namespace {

using ::testing::HasSubstr;

// x[t, b, f] = 100 t + 10 b + f, so every element names its position.
Tensor positional(int64_t T, int64_t B, int64_t F, DType dtype = kFloat32) {
  std::vector<double> v;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f) v.push_back(static_cast<double>(100 * t + 10 * b + f));
  return native::to(from_vector<double>(v, {T, B, F}), dtype);
}

std::vector<double> values(const Tensor& t) { return native::to(t, kFloat64).to_vector<double>(); }
std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

using support::error_of;

TEST(PackPaddedSequence, SortedInputPacksStepMajor) {
  Tensor x = positional(4, 3, 2);
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{4, 2, 1});
  EXPECT_EQ(ints(p.batch_sizes), (std::vector<int64_t>{3, 2, 1, 1}));
  EXPECT_EQ(p.batch_sizes.dtype(), kInt64);
  EXPECT_FALSE(p.sorted_indices.defined());
  EXPECT_FALSE(p.unsorted_indices.defined());
  ASSERT_EQ(p.data.sizes(), (IntList{7, 2}));
  // rows: (t0,b0) (t0,b1) (t0,b2) (t1,b0) (t1,b1) (t2,b0) (t3,b0)
  std::vector<double> expect{0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 200, 201, 300, 301};
  EXPECT_EQ(values(p.data), expect);
}

TEST(PackPaddedSequence, BatchFirstMatchesTimeMajor) {
  Tensor x = positional(5, 3, 2);
  PackedSequence a = pack_padded_sequence(x, std::vector<int64_t>{5, 3, 2});
  PackedSequence b = pack_padded_sequence(native::contiguous(native::transpose(x, 0, 1)), std::vector<int64_t>{5, 3, 2},
                                          /*batch_first=*/true);
  EXPECT_EQ(values(a.data), values(b.data));
  EXPECT_EQ(ints(a.batch_sizes), ints(b.batch_sizes));
}

TEST(PackPaddedSequence, LengthsAsTensorOrVectorAgree) {
  Tensor x = positional(3, 2, 1);
  PackedSequence a = pack_padded_sequence(x, from_vector<int64_t>({3, 2}));
  PackedSequence b = pack_padded_sequence(x, std::vector<int64_t>{3, 2});
  EXPECT_EQ(values(a.data), values(b.data));
  PackedSequence c = pack_padded_sequence(x, from_vector<int32_t>({3, 2}));
  EXPECT_EQ(values(a.data), values(c.data));
}

TEST(PackPaddedSequence, EnforceSortedFalseSortsDescendingStably) {
  Tensor x = positional(4, 4, 1);
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{2, 4, 2, 1}, false, /*enforce_sorted=*/false);
  EXPECT_EQ(ints(p.sorted_indices), (std::vector<int64_t>{1, 0, 2, 3}));
  EXPECT_EQ(ints(p.unsorted_indices), (std::vector<int64_t>{1, 0, 2, 3}));
  EXPECT_EQ(ints(p.batch_sizes), (std::vector<int64_t>{4, 3, 1, 1}));
  // Same as sorting the batch by hand and packing with enforce_sorted=true.
  Tensor sorted = native::index_select(x, 1, from_vector<int64_t>({1, 0, 2, 3}));
  PackedSequence q = pack_padded_sequence(sorted, std::vector<int64_t>{4, 2, 2, 1});
  EXPECT_EQ(values(p.data), values(q.data));

  PackedSequence r = pack_padded_sequence(x, std::vector<int64_t>{1, 3, 2, 3}, false, false);
  EXPECT_EQ(ints(r.sorted_indices), (std::vector<int64_t>{1, 3, 2, 0}));
  EXPECT_EQ(ints(r.unsorted_indices), (std::vector<int64_t>{3, 0, 2, 1}));
}

TEST(PadPackedSequence, RoundTripRestoresValuesAndPadsTheRest) {
  Tensor x = positional(5, 4, 3);
  std::vector<int64_t> lengths{3, 5, 1, 4};
  for (bool batch_first : {false, true}) {
    Tensor in = batch_first ? native::contiguous(native::transpose(x, 0, 1)) : x;
    PackedSequence p = pack_padded_sequence(in, lengths, batch_first, /*enforce_sorted=*/false);
    auto [padded, lens] = pad_packed_sequence(p, batch_first, /*padding_value=*/-1.0);
    EXPECT_EQ(ints(lens), lengths);
    EXPECT_EQ(lens.dtype(), kInt64);
    ASSERT_EQ(padded.sizes(), in.sizes());
    Tensor tm = batch_first ? native::contiguous(native::transpose(padded, 0, 1)) : padded;
    auto got = values(tm), want = values(x);
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t b = 0; b < 4; ++b)
        for (int64_t f = 0; f < 3; ++f) {
          size_t i = static_cast<size_t>((t * 4 + b) * 3 + f);
          EXPECT_EQ(got[i], t < lengths[static_cast<size_t>(b)] ? want[i] : -1.0) << t << " " << b << " " << f;
        }
  }
}

TEST(PadPackedSequence, TotalLengthExtendsWithPadding) {
  Tensor x = positional(3, 2, 1);
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{3, 2});
  auto [padded, lens] = pad_packed_sequence(p, /*batch_first=*/true, 7.0, /*total_length=*/5);
  ASSERT_EQ(padded.sizes(), (IntList{2, 5, 1}));
  EXPECT_EQ(values(padded), (std::vector<double>{0, 100, 200, 7, 7, 10, 110, 7, 7, 7}));
}

TEST(PadPackedSequence, TotalLengthShorterThanLongestIsValueError) {
  Tensor x = positional(5, 3, 2);
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{5, 3, 2});
  EXPECT_THROW(pad_packed_sequence(p, false, 0.0, 3), ValueError);
  EXPECT_THAT(error_of([&] { pad_packed_sequence(p, false, 0.0, 3); }),
              HasSubstr("Expected total_length to be at least the length of the longest sequence in input, but got "
                        "total_length=3 and max sequence length being 5"));
}

TEST(PackPaddedSequence, ErrorsUsePyTorchsWords) {
  Tensor x = positional(5, 3, 2);
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{2, 5, 1}); }),
              HasSubstr("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                        "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
                        "requirement if you do not need ONNX exportability."));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{5, 3, 0}); }),
              HasSubstr("Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{5, 0, 2}, false, false); }),
              HasSubstr("Length of all samples has to be greater than 0"));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{5, 3}); }),
              HasSubstr("Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=3)"));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(zeros({0, 3, 2}), std::vector<int64_t>{1, 1, 1}); }),
              HasSubstr("Cannot pack empty tensors."));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, from_vector<int64_t>({5, 3, 2}, {1, 3})); }),
              HasSubstr("'lengths' argument should be a 1D CPU int64 tensor, but got 2D cpu Long tensor"));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, tensor({5, 3, 2})); }),
              HasSubstr("'lengths' argument should be a 1D CPU int64 tensor, but got 1D cpu Float tensor"));
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{6, 3, 2}); }),
              HasSubstr("exceeds the input's time dimension of size 5"));
}

// Issue 19, item 8: every bad length is a ValueError (some were plain ember::Error).
TEST(PackPaddedSequence, EveryBadLengthIsValueError) {
  Tensor x = positional(5, 3, 2);
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{2, 5, 1}), ValueError);          // unsorted
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{5, 3, 0}), ValueError);          // zero
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{5, 3, -1}), ValueError);         // negative
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{5, 0, 2}, false, false), ValueError);
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{6, 3, 2}), ValueError);          // larger than T
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{2, 6, 3}, false, false), ValueError);
  EXPECT_THROW(pack_padded_sequence(x, std::vector<int64_t>{5, 3}), ValueError);             // count
  EXPECT_THROW(pack_padded_sequence(zeros({0, 3, 2}), std::vector<int64_t>{1, 1, 1}), ValueError);
  EXPECT_THROW(pack_padded_sequence(x, tensor({5, 3, 2})), ValueError);                      // float lengths
}

// Issue 19, item 1: total_length = 2^62 with batch 4 overflowed max_len * batch (a segfault);
// 2^40 threw a bare std::bad_alloc.
TEST(PadPackedSequence, TotalLengthWhoseProductOverflowsIsValueError) {
  PackedSequence p = pack_padded_sequence(positional(3, 4, 2), std::vector<int64_t>{3, 3, 2, 1});
  EXPECT_THAT(error_of([&] { pad_packed_sequence(p, false, 0.0, int64_t{1} << 62); }),
              HasSubstr("pad_packed_sequence: shape [4611686018427387904, 4, 2] is too large"));
  EXPECT_THROW(pad_packed_sequence(p, true, 0.0, int64_t{1} << 62), ValueError);
}

TEST(PadPackedSequence, TotalLengthTooLargeToAllocateIsOutOfMemoryError) {
  PackedSequence p = pack_padded_sequence(positional(3, 4, 2), std::vector<int64_t>{3, 3, 2, 1});
  EXPECT_THROW(pad_packed_sequence(p, false, 0.0, int64_t{1} << 40), OutOfMemoryError);
  // Nothing was left half-done: the same sequence still pads normally.
  auto [padded, lens] = pad_packed_sequence(p, false, 0.0, 4);
  EXPECT_EQ(padded.sizes(), (IntList{4, 4, 2}));
}

// Issue 19, item 2: under ASan, pad_packed_sequence(total_length = 2^40) aborted the process
// (operator new of a 32 TiB row map reports out-of-memory instead of throwing). A host buffer
// larger than the machine's memory and swap is refused before it is tried, so the error is the
// same OutOfMemoryError with and without sanitizers; the message names the op and the bytes.
TEST(PadPackedSequence, RowMapLargerThanMemoryIsRefusedBeforeAllocating) {
  PackedSequence p = pack_padded_sequence(positional(3, 4, 2), std::vector<int64_t>{3, 3, 2, 1});
  EXPECT_THAT(error_of([&] { pad_packed_sequence(p, false, 0.0, int64_t{1} << 40); }),
              HasSubstr("pad_packed_sequence: cannot allocate 35184372088832 bytes of host memory (more than this "
                        "machine's memory and swap)"));
}

// The same for packing an expanded view whose rows do not exist: T = 2^42 steps of one stored
// element once sized a 32 TiB batch_sizes vector (std::bad_alloc, or an ASan abort).
TEST(PackPaddedSequence, ExpandedInputOfMoreStepsThanMemoryIsOutOfMemoryError) {
  const int64_t T = int64_t{1} << 42;
  Tensor x = native::expand(zeros({1, 1, 1}), {T, 1, 1});
  EXPECT_THAT(error_of([&] { pack_padded_sequence(x, std::vector<int64_t>{T}); }),
              HasSubstr("pack_padded_sequence: cannot allocate"));
}

TEST(PadPackedSequence, UnsortedIndicesThatAreNotAPermutationAreValueError) {
  PackedSequence p = pack_padded_sequence(positional(3, 4, 2), std::vector<int64_t>{3, 3, 2, 1});
  p.unsorted_indices = from_vector<int64_t>({0, 1, 1, 3});
  EXPECT_THAT(error_of([&] { pad_packed_sequence(p); }),
              HasSubstr("unsorted_indices must be a permutation of 0..3, got [0, 1, 1, 3]"));
  p.unsorted_indices = from_vector<int64_t>({0, 1, -5, 3});
  EXPECT_THROW(pad_packed_sequence(p), ValueError);
}

TEST(PadSequence, OverflowingBatchIsValueError) {
  Tensor huge = native::expand(zeros({1, 1}), {int64_t{1} << 59, 1});  // a legal view of 2^59 rows
  EXPECT_THROW(pad_sequence({huge, huge, huge, huge, huge}), ValueError);
}

TEST(PadSequence, StacksAndPads) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = tensor({7, 8}, {1, 2});
  Tensor c = zeros({0, 2});
  Tensor tm = pad_sequence({a, b, c}, /*batch_first=*/false, -1.0);
  ASSERT_EQ(tm.sizes(), (IntList{3, 3, 2}));
  EXPECT_EQ(values(tm), (std::vector<double>{1, 2, 7, 8, -1, -1, 3, 4, -1, -1, -1, -1, 5, 6, -1, -1, -1, -1}));
  Tensor bf = pad_sequence({a, b, c}, /*batch_first=*/true);
  ASSERT_EQ(bf.sizes(), (IntList{3, 3, 2}));
  EXPECT_EQ(values(bf), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // 1-D sequences have no trailing dims.
  Tensor s = pad_sequence({tensor({1, 2}), tensor({3})});
  EXPECT_EQ(s.sizes(), (IntList{2, 2}));
  EXPECT_EQ(values(s), (std::vector<double>{1, 3, 2, 0}));
}

TEST(PadSequence, Errors) {
  EXPECT_THAT(error_of([] { pad_sequence({}); }), HasSubstr("received an empty list of sequences"));
  EXPECT_THAT(error_of([] { pad_sequence({zeros({3, 2}), zeros({3, 3})}); }),
              HasSubstr("sequence 1 has shape [3, 3]"));
  EXPECT_THROW(pad_sequence({zeros({3, 2}), zeros({3, 2}, kFloat64)}), TypeError);
}

TEST(PackSequence, MatchesPackPaddedOfPadSequence) {
  Tensor a = tensor({1, 2, 3}, {3, 1}), b = tensor({4, 5, 6, 7, 8}, {5, 1}), c = tensor({9}, {1, 1});
  PackedSequence p = pack_sequence({a, b, c}, /*enforce_sorted=*/false);
  EXPECT_EQ(ints(p.batch_sizes), (std::vector<int64_t>{3, 2, 2, 1, 1}));
  EXPECT_EQ(ints(p.sorted_indices), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(values(p.data), (std::vector<double>{4, 1, 9, 5, 2, 6, 3, 7, 8}));
  EXPECT_THAT(error_of([&] { pack_sequence({a, b, c}); }), HasSubstr("must be sorted in decreasing order"));
}

TEST(InvertPermutation, InvertsAndValidates) {
  EXPECT_EQ(ints(invert_permutation(from_vector<int64_t>({2, 0, 3, 1}))), (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_FALSE(invert_permutation(Tensor()).defined());
  EXPECT_THROW(invert_permutation(from_vector<int64_t>({0, 0})), ValueError);
  EXPECT_THROW(invert_permutation(from_vector<int64_t>({0, 2})), ValueError);
  PackedSequence p(zeros({3, 1}), from_vector<int64_t>({2, 1}), from_vector<int64_t>({1, 0}));
  EXPECT_EQ(ints(p.unsorted_indices), (std::vector<int64_t>{1, 0}));
}

TEST(PackedSequenceGrad, PackThenPadIsDifferentiable) {
  Tensor x = native::to(randn({4, 3, 2}), kFloat64);
  x.requires_grad_(true);
  Tensor w = native::to(randn({3, 6, 2}), kFloat64);  // batch_first output with total_length 6
  auto f = [&](const autograd::TensorList& in) {
    PackedSequence p = pack_padded_sequence(in[0], std::vector<int64_t>{2, 4, 3}, false, false);
    auto [padded, lens] = pad_packed_sequence(p, /*batch_first=*/true, 0.5, 6);
    return mul(padded, w);
  };
  auto r = autograd::gradcheck(f, {x});
  EXPECT_TRUE(r.ok) << r.message;

  // Positions past each length receive no gradient.
  PackedSequence p = pack_padded_sequence(x, std::vector<int64_t>{2, 4, 3}, false, false);
  auto [padded, lens] = pad_packed_sequence(p);
  sum(padded).backward();
  auto g = values(x.grad());
  std::vector<int64_t> len{2, 4, 3};
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t f2 = 0; f2 < 2; ++f2)
        EXPECT_EQ(g[static_cast<size_t>((t * 3 + b) * 2 + f2)], t < len[static_cast<size_t>(b)] ? 1.0 : 0.0);
}

TEST(PackedSequenceGrad, PadSequenceAndPackSequenceAreDifferentiable) {
  Tensor a = native::to(randn({3, 2}), kFloat64), b = native::to(randn({1, 2}), kFloat64),
         c = native::to(randn({2, 2}), kFloat64);
  for (Tensor* t : {&a, &b, &c}) t->requires_grad_(true);
  auto r1 = autograd::gradcheck(
      [](const autograd::TensorList& in) { return pad_sequence({in[0], in[1], in[2]}, true, 2.0); }, {a, b, c});
  EXPECT_TRUE(r1.ok) << r1.message;
  auto r2 = autograd::gradcheck(
      [](const autograd::TensorList& in) { return pack_sequence({in[0], in[1], in[2]}, false).data; }, {a, b, c});
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(PackedSequence, ToDtypeKeepsBatchSizesOnCpuInt64) {
  PackedSequence p = pack_padded_sequence(positional(3, 2, 1), std::vector<int64_t>{3, 1}, false, false);
  PackedSequence q = p.to(kFloat64);
  EXPECT_EQ(q.data.dtype(), kFloat64);
  EXPECT_EQ(q.batch_sizes.dtype(), kInt64);
  EXPECT_TRUE(q.batch_sizes.device().is_cpu());
  EXPECT_EQ(ints(q.sorted_indices), ints(p.sorted_indices));
}

}  // namespace
}  // namespace ember::nn::utils::rnn
