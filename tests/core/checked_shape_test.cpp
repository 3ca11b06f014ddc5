// Tests for Note [Checked shape arithmetic] (core/detail/checked_math.h): a table probes every
// factory and view with shapes whose element count, byte count, strides or extent overflow
// int64; each must throw a typed ember error naming the op, never wrap around, crash, or throw
// std::bad_alloc. Regression tests are named after the bugs of issue 19 (item 1).
#include "core/detail/checked_math.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

constexpr int64_t k2p62 = int64_t{1} << 62;
constexpr int64_t k2p61 = int64_t{1} << 61;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

enum class Want { Value, Index, Oom };

struct Probe {
  const char* name;
  std::function<void()> call;
  Want want;
  const char* op;  // the op name the message must contain
};

// A tensor that claims many elements over a single one (a legal expanded view).
Tensor huge_view(const IntList& sizes, DType dtype = kFloat32) {
  return native::expand(zeros({1}, TensorOptions(dtype)), sizes);
}

std::vector<Probe> probes() {
  std::vector<Probe> p;
  // Factories.
  p.push_back({"ZerosRowsTimesColsOverflow", [] { zeros({k2p62 + 1, 4}); }, Want::Value, "zeros"});
  p.push_back({"OnesSquareOverflow", [] { ones({k2p62, k2p62}); }, Want::Value, "full"});
  p.push_back({"FullOverflow", [] { full({3, k2p62}, 1.0); }, Want::Value, "full"});
  p.push_back({"EmptyElementCountOverflow", [] { empty({k2p61, 8}); }, Want::Value, "empty"});
  p.push_back({"EmptyByteCountOverflow", [] { empty({int64_t{1} << 60, 4}, TensorOptions(kFloat64)); },
               Want::Value, "byte count"});
  p.push_back({"EmptyNegative", [] { empty({2, -3}); }, Want::Value, "negative dimension"});
  p.push_back({"ZeroDimWithOverflowingStrides", [] { zeros({0, k2p62, k2p62}); }, Want::Value, "stride"});
  p.push_back({"EmptyTooLargeToExist", [] { empty({int64_t{1} << 50}); }, Want::Oom, "out of memory"});
  p.push_back({"RandOverflow", [] { rand({k2p62 + 1, 4}); }, Want::Value, "empty"});
  p.push_back({"RandnOverflow", [] { randn({4, k2p62 + 1}); }, Want::Value, "empty"});
  p.push_back({"RandintOverflow", [] { randint(0, 5, {k2p62, 4}); }, Want::Value, "empty"});
  p.push_back({"EyeOverflow", [] { eye(int64_t{1} << 32); }, Want::Value, "zeros"});
  p.push_back({"EyeNegative", [] { eye(-2); }, Want::Value, "eye"});
  p.push_back({"ArangeCountBeyondInt64", [] { arange(0.0, 1e30, 1.0); }, Want::Value, "arange"});
  p.push_back({"ArangeInfiniteEnd", [] { arange(0.0, std::numeric_limits<double>::infinity(), 1.0); },
               Want::Value, "arange"});
  p.push_back({"FromVectorOverflow", [] { from_vector<float>({1.f, 2.f}, {k2p62, 4}); }, Want::Value, "from_vector"});
  p.push_back({"FromBlobOverflow",
               [] {
                 static float x[4];
                 from_blob(x, {k2p62 + 1, 4}, kFloat32, [](void*) {});
               },
               Want::Value, "from_blob"});
  p.push_back({"MakeTensorBeyondStorage",
               [] { make_tensor(Storage(16, Device::cpu()), {100, 4}, {4, 1}, 0, kFloat32); }, Want::Index,
               "make_tensor"});
  // Views.
  p.push_back({"ReshapeToOverflowingShape", [] { native::reshape(zeros({4}), {k2p62 + 1, 4}); }, Want::Value,
               "reshape"});
  p.push_back({"ReshapeInferredWithOverflowingKnown", [] { native::reshape(zeros({0}), {-1, k2p62, k2p62}); },
               Want::Value, "reshape"});
  p.push_back({"ViewToOverflowingShape", [] { native::view(zeros({4}), {4, k2p62 + 1}); }, Want::Value, "view"});
  p.push_back({"ExpandOverflow", [] { native::expand(zeros({1, 1}), {k2p62, 4}); }, Want::Value, "expand"});
  p.push_back({"ExpandNewDimsOverflow", [] { native::expand(zeros({4}), {k2p62, 4}); }, Want::Value, "expand"});
  p.push_back({"ExpandNegativeSize", [] { native::expand(zeros({1}), {-2}); }, Want::Value, "expand"});
  p.push_back({"NarrowStartPlusLengthOverflows", [] { native::narrow(zeros({4}), 0, 2, kMax); }, Want::Index,
               "narrow"});
  p.push_back({"AsStridedExtentOverflows", [] { native::as_strided(zeros({4}), {k2p62, 4}, {k2p62, 1}, 0); },
               Want::Value, "as_strided"});
  p.push_back({"AsStridedBeyondStorage", [] { native::as_strided(zeros({4}), {2, 4}, {4, 1}, 0); }, Want::Index,
               "as_strided"});
  // Joining and splitting.
  p.push_back({"CatSumOverflows", [] { native::cat({huge_view({k2p62}, kBool), huge_view({k2p62}, kBool)}, 0); }, Want::Value,
               "cat"});
  p.push_back({"StackOverflows", [] { native::stack({huge_view({k2p61}), huge_view({k2p61}), huge_view({k2p61}),
                                                      huge_view({k2p61})}, 0); },
               Want::Value, ""});
  p.push_back({"SplitSizesSumOverflows", [] { native::split_with_sizes(zeros({4}), {kMax, 1}, 0); }, Want::Value,
               "split_with_sizes"});
  // Broadcasting: two legal views whose broadcast result cannot exist.
  p.push_back({"BroadcastResultOverflows",
               [] { native::add(huge_view({int64_t{1} << 32, 1}), huge_view({1, int64_t{1} << 32})); }, Want::Value,
               ""});
  return p;
}

class CheckedShape : public ::testing::TestWithParam<Probe> {};

TEST_P(CheckedShape, ThrowsTypedErrorNamingTheOp) {
  const Probe& probe = GetParam();
  std::string what;
  try {
    probe.call();
    FAIL() << probe.name << ": no error";
  } catch (const ValueError& e) {
    EXPECT_EQ(probe.want, Want::Value) << probe.name << ": ValueError: " << e.what();
    what = e.what();
  } catch (const IndexError& e) {
    EXPECT_EQ(probe.want, Want::Index) << probe.name << ": IndexError: " << e.what();
    what = e.what();
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(probe.want, Want::Oom) << probe.name << ": OutOfMemoryError: " << e.what();
    what = e.what();
  } catch (const std::exception& e) {
    FAIL() << probe.name << ": untyped " << typeid(e).name() << ": " << e.what();
  }
  EXPECT_NE(what.find(probe.op), std::string::npos) << probe.name << ": message lacks '" << probe.op << "': " << what;
}

INSTANTIATE_TEST_SUITE_P(Probes, CheckedShape, ::testing::ValuesIn(probes()),
                         [](const ::testing::TestParamInfo<Probe>& info) { return std::string(info.param.name); });

// Issue 19: zeros({2^62 + 1, 4}) owned 16 bytes and claimed 2^62 + 1 rows; a narrow() to row 32
// then wrote over another tensor.
TEST(CheckedShapeRegression, ZerosWithOverflowingRowsIsRefusedSoNarrowCannotWriteElsewhere) {
  EXPECT_THROW(zeros({k2p62 + 1, 4}), ValueError);
  // The same geometry built by hand over a 16-byte storage: no view of it may reach row 32.
  Tensor bystander = full({4}, 7.0);
  EXPECT_THROW(make_tensor(Storage(16, Device::cpu()), {64, 4}, {4, 1}, 0, kFloat32), IndexError);
  EXPECT_EQ(bystander.to_vector<float>(), std::vector<float>(4, 7.f));
}

TEST(CheckedShapeRegression, ErrorNamesTheShape) {
  const std::string what = support::error_of<ValueError>([&] { zeros({k2p62 + 1, 4}); });
  EXPECT_NE(what.find("[4611686018427387905, 4]"), std::string::npos) << what;
}

// Arithmetic that used to overflow internally but has a well-defined answer.
TEST(CheckedShape, HugeStepsAndChunkCountsGiveTheRightPieces) {
  Tensor x = arange(4, TensorOptions(kFloat32));
  Tensor s = native::slice(x, 0, 0, 4, kMax);
  EXPECT_EQ(s.sizes(), IntList{1});
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>{0.f});
  auto chunks = native::chunk(x, kMax, 0);
  ASSERT_EQ(chunks.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(chunks[i].to_vector<float>(), std::vector<float>{float(i)});
  auto one = native::split(x, kMax, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].sizes(), IntList{4});
}

TEST(CheckedShape, LargestRepresentableViewsStillWork) {
  // 2^60 float32 elements (2^62 bytes) are representable; 2^62 elements (2^64 bytes) are not.
  Tensor v = huge_view({int64_t{1} << 60});
  EXPECT_EQ(v.numel(), int64_t{1} << 60);
  EXPECT_EQ(native::narrow(v, 0, (int64_t{1} << 60) - 2, 2).numel(), 2);
  EXPECT_THROW(huge_view({k2p62}), ValueError);  // 2^62 float32 elements are 2^64 bytes
}

TEST(CheckedMath, HelpersReportOverflowAndTranslateBadAlloc) {
  EXPECT_EQ(detail::checked_numel({3, 0, 5}, "t"), 0);
  EXPECT_EQ(detail::checked_numel({}, "t"), 1);
  EXPECT_EQ(detail::checked_contiguous_strides({2, 0, 5}, "t"), (IntList{5, 5, 1}));
  EXPECT_THROW(detail::checked_numel({k2p62, 2}, "t"), ValueError);
  EXPECT_THROW(detail::checked_nbytes({k2p61}, 8, "t"), ValueError);
  EXPECT_EQ(detail::checked_nbytes({k2p61 / 8}, 8, "t"), static_cast<uint64_t>(k2p61));
  EXPECT_THROW(detail::translate_bad_alloc("t", 1, []() -> int { throw std::bad_alloc(); }), OutOfMemoryError);
  EXPECT_THROW(detail::translate_bad_alloc("t", 1, [] { std::vector<int64_t> v; v.reserve(v.max_size() + 1); }),
               OutOfMemoryError);
  EXPECT_EQ(detail::translate_bad_alloc("t", 1, [] { return 5; }), 5);
}

// Issue 19, item 2: under ASan, operator new of a size that cannot exist aborts instead of
// throwing, so translate_bad_alloc must refuse such a size without calling f at all.
TEST(CheckedMath, HostBufferLargerThanMemoryIsRefusedWithoutTrying) {
  const uint64_t limit = detail::host_memory_limit();
  EXPECT_GT(limit, uint64_t{1} << 20);
  bool tried = false;
  EXPECT_THROW(detail::translate_bad_alloc("t", limit + 1, [&] { tried = true; }), OutOfMemoryError);
  EXPECT_FALSE(tried);
  EXPECT_EQ(detail::host_bytes(uint64_t{1} << 62, 8), ~uint64_t{0});  // saturates, never wraps
  EXPECT_EQ(detail::host_bytes(3, 8), 24u);
}

}  // namespace
}  // namespace ember
