// examples/rnn_dp end to end: the data recipe's counts, and short runs of the real binary on a
// few hundred words per language (--limit) checking that the loss falls, that DataParallel over
// cpu:0,cpu:1 matches a single-device run, that the [T x B] layout (scattered on dim 1) matches
// [B x T], that --resume is bit-exact, and the errors of --no-total-length and a missing word list.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/serialization.h"
#include "examples/rnn_dp/options.h"
#include "examples/rnn_dp/wordlang_dataset.h"
#include "tests/examples/rnn_dp_test_util.h"

namespace {

using rnn_dp_test::expect_same_parameters;
using rnn_dp_test::have_word_lists;
using rnn_dp_test::kDictDir;
using rnn_dp_test::read_metrics;
using rnn_dp_test::run_command;
using rnn_dp_test::RunResult;
namespace fs = std::filesystem;

RunResult run_rnn_dp(const std::string& args) { return run_command(std::string(RNN_DP_BINARY) + " " + args); }

// One training run in its own directory: `dir`/metrics.jsonl and `dir`/ckpt.
class TrainingRun {
 public:
  TrainingRun(const fs::path& root, const std::string& name) : dir_(root / name) { fs::create_directories(dir_); }
  RunResult exec(const std::string& args) const {
    return run_rnn_dp("--dict-dir " + std::string(kDictDir) + " --progress lines --metrics " + metrics().string() +
                      " --checkpoint-dir " + ckpt().string() + " " + args);
  }
  fs::path metrics() const { return dir_ / "metrics.jsonl"; }
  fs::path ckpt() const { return dir_ / "ckpt"; }
  fs::path last() const { return ckpt() / "last.safetensors"; }

 private:
  fs::path dir_;
};

// 1200 training words in 19 batches of 64: ~1 s per epoch on a busy 2-core machine, and the
// loss falls clearly in 2 epochs. DataParallel and single-device runs agree to ~1e-6 here; Adam
// amplifies float rounding over many more steps (about 1.4e-5 after 114 steps of 32).
const std::string kShort = "--limit 200 --threads 1 --workers 2";

class RnnDp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/rnn_dp_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    root_ = new fs::path(tmpl);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    root_ = nullptr;
  }
  // The DataParallel run over cpu:0,cpu:1, 2 epochs, that several tests compare against (run once).
  static const TrainingRun& reference_run() {
    static const TrainingRun* run = [] {
      auto* r = new TrainingRun(*root_, "dp");
      RunResult res = r->exec(kShort + " --epochs 2 --devices cpu:0,cpu:1");
      EXPECT_EQ(res.exit_code, 0) << res.output;
      return r;
    }();
    return *run;
  }
  static fs::path* root_;
};
fs::path* RnnDp::root_ = nullptr;

TEST_F(RnnDp, LossFalls) {
  SKIP_WITHOUT_WORD_LISTS();
  const TrainingRun& dp = reference_run();
  auto m = read_metrics(dp.metrics());
  ASSERT_EQ(m.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(m[e]["epoch"].get<int>(), e + 1);
    EXPECT_EQ(m[e]["train_words"].get<int>(), 1200);
    EXPECT_TRUE(m[e]["data_parallel"].get<bool>());
    EXPECT_LE(m[e]["test_acc"].get<double>(), 1.0);
  }
  const double first = m[0]["loss"].get<double>(), last = m[1]["loss"].get<double>();
  EXPECT_LT(first, std::log(6.0));  // below chance level already over the first epoch
  // Seen: 1.743 -> 1.563, test_acc 0.339 -> 0.409 (--limit spreads its words over each split, so
  // the test words resemble the training words and accuracy rises with the loss).
  EXPECT_LT(last, 0.95 * first) << "loss did not fall: " << first << " -> " << last;
  EXPECT_GT(m[1]["test_acc"].get<double>(), 0.3) << "chance is 1/6";
  EXPECT_GT(m[1]["test_acc"].get<double>(), m[0]["test_acc"].get<double>());
  for (int e = 1; e <= 2; ++e) EXPECT_TRUE(fs::exists(dp.ckpt() / ("epoch-" + std::to_string(e) + ".safetensors")));
  EXPECT_TRUE(fs::exists(dp.last()));
}

TEST_F(RnnDp, DataParallelMatchesSingleDevice) {
  SKIP_WITHOUT_WORD_LISTS();
  const TrainingRun& dp = reference_run();
  TrainingRun single(*root_, "single");
  RunResult r = single.exec(kShort + " --epochs 2 --single-device");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("single device cpu:0"), std::string::npos) << r.output;
  auto a = read_metrics(dp.metrics()), b = read_metrics(single.metrics());
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_FALSE(b[e]["data_parallel"].get<bool>());
    EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 1e-5) << "epoch " << e + 1;
    EXPECT_NEAR(a[e]["test_acc"].get<double>(), b[e]["test_acc"].get<double>(), 1.0 / 1200) << "epoch " << e + 1;
  }
  expect_same_parameters(dp.last(), single.last(), 1e-5);
}

TEST_F(RnnDp, TimeMajorInputScatteredOnDim1MatchesBatchFirst) {
  SKIP_WITHOUT_WORD_LISTS();
  const TrainingRun& dp = reference_run();
  TrainingRun tb(*root_, "time_major");
  RunResult r = tb.exec(kShort + " --epochs 2 --devices cpu:0,cpu:1 --batch-first false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("input scattered on dim 1, lengths on dim 0, output gathered on dim 1"), std::string::npos)
      << r.output;
  auto a = read_metrics(dp.metrics()), b = read_metrics(tb.metrics());
  ASSERT_EQ(b.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 1e-5) << "epoch " << e + 1;
  }
  expect_same_parameters(dp.last(), tb.last(), 1e-5);
}

TEST_F(RnnDp, ResumeIsBitExact) {
  SKIP_WITHOUT_WORD_LISTS();
  const TrainingRun& whole = reference_run();  // 2 epochs without interruption
  TrainingRun parts(*root_, "parts");
  RunResult r = parts.exec(kShort + " --epochs 1 --devices cpu:0,cpu:1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = parts.exec(kShort + " --epochs 2 --devices cpu:0,cpu:1 --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch=1 "), std::string::npos) << "the resumed run trained epoch 1 again:\n" << r.output;
  ASSERT_NE(r.output.find("epoch=2 "), std::string::npos) << r.output;

  // Every tensor of the final checkpoint (model and Adam state) is byte-for-byte the same.
  auto a = ember::load_safetensors_map(whole.last().string());
  auto b = ember::load_safetensors_map(parts.last().string());
  ASSERT_GT(a.size(), 3u);
  ASSERT_EQ(a.size(), b.size());
  size_t optimizer_tensors = 0;
  for (auto& [name, x] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const ember::Tensor& y = b.at(name);
    ASSERT_EQ(x.sizes(), y.sizes()) << name;
    ASSERT_EQ(x.dtype(), y.dtype()) << name;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << name << " differs";
    optimizer_tensors += name.rfind("optim.", 0) == 0;
  }
  EXPECT_GT(optimizer_tensors, 0u) << "the checkpoint holds no optimizer state";
  auto ma = read_metrics(whole.metrics()), mb = read_metrics(parts.metrics());
  ASSERT_EQ(ma.size(), 2u);
  ASSERT_EQ(mb.size(), 2u);
  EXPECT_EQ(ma[1]["loss"].get<double>(), mb[1]["loss"].get<double>());
  EXPECT_EQ(ma[1]["test_acc"].get<double>(), mb[1]["test_acc"].get<double>());

  // A checkpoint of another run is refused, naming the option.
  r = parts.exec(kShort + " --epochs 3 --devices cpu:0,cpu:1 --resume --seed 7");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("seed=0"), std::string::npos) << r.output;
}

TEST_F(RnnDp, NoTotalLengthFailsWithDataParallelsError) {
  SKIP_WITHOUT_WORD_LISTS();
  TrainingRun run(*root_, "no_total_length");
  RunResult r = run.exec(kShort + " --epochs 1 --devices cpu:0,cpu:1 --no-total-length");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The error line is DataParallel's gather error, which names total_length as the fix.
  const size_t at = r.output.find("rnn_dp: error: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string error = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_NE(error.find("outputs of replicas have different sizes"), std::string::npos) << error;
  EXPECT_NE(error.find("total_length"), std::string::npos) << error;
  EXPECT_EQ(r.output.find("epoch=1 "), std::string::npos) << "the epoch finished:\n" << r.output;
  // Without DataParallel there is nothing to gather, so the same model trains.
  TrainingRun single(*root_, "no_total_length_single");
  r = single.exec(kShort + " --epochs 1 --single-device --no-total-length");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Regression: --limit took the alphabetically first N words of each split, so a quick run trained
// on words A..C and tested on a ten times wider range (test_acc stuck near 0.3 while the loss fell).
// --amp bf16 (autocast on cpu:0 and in the DataParallel replicas) tracks the float32 reference.
TEST_F(RnnDp, AmpBf16TracksFloat32) {
  SKIP_WITHOUT_WORD_LISTS();
  const TrainingRun& dp = reference_run();
  TrainingRun amp(*root_, "amp_bf16");
  RunResult r = amp.exec(kShort + " --epochs 2 --devices cpu:0,cpu:1 --amp bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mixed precision: autocast to bf16 on cpu:0"), std::string::npos) << r.output;
  auto a = read_metrics(dp.metrics()), b = read_metrics(amp.metrics());
  ASSERT_EQ(b.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(b[e]["amp"].get<std::string>(), "bf16");
    // Seen: 1.7426 / 1.5633 against float32's 1.7426 / 1.5632.
    EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 0.01) << "epoch " << e + 1;
  }
  EXPECT_LT(b[1]["loss"].get<double>(), 0.95 * b[0]["loss"].get<double>());
}

// --amp fp16 checkpoints the GradScaler's state and --resume continues from it.
TEST_F(RnnDp, AmpFp16CheckpointsTheLossScale) {
  SKIP_WITHOUT_WORD_LISTS();
  TrainingRun amp(*root_, "amp_fp16");
  RunResult r = amp.exec(kShort + " --epochs 1 --single-device --amp fp16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GradScaler (initial scale 65536)"), std::string::npos) << r.output;
  std::ifstream in(amp.last(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("grad_scaler.scale\":\"65536\""), std::string::npos);  // 19 clean steps: no change
  EXPECT_NE(bytes.find("grad_scaler._growth_tracker\":\"19\""), std::string::npos);
  r = amp.exec(kShort + " --epochs 2 --single-device --amp fp16 --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  std::ifstream in2(amp.last(), std::ios::binary);
  const std::string bytes2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes2.find("grad_scaler._growth_tracker\":\"38\""), std::string::npos);  // continued, not restarted
}

TEST(RnnDpData, LimitDrawsTrainAndTestWordsFromTheSameRange) {
  if (!have_word_lists()) GTEST_SKIP() << "the word lists are not installed (scripts/setup.sh installs them)";
  const rnn_dp::WordLangSplits full = rnn_dp::load_wordlang(kDictDir);
  const rnn_dp::WordLangSplits small = rnn_dp::load_wordlang(kDictDir, 200);
  ASSERT_EQ(small.train.size(), 6u * 200);
  ASSERT_EQ(small.test.size(), 6u * 200);
  for (int64_t label = 0; label < 6; ++label) {
    auto words_of = [label](const std::vector<rnn_dp::Word>& split) {
      std::vector<std::string> out;
      for (const rnn_dp::Word& w : split)
        if (w.label == label) out.push_back(w.bytes);
      return out;
    };
    const std::vector<std::string> train = words_of(small.train), test = words_of(small.test);
    ASSERT_EQ(train.size(), 200u);
    ASSERT_EQ(test.size(), 200u);
    // Every limited word is a word of the same split of the full recipe.
    const std::vector<std::string> full_train = words_of(full.train), full_test = words_of(full.test);
    const std::set<std::string> full_train_set(full_train.begin(), full_train.end());
    const std::set<std::string> full_test_set(full_test.begin(), full_test.end());
    for (const std::string& w : train) EXPECT_TRUE(full_train_set.count(w)) << w;
    for (const std::string& w : test) EXPECT_TRUE(full_test_set.count(w)) << w;
    // Both splits span the full split's range: the first word of each lies in the first 1% of its
    // full split, the last in the last 1%; and about half the training words come before the
    // median test word in the word list (the old head-of-list subset put all of them before it).
    // Positions are relative to each full split, which interleave in the word list's order.
    auto position = [](const std::vector<std::string>& in, const std::string& w) {
      return static_cast<double>(std::find(in.begin(), in.end(), w) - in.begin()) / static_cast<double>(in.size());
    };
    EXPECT_LT(position(full_train, train.front()), 0.01) << "language " << label;
    EXPECT_GT(position(full_train, train.back()), 0.99) << "language " << label;
    EXPECT_LT(position(full_test, test.front()), 0.01) << "language " << label;
    EXPECT_GT(position(full_test, test.back()), 0.99) << "language " << label;
    const double test_median = position(full_test, test[test.size() / 2]);
    const auto below = std::count_if(train.begin(), train.end(),
                                     [&](const std::string& w) { return position(full_train, w) < test_median; });
    EXPECT_NEAR(static_cast<double>(below) / static_cast<double>(train.size()), 0.5, 0.1) << "language " << label;
  }
}

TEST(RnnDpCli, BadFlagsExitWith2AndSayWhy) {
  RunResult r = run_rnn_dp("--epochs zero");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--epochs"), std::string::npos) << r.output;
  r = run_rnn_dp("--frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--frobnicate"), std::string::npos) << r.output;
  r = run_rnn_dp("--amp fp8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--amp: expected bf16 or fp16, got 'fp8'"), std::string::npos) << r.output;
  r = run_rnn_dp("--devices cpu:0,gpu:1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_rnn_dp("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--no-total-length"), std::string::npos) << r.output;
}

// rnn_dp reads the job flags with examples/common's parse_job_flag (tests/examples/job_flags_test.cpp).
TEST(RnnDpCli, JobFlagsAreRead) {
  std::vector<const char*> argv{"rnn_dp", "--seed", "42", "--resume", "--epochs", "1"};
  const rnn_dp::Options o = rnn_dp::parse_options(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(o.seed, 42u);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.epochs, 1);
}

// Regression: errors whose text began with "rnn_dp: " (and join_job's, which began with the
// program name) were printed as "rnn_dp: error: rnn_dp: ...". main() alone names the program.
TEST(RnnDpCli, ErrorsNameTheProgramOnce) {
  RunResult r = run_command("env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE " +
                            std::string(RNN_DP_BINARY) + " --ddp --progress none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rnn_dp: error: --ddp needs a launcher"), std::string::npos) << r.output;
  r = run_rnn_dp("--dict-dir /nonexistent/dict --limit 10 --progress none --workers 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rnn_dp: error: the english word list /nonexistent/dict/"), std::string::npos) << r.output;
}

}  // namespace
