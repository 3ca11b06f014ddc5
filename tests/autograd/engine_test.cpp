// The engine: backward/grad, accumulation, retain_graph, hooks, retain_grad, grad mode,
// version-counter errors, per-device threads, errors surfacing with the node's name and their own
// type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <stdexcept>
#include <thread>
#include <typeinfo>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/ops/native.h"
#include "tests/support/error_text.h"

using namespace ember;
using ::testing::HasSubstr;

namespace {
Tensor leaf(std::initializer_list<double> v, IntList sizes = {}) {
  Tensor t = tensor(v, sizes);
  t.requires_grad_(true);
  return t;
}
std::vector<float> vec(const Tensor& t) { return t.to_vector<float>(); }
// Error::where() of the error f() throws (support::error_of gives its text): "file:line:function".
std::string where_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.where();
  }
  ADD_FAILURE() << "expected an ember::Error, nothing was thrown";
  return {};
}
}  // namespace

TEST(Engine, SimpleChainRule) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = sum(mul(mul(x, x), 3.0));  // d/dx = 6x
  y.backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{6, 12, 18}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "SumBackward1");
}

TEST(Engine, AccumulatesAcrossCalls) {
  Tensor x = leaf({1, 2});
  for (int i = 0; i < 3; ++i) sum(mul(x, 2.0)).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{6, 6}));
}

TEST(Engine, DiamondGraphSumsBothPaths) {
  Tensor x = leaf({2});
  Tensor a = mul(x, 3.0), b = mul(x, x);
  Tensor y = sum(add(a, b));  // 3 + 2x
  y.backward();
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 7.0f);
}

TEST(Engine, BroadcastGradientReducedToInputShape) {
  Tensor a = leaf({1, 2, 3}, {3, 1});
  Tensor b = leaf({10, 20}, {1, 2});
  sum(mul(a, b)).backward();
  EXPECT_EQ(a.grad().sizes(), (IntList{3, 1}));
  EXPECT_EQ(vec(a.grad()), (std::vector<float>{30, 30, 30}));
  EXPECT_EQ(vec(b.grad()), (std::vector<float>{6, 6}));
}

TEST(Engine, SecondBackwardWithoutRetainGraphFails) {
  Tensor x = leaf({1, 2});
  Tensor y = sum(mul(x, x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: graph retained
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{4, 8}));
  // The node is named once, by the engine (once, not again by the check).
  const std::string text = support::error_of<Error>([&] { y.backward(); });
  EXPECT_THAT(text, ::testing::StartsWith("in backward of SumBackward1: trying to backward through the graph a second time"));
  EXPECT_EQ(support::count_of(text, "SumBackward1"), 1u) << text;
  // The location is the node's check, kept through the engine's re-raise.
  const std::string where = where_of([&] { y.backward(); });
  EXPECT_THAT(where, ::testing::StartsWith("autograd/node.h:"));
  EXPECT_THAT(where, ::testing::EndsWith(":check_not_released"));
}

TEST(Engine, NonScalarNeedsGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  EXPECT_THAT(support::error_of<Error>([&] { y.backward(); }),
              HasSubstr("grad can be implicitly created only for scalar outputs"));
  y.backward(tensor({1, 10}));
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{2, 20}));
}

TEST(Engine, BackwardOnTensorWithoutGradFails) {
  Tensor x = tensor({1, 2});
  EXPECT_THAT(support::error_of<Error>([&] { sum(x).backward(); }), HasSubstr("does not require grad"));
}

TEST(Engine, GradDoesNotTouchDotGrad) {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  Tensor y = sum(mul(x, w));
  auto g = autograd::grad({y}, {x});
  EXPECT_EQ(vec(g[0]), (std::vector<float>{4, 5, 6}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(Engine, GradOfNonLeafAndUnused) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3.0);
  Tensor y = sum(mul(h, h));
  Tensor unused = leaf({5});
  auto g = autograd::grad({y}, {h}, {}, true);
  EXPECT_EQ(vec(g[0]), (std::vector<float>{6, 12}));  // 2h
  EXPECT_THROW(autograd::grad({y}, {unused}, {}, true), Error);
  auto g2 = autograd::grad({y}, {unused}, {}, true, /*allow_unused=*/true);
  EXPECT_FALSE(g2[0].defined());
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard g;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(y.grad_fn());
  }
  Tensor z = mul(x, 2.0);
  EXPECT_TRUE(z.requires_grad());
}

TEST(Engine, GradModeIsThreadLocal) {
  NoGradGuard g;
  bool other_enabled = false;
  std::thread t([&] { other_enabled = autograd::GradMode::is_enabled(); });
  t.join();
  EXPECT_TRUE(other_enabled);
  EXPECT_FALSE(autograd::GradMode::is_enabled());
}

TEST(Engine, DetachCutsHistoryAndSharesData) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  Tensor d = detach(y);
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.storage().is_same(y.storage()));
  EXPECT_EQ(vec(d), (std::vector<float>{2, 4}));
}

TEST(Engine, ItemReturnsPlainNumber) {
  Tensor x = leaf({3});
  double v = mul(x, 2.0).item();
  EXPECT_DOUBLE_EQ(v, 6.0);
}

TEST(Engine, InplaceModificationOfSavedTensorIsReported) {
  Tensor x = leaf({1, 2, 3});
  Tensor a = mul(x, 1.0);   // non-leaf
  Tensor y = sum(mul(a, a));  // saves a
  native::add_(a, 1.0);     // modify a saved tensor in place
  const std::string text = support::error_of<Error>([&] { y.backward(); });
  EXPECT_THAT(text, HasSubstr("one of the variables needed for gradient computation has been modified by an inplace operation"));
  EXPECT_THAT(text, HasSubstr("which is saved by MulBackward0"));
  EXPECT_EQ(support::count_of(text, "MulBackward0"), 1u) << text;
  EXPECT_THAT(text, HasSubstr("is at version 1; expected version 0"));
}

TEST(Engine, InplaceOnLeafRequiringGradIsAnError) {
  Tensor x = leaf({1, 2});
  EXPECT_THAT(support::error_of<Error>([&] { add_(x, tensor({1, 1})); }),
              HasSubstr("a leaf Variable that requires grad is being used in an in-place operation"));
  NoGradGuard g;  // allowed under no_grad, like optimizer updates
  add_(x, tensor({1, 1}));
  EXPECT_EQ(vec(x), (std::vector<float>{2, 3}));
}

TEST(Engine, InplaceOnNonLeafIsDifferentiable) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  add_(y, tensor({5, 5}));
  mul_(y, 3.0);
  sum(y).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{6, 6}));
}

TEST(Engine, TensorHookCanReplaceGradient) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 1.0);
  std::vector<float> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector<float>();
    return native::mul(g, 10.0);
  });
  sum(mul(h, 2.0)).backward();
  EXPECT_EQ(seen, (std::vector<float>{2, 2}));
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{20, 20}));
}

TEST(Engine, LeafHookAndRemoval) {
  Tensor x = leaf({1});
  int calls = 0;
  int id = x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  sum(x).backward();
  x.remove_hook(id);
  sum(x).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 2.0f);
}

TEST(Engine, PostAccumulateHookSeesAccumulatedGrad) {
  Tensor x = leaf({1, 2});
  std::vector<float> seen;
  int id = x.register_post_accumulate_grad_hook([&](const Tensor& p) { seen = p.grad().to_vector<float>(); });
  sum(mul(x, 4.0)).backward();
  EXPECT_EQ(seen, (std::vector<float>{4, 4}));
  x.remove_post_accumulate_grad_hook(id);
  seen.clear();
  sum(x).backward();
  EXPECT_TRUE(seen.empty());
  Tensor nl = mul(x, 1.0);
  EXPECT_THROW(nl.register_post_accumulate_grad_hook([](const Tensor&) {}), Error);
}

TEST(Engine, RetainGradOnNonLeaf) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3.0);
  h.retain_grad();
  Tensor other = mul(x, 3.0);
  sum(mul(h, h)).backward();
  EXPECT_EQ(vec(h.grad()), (std::vector<float>{6, 12}));
  EXPECT_FALSE(other.grad().defined());
}

TEST(Engine, ErrorInBackwardNamesTheNode) {
  struct Boom {};
  Tensor x = leaf({1});
  Tensor y = mul(x, 2.0);
  y.register_hook([](const Tensor&) -> Tensor { throw ValueError("hook exploded"); });
  // The hook's type survives the engine's re-raise.
  EXPECT_EQ(support::error_of<ValueError>([&] { sum(y).backward(); }), "in backward of MulBackward1: hook exploded");
  // The engine is still usable afterwards.
  sum(mul(x, 5.0)).backward();
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 5.0f);
}

TEST(Engine, GradientsFlowAcrossDevices) {
  Tensor x = leaf({1, 2, 3});
  Tensor on1 = to(x, Device("cpu:1"));
  EXPECT_EQ(on1.device(), Device("cpu:1"));
  Tensor y = sum(mul(on1, on1));
  y.backward();
  EXPECT_EQ(x.grad().device(), Device("cpu:0"));
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{2, 4, 6}));
}

TEST(Engine, NodesRunOnTheirDeviceThreads) {
  // Each node records which thread ran it; cpu:0 and cpu:1 nodes must use different threads.
  // The root is on cpu:1, so the caller runs cpu:1's nodes itself (Note [Engine threads]) and
  // cpu:0's run on cpu:0's worker.
  std::mutex mu;
  std::map<std::string, std::set<std::thread::id>> threads;
  Tensor x = leaf({1, 2});
  Tensor a = mul(x, 2.0);
  a.register_hook([&](const Tensor& g) {
    std::lock_guard<std::mutex> lk(mu);
    threads["cpu0"].insert(std::this_thread::get_id());
    return g;
  });
  Tensor b = mul(to(a, Device("cpu:1")), 3.0);
  b.register_hook([&](const Tensor& g) {
    std::lock_guard<std::mutex> lk(mu);
    threads["cpu1"].insert(std::this_thread::get_id());
    return g;
  });
  sum(b).backward();
  ASSERT_EQ(threads["cpu0"].size(), 1u);
  ASSERT_EQ(threads["cpu1"].size(), 1u);
  EXPECT_NE(*threads["cpu0"].begin(), *threads["cpu1"].begin());
  EXPECT_NE(*threads["cpu0"].begin(), std::this_thread::get_id());
  EXPECT_EQ(*threads["cpu1"].begin(), std::this_thread::get_id());
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{6, 6}));
}

TEST(Engine, SingleDeviceCpuBackwardRunsOnTheCallingThread) {
  std::set<std::thread::id> threads;
  Tensor w = leaf({1, 2, 3});
  Tensor h = mul(w, 2.0);
  h.register_hook([&](const Tensor& g) {
    threads.insert(std::this_thread::get_id());
    return g;
  });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { threads.insert(std::this_thread::get_id()); });
  sum(mul(h, h)).backward();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(*threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(vec(w.grad()), (std::vector<float>{8, 16, 24}));
  // The calling thread's grad mode is what it was.
  EXPECT_TRUE(autograd::GradMode::is_enabled());
}

TEST(Engine, AccumulateGradRunsAsSoonAsItsGradientIsComplete) {
  // y = chain(w) + b with a long chain below w: b's gradient is complete right after the add's
  // backward, and its AccumulateGrad (hence its post-accumulate hook, which DDP uses to start
  // reducing) must run before the chain, whichever side of the add b is on. The graph lives on
  // cpu:0, where the calling thread runs it, or on cpu:1, whose worker runs it (the root is
  // moved to cpu:0).
  for (bool b_first : {false, true}) {
    for (const char* device : {"cpu:0", "cpu:1"}) {
      SCOPED_TRACE(std::string(device) + (b_first ? ", b + chain" : ", chain + b"));
      std::vector<std::string> order;
      std::mutex mu;
      auto note = [&](const std::string& what) {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(what);
      };
      const TensorOptions on = TensorOptions(kFloat32).device(Device(device));
      Tensor w = full({3}, 2.0, on).requires_grad_(true);
      Tensor b = full({3}, 0.5, on).requires_grad_(true);
      std::vector<Tensor> chain{w};  // every link kept alive: a hook lives with its tensor
      for (int i = 0; i < 20; ++i) chain.push_back(mul(chain.back(), 1.5));
      chain[10].register_hook([&](const Tensor& g) {
        note("chain");
        return g;
      });
      Tensor y = b_first ? add(b, chain.back()) : add(chain.back(), b);
      w.register_post_accumulate_grad_hook([&](const Tensor&) { note("w"); });
      b.register_post_accumulate_grad_hook([&](const Tensor&) { note("b"); });
      to(sum(y), Device("cpu:0")).backward();
      EXPECT_EQ(order, (std::vector<std::string>{"b", "chain", "w"}));
      EXPECT_EQ(vec(b.grad()), (std::vector<float>{1, 1, 1}));
    }
  }
}

TEST(Engine, NodesReadyTogetherRunNewestFirstOnEveryThread) {
  // Note [Ready order]: y = b + a with a created before b. The add's backward makes both ready
  // at once, a's last (edge order); the newer, b, runs first all the same, on the calling
  // thread (graph on cpu:0) as on a worker (graph on cpu:1).
  for (const char* device : {"cpu:0", "cpu:1"}) {
    SCOPED_TRACE(device);
    std::vector<std::string> order;
    std::mutex mu;
    const TensorOptions on = TensorOptions(kFloat32).device(Device(device));
    Tensor x = full({3}, 2.0, on).requires_grad_(true);
    Tensor a = mul(x, 2.0);
    Tensor b = mul(x, 3.0);
    for (auto [t, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
      t->register_hook([&, name = std::string(name)](const Tensor& g) {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(name);
        return g;
      });
    }
    to(sum(add(b, a)), Device("cpu:0")).backward();
    EXPECT_EQ(order, (std::vector<std::string>{"b", "a"}));
    EXPECT_EQ(vec(x.grad()), (std::vector<float>{5, 5, 5}));
  }
}

TEST(Engine, ReplicasOnTwoDevicesRunConcurrently) {
  // Two independent branches on cpu:0 and cpu:1 whose hooks wait for each other: this only
  // finishes if both device threads run at the same time.
  Tensor x = leaf({1});
  std::atomic<int> arrived{0};
  auto rendezvous = [&](const Tensor& g) {
    arrived.fetch_add(1);
    auto start = std::chrono::steady_clock::now();
    while (arrived.load() < 2) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) throw Error("branches did not overlap");
      std::this_thread::yield();
    }
    return g;
  };
  Tensor b0 = mul(to(x, Device("cpu:2")), 2.0);
  Tensor b1 = mul(to(x, Device("cpu:3")), 3.0);
  b0.register_hook(rendezvous);
  b1.register_hook(rendezvous);
  Tensor y = add(to(sum(b0), Device("cpu:0")), to(sum(b1), Device("cpu:0")));
  y.backward();
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 5.0f);
}

TEST(Engine, FaqSummingLossTensorsKeepsGraphsAlive) {
  // The PyTorch FAQ: `total_loss += loss` keeps every iteration's graph alive; `+= loss.item()` does not.
  Device dev("cpu:5");
  Tensor w = ones({256, 256}, TensorOptions().device(dev));
  w.requires_grad_(true);
  auto step_loss = [&] {
    Tensor x = ones({256, 256}, TensorOptions().device(dev));
    return mean(mul(matmul(x, w), 0.5));
  };
  empty_cache(dev);
  int64_t base = memory_stats(dev).allocated_bytes;
  Tensor total = zeros({}, TensorOptions().device(dev));
  for (int i = 0; i < 20; ++i) total += step_loss();
  int64_t with_tensors = memory_stats(dev).allocated_bytes - base;
  total = Tensor();
  int64_t after_release = memory_stats(dev).allocated_bytes - base;
  double total_f = 0;
  for (int i = 0; i < 20; ++i) total_f += step_loss().item();
  int64_t with_items = memory_stats(dev).allocated_bytes - base;
  // 20 graphs each hold at least the saved matmul input x (256 KiB).
  EXPECT_GE(with_tensors, 20 * 256 * 1024);
  EXPECT_LT(after_release, 64 * 1024);
  EXPECT_LT(with_items, 64 * 1024);
  EXPECT_GT(total_f, 0.0);
}

TEST(Engine, AnomalyModeNamesForwardOpOfNaN) {
  autograd::DetectAnomalyGuard anomaly;
  Tensor x = leaf({0.0, 1.0});
  Tensor y = sum(sqrt(x));  // d/dx sqrt at 0 -> inf; times 0 below gives nan
  Tensor z = mul(sqrt(x), 0.0);
  const std::string text = support::error_of<Error>([&] { sum(z).backward(); });
  EXPECT_THAT(text, HasSubstr("returned nan values"));
  EXPECT_THAT(text, HasSubstr("SqrtBackward0"));
  EXPECT_THAT(text, HasSubstr("forward op SqrtBackward0"));
  (void)y;
}

TEST(Engine, ViewsAndNonContiguousGradients) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor tt = transpose(x, 0, 1);          // [3,2], non-contiguous
  Tensor s = select(tt, 0, 2);             // column 2 of x: {3, 6}
  Tensor n = narrow(tt, 0, 0, 1);          // column 0 of x
  sum(add(mul(s, 10.0), sum(n))).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{2, 0, 10, 2, 0, 10}));
}

TEST(Engine, GradientHasTheInputsDtype) {
  Tensor x = tensor({1, 2});
  x.requires_grad_(true);
  sum(mul(to(x, kFloat64), 3.0)).backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{3, 3}));
}

// ---- an error in a backward function keeps its type (core/error_code.h) ----------------------
namespace {
std::function<void()> g_backward_throws;  // what ThrowingBackward's backward does first

struct Throwing : autograd::Function<Throwing> {
  static constexpr const char* kName = "ThrowingBackward";
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return native::clone(x); }
  static autograd::TensorList backward(autograd::AutogradContext*, autograd::TensorList g) {
    g_backward_throws();
    return {g[0]};
  }
};

// backward() through ThrowingBackward on cpu:0 with the root on cpu:1, so the node runs on
// cpu:0's engine thread (Note [Engine threads]) and its error crosses to the caller; returns
// what came out.
std::exception_ptr backward_error(std::function<void()> throws) {
  g_backward_throws = std::move(throws);
  Tensor x = leaf({1, 2});
  Tensor y = Throwing::apply(x);
  try {
    sum(to(y, Device("cpu:1"))).backward();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

template <typename E>
void expect_backward_keeps_type() {
  int line = 0;
  std::exception_ptr error = backward_error([&] {
    line = __LINE__ + 1;
    EMBER_THROW(E, "the backward's own words");
  });
  ASSERT_TRUE(error) << typeid(E).name() << " was swallowed";
  try {
    std::rethrow_exception(error);
  } catch (const E& e) {
    EXPECT_EQ(typeid(e), typeid(E)) << "came back as a base of " << typeid(E).name();
    EXPECT_EQ(e.message(), "in backward of ThrowingBackward: the backward's own words");
    EXPECT_THAT(e.where(), ::testing::StartsWith("tests/autograd/engine_test.cpp:" + std::to_string(line)));
  } catch (const std::exception& e) {
    ADD_FAILURE() << typeid(E).name() << " came back as another type: " << e.what();
  }
}
}  // namespace

TEST(Engine, ErrorInABackwardFunctionKeepsItsTypeAndNamesTheNode) {
  // Regression: the engine retyped errors from its own list, which lacked DeviceError (it came
  // back as a plain Error); now it carries them as core/error_code.h does across threads.
  expect_backward_keeps_type<DeviceError>();
  expect_backward_keeps_type<IndexError>();
  expect_backward_keeps_type<OutOfMemoryError>();
  expect_backward_keeps_type<TimeoutError>();
  expect_backward_keeps_type<DistributedError>();
  expect_backward_keeps_type<Error>();
  // The engine is still usable afterwards.
  g_backward_throws = [] {};
  Tensor x = leaf({1, 2});
  sum(Throwing::apply(x)).backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<float>{1, 1}));
}

TEST(Engine, NonEmberExceptionsInABackwardFunctionComeOutAsErrorNamingTheNode) {
  std::exception_ptr error = backward_error([] { throw std::out_of_range("vector::at"); });
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    EXPECT_EQ(typeid(e), typeid(Error));
    EXPECT_EQ(e.message(), "in backward of ThrowingBackward: vector::at");
  }
  // Regression: only std::exception was caught, so this left the engine's worker thread
  // (std::terminate) instead of reaching backward()'s caller.
  error = backward_error([] { throw 42; });
  ASSERT_TRUE(error);
  EXPECT_EQ(support::error_of<Error>([&] { std::rethrow_exception(error); }),
            "in backward of ThrowingBackward: unknown exception");
}
