// SummaryWriter and the event encoding, read back by a small record walker here; TensorBoard's
// own reader checks the same files in tensorboard_reader_test.py.
#include "tensorboard/summary_writer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/warning.h"
#include "tensorboard/detail/crc32c.h"
#include "tensorboard/event_encoding.h"
#include "tests/support/error_text.h"

namespace fs = std::filesystem;
using namespace ember;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ember_tb_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

uint64_t le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

// The records' data, checking both CRCs of each; stops at a torn or corrupt record.
std::vector<std::string> records(const std::string& file) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 12 <= file.size()) {
    uint64_t n = le(file, at, 8);
    if (tensorboard::detail::mask_crc(tensorboard::detail::crc32c(file.substr(at, 8))) != le(file, at + 8, 4)) break;
    if (at + 12 + n + 4 > file.size()) break;
    std::string data = file.substr(at + 12, n);
    if (tensorboard::detail::mask_crc(tensorboard::detail::crc32c(data)) != le(file, at + 12 + n, 4)) break;
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

struct EnvGuard {
  explicit EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (old_.empty()) ::unsetenv(name_);
    else ::setenv(name_, old_.c_str(), 1);
  }
  const char* name_;
  std::string old_;
};

}  // namespace

// RFC 3720's test vectors for CRC-32C (B.4): 32 zero bytes, 32 bytes 0xFF, and "123456789".
TEST(Crc32c, MatchesPublishedVectors) {
  EXPECT_EQ(tensorboard::detail::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(tensorboard::detail::crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(tensorboard::detail::crc32c("123456789"), 0xE3069283u);
}

TEST(EventEncoding, RecordFramesLengthDataAndBothCrcs) {
  std::string out;
  tensorboard::append_record(out, "abc");
  tensorboard::append_record(out, std::string(300, 'x'));
  ASSERT_EQ(out.size(), (12 + 3 + 4) + (12 + 300 + 4));
  auto r = records(out);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "abc");
  EXPECT_EQ(r[1], std::string(300, 'x'));
  out[14] ^= 1;  // a flipped bit in the first record's data fails its CRC
  EXPECT_TRUE(records(out).empty());
}

TEST(EventEncoding, FileVersionEventHoldsBrainEvent2) {
  std::string e = tensorboard::encode_file_version_event(1.5);
  EXPECT_NE(e.find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(static_cast<unsigned char>(e[0]), (1u << 3) | 1u);  // field 1 (wall_time), a double
}

TEST(EventEncoding, HistogramBucketsCountEveryValueOnce) {
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(i * 0.37 - 5);
  auto h = tensorboard::make_histogram(v, 7);
  ASSERT_EQ(h.bucket.size(), 7u);
  double total = 0;
  for (double c : h.bucket) total += c;
  EXPECT_EQ(total, 100);
  EXPECT_EQ(h.min, -5);
  EXPECT_DOUBLE_EQ(h.max, 99 * 0.37 - 5);
  EXPECT_EQ(h.bucket_limit.back(), h.max);
  for (size_t i = 0; i < 7; ++i) {  // bucket i holds (limit[i-1], limit[i]], the minimum in the first
    double lo = i == 0 ? -INFINITY : h.bucket_limit[i - 1];
    double n = 0;
    for (double x : v) n += (x > lo && x <= h.bucket_limit[i]) ? 1 : 0;
    EXPECT_EQ(h.bucket[i], n) << "bucket " << i;
  }
  auto one = tensorboard::make_histogram(std::vector<double>(5, 2.0), 10);
  ASSERT_EQ(one.bucket.size(), 1u);
  EXPECT_EQ(one.bucket[0], 5);
}

TEST(EventEncoding, HistogramRejectsEmptyAndNonFinite) {
  EXPECT_THROW(tensorboard::make_histogram(std::vector<double>{}, 4), ValueError);
  EXPECT_THROW(tensorboard::make_histogram(std::vector<double>{1, NAN}, 4), ValueError);
  EXPECT_THROW(tensorboard::make_histogram(std::vector<double>{1, INFINITY}, 4), ValueError);
  EXPECT_THROW(tensorboard::make_histogram(std::vector<double>{1}, 0), ValueError);
}

TEST(SummaryWriter, WritesNamedFileStartingWithFileVersion) {
  std::string dir = temp_dir("named");
  {
    SummaryWriter w(dir);
    w.add_scalar("loss", 0.5, 3);
    w.add_text("notes", "hello", 0);
    w.add_histogram("w", arange(0.0, 10.0, 1.0, kFloat32), 1);
    w.flush();
    std::string name = fs::path(w.file_path()).filename().string();
    EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
    EXPECT_NE(name.find("." + std::to_string(::getpid())), std::string::npos) << name;
    auto r = records(read_all(w.file_path()));
    ASSERT_EQ(r.size(), 4u);
    EXPECT_NE(r[0].find("brain.Event:2"), std::string::npos);
    EXPECT_NE(r[1].find("loss"), std::string::npos);
  }
  fs::remove_all(dir);
}

TEST(SummaryWriter, AddScalarsWritesOneRunPerKey) {
  std::string dir = temp_dir("scalars");
  {
    SummaryWriter w(dir);
    w.add_scalars("acc/split", {{"train", 0.9}, {"test", 0.8}}, 1);
    w.add_scalars("acc/split", {{"train", 0.95}, {"test", 0.85}}, 2);
    w.close();
  }
  for (const char* run : {"acc_split_train", "acc_split_test"}) {
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(fs::path(dir) / run)) files.push_back(e.path());
    ASSERT_EQ(files.size(), 1u) << run;
    EXPECT_EQ(records(read_all(files[0].string())).size(), 3u) << run;
  }
  fs::remove_all(dir);
}

TEST(SummaryWriter, OnlyRankZeroWritesByDefault) {
  std::string dir = temp_dir("rank");
  {
    EnvGuard rank("RANK", "1");
    SummaryWriter w(dir);
    EXPECT_FALSE(w.enabled());
    w.add_scalar("loss", 1.0, 0);
    w.flush();
    EXPECT_FALSE(fs::exists(dir));
    SummaryWriterOptions all;
    all.all_ranks = true;
    SummaryWriter every(dir, all);
    EXPECT_TRUE(every.enabled());
    every.add_scalar("loss", 1.0, 0);
    every.close();
    EXPECT_EQ(records(read_all(every.file_path())).size(), 2u);
  }
  fs::remove_all(dir);
}

TEST(SummaryWriter, BadInputIsValueError) {
  std::string dir = temp_dir("bad");
  SummaryWriter w(dir);
  EXPECT_THROW(w.add_scalar("", 1.0), ValueError);
  EXPECT_THROW(w.add_histogram("h", std::vector<double>{}), ValueError);
  EXPECT_THROW(w.add_histogram("h", full({3}, NAN, kFloat32)), ValueError);
  EXPECT_THROW(w.add_scalars("s", {{"", 1.0}}), ValueError);
  w.close();
  fs::remove_all(dir);
}

TEST(SummaryWriter, FullQueueDropsAndCountsWithoutWaiting) {
  std::string dir = temp_dir("flood");
  SummaryWriterOptions o;
  o.max_queue = 1;
  constexpr int kEvents = 20000;
  std::vector<std::string> warnings;  // through ember's warning facility, never raw stderr
  const WarningHandler before = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  {
    SummaryWriter w(dir, o);
    for (int i = 0; i < kEvents; ++i) w.add_scalar("x", i, i);
    w.close();
    auto r = records(read_all(w.file_path()));
    EXPECT_GT(w.dropped_events(), 0);
    EXPECT_EQ(static_cast<int64_t>(r.size()) - 1 + w.dropped_events(), kEvents);
  }
  set_warning_handler(before);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.front().find("SummaryWriter: the queue is full (1 events waiting for"), std::string::npos)
      << warnings.front();
  EXPECT_NE(warnings.back().find("events dropped in all for " + dir), std::string::npos) << warnings.back();
  fs::remove_all(dir);
}

TEST(SummaryWriter, UnwritableDirectoryNamesThePath) {
  const std::string err = support::error_of<Error>([&] { SummaryWriter w("/proc/ember_no_such_dir/run"); });
  EXPECT_NE(err.find("/proc/ember_no_such_dir/run"), std::string::npos) << err;
}
