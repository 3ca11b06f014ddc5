// tensorboard_fixture MODE DIR: writes event files for tensorboard_reader_test.py, which reads
// them with TensorBoard's own reader.
//   all    every kind of summary; DIR/expected.json lists each tag, step and value written
//   crash  scalar "loss" = step at steps 0, 1, ... forever, flushing every 10 steps and printing
//          "flushed N" (N events on disk) after each flush; the test kills it with SIGKILL
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "tensorboard/summary_writer.h"

namespace {

std::string json_list(const std::vector<double>& v) {
  std::ostringstream o;
  o << std::setprecision(17) << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
  return o.str();
}

int write_all(const std::string& dir) {
  ember::SummaryWriter w(dir);
  std::ostringstream exp;
  exp << std::setprecision(17) << "{\"file\": \"" << w.file_path() << "\", \"scalars\": [";
  bool first = true;
  auto scalar = [&](const std::string& run, const std::string& tag, int64_t step, double v) {
    exp << (first ? "" : ", ") << "{\"run\": \"" << run << "\", \"tag\": \"" << tag << "\", \"step\": " << step
        << ", \"value\": " << v << "}";
    first = false;
  };
  for (int64_t s = 0; s < 50; ++s) {
    double loss = 2.0 / (1.0 + 0.1 * s) + 0.01 * std::sin(s);
    double lr = 1e-3 * std::pow(0.9, s / 10);
    w.add_scalar("train/loss", loss, s);
    w.add_scalar("train/lr", lr, s);
    scalar(".", "train/loss", s, loss);
    scalar(".", "train/lr", s, lr);
  }
  for (int64_t s = 0; s < 5; ++s) {
    double train = 0.5 + 0.1 * s, test = 0.45 + 0.09 * s;
    w.add_scalars("accuracy", {{"train", train}, {"test", test}}, s);
    scalar("accuracy_train", "accuracy", s, train);
    scalar("accuracy_test", "accuracy", s, test);
  }
  exp << "], \"histograms\": [";
  for (int64_t s = 0; s < 3; ++s) {
    std::vector<double> v;
    for (int i = 0; i < 200; ++i) v.push_back(std::sin(0.37 * i + s) * (1 + s));
    ember::Tensor t = ember::from_vector(std::vector<float>(v.begin(), v.end()), {200});
    w.add_histogram("weights/fc", t, s, 20);
    std::vector<double> as_float(v.size());  // what the tensor holds
    for (size_t i = 0; i < v.size(); ++i) as_float[i] = static_cast<float>(v[i]);
    exp << (s ? ", " : "") << "{\"tag\": \"weights/fc\", \"step\": " << s << ", \"bins\": 20, \"values\": "
        << json_list(as_float) << "}";
  }
  exp << "], \"texts\": [";
  w.add_text("notes", "**ember** writes *TensorBoard* files", 0);
  w.add_text("notes", "second entry", 7);
  exp << "{\"tag\": \"notes\", \"step\": 0, \"text\": \"**ember** writes *TensorBoard* files\"}, "
      << "{\"tag\": \"notes\", \"step\": 7, \"text\": \"second entry\"}";
  exp << "]}\n";
  w.close();
  std::ofstream(dir + "/expected.json") << exp.str();
  return 0;
}

int crash(const std::string& dir) {
  ember::SummaryWriter w(dir);
  for (int64_t s = 0;; ++s) {
    w.add_scalar("loss", static_cast<double>(s), s);
    if ((s + 1) % 10 == 0) {
      w.flush();
      std::printf("flushed %lld\n", static_cast<long long>(s + 1));
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tensorboard_fixture all|crash DIR\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "all") return write_all(argv[2]);
  if (mode == "crash") return crash(argv[2]);
  std::fprintf(stderr, "tensorboard_fixture: unknown mode '%s' (expected all or crash)\n", argv[1]);
  return 2;
}
