// Writes the seed corpus of every fuzz target into <dir>/<target>/ (fuzz/corpus in the
// repository holds its output; rerun it after a format change):
//   make_seeds fuzz/corpus
// Seeds are small valid inputs (and a few near misses), so the fuzzers start deep in each
// parser instead of at its first length check.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/factory.h"
#include "core/serialization.h"
#include "data/detail/wire.h"
#include "data/detail/worker_reply.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/seed_model.h"
#include "nn/checkpoint.h"
#include "parallel/distributed/detail/wire.h"
#include "parallel/distributed/tcp/detail/op_header.h"

namespace fs = std::filesystem;
using namespace ember;

namespace {

using Bytes = std::string;

void write_seed(const fs::path& dir, const std::string& name, const Bytes& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// ---- safetensors -------------------------------------------------------------------------
void safetensors_seeds(const fs::path& dir, const fs::path& tmp) {
  const fs::path f = tmp / "seed.safetensors";
  save_safetensors(f, {{"w", tensor({1, 2, 3, 4, 5, 6}, {2, 3})}});
  write_seed(dir, "one_f32", read_file(f));
  save_safetensors(f,
                   {{"a", arange(5)},
                    {"b", tensor({1, 0, 1}, {3}, TensorOptions(kBool))},
                    {"c", tensor({0.5, -2}, {2}, TensorOptions(kFloat64))},
                    {"d", tensor({7}, {}, TensorOptions(kInt32))},
                    {"e", zeros({0, 4})},
                    {"f", tensor({1.5, 2.5}, {2}, TensorOptions(kBFloat16))},
                    {"g", tensor({3, 4}, {1, 2}, TensorOptions(kFloat16))}},
                   {{"format", "pt"}, {"note", "seed"}});
  write_seed(dir, "all_dtypes_metadata", read_file(f));
  save_safetensors(f, {});
  write_seed(dir, "empty", read_file(f));
}

// ---- checkpoint --------------------------------------------------------------------------
void checkpoint_seeds(const fs::path& dir, const fs::path& tmp) {
  const fs::path f = tmp / "seed.ckpt";
  fuzz::SeedModel m;
  m.step();
  nn::save_checkpoint(f, *m.net, m.opt.get(), {{"epoch", "3"}});
  const Bytes with_optim = read_file(f);
  write_seed(dir, "model_adam_strict", Bytes(1, '\0') + with_optim);
  write_seed(dir, "model_adam_rng", Bytes(1, '\2') + with_optim);
  nn::save_checkpoint(f, *m.net);
  write_seed(dir, "model_only_nonstrict", Bytes(1, '\1') + read_file(f));
}

// ---- TCPStore frames ---------------------------------------------------------------------
namespace sw = parallel::detail;

Bytes frame(sw::FrameWriter w) {
  std::vector<uint8_t> v = w.finish();
  return Bytes(v.begin(), v.end());
}
sw::FrameWriter op(sw::Op o) { return std::move(sw::FrameWriter().u8(static_cast<uint8_t>(o))); }

void store_seeds(const fs::path& dir) {
  // Byte 0 bit 0: the harness authenticates first.
  const Bytes authed(1, '\1'), raw(1, '\0');
  auto set = op(sw::Op::kSet).bytes(std::string_view("k")).bytes(std::string_view("v"));
  auto get = op(sw::Op::kGet).bytes(std::string_view("k"));
  auto add = op(sw::Op::kAdd).bytes(std::string_view("n")).i64(5);
  auto cas = op(sw::Op::kCompareSet).bytes(std::string_view("k")).bytes(std::string_view("v")).bytes(std::string_view("w"));
  auto check = op(sw::Op::kCheck).u32(2).bytes(std::string_view("k")).bytes(std::string_view("n"));
  auto wait = op(sw::Op::kWait).u32(1).bytes(std::string_view("k"));
  auto del = op(sw::Op::kDelete).bytes(std::string_view("k"));
  auto num = op(sw::Op::kNumKeys);
  auto ping = op(sw::Op::kPing);
  write_seed(dir, "session", authed + frame(set) + frame(get) + frame(add) + frame(cas) + frame(check) + frame(wait) +
                                 frame(del) + frame(num) + frame(ping));
  auto get_missing = op(sw::Op::kGet).bytes(std::string_view("missing"));
  write_seed(dir, "parked_get", authed + frame(get_missing) + frame(ping));
  auto wait_missing = op(sw::Op::kWait).u32(2).bytes(std::string_view("x")).bytes(std::string_view("y"));
  write_seed(dir, "parked_wait", authed + frame(wait_missing));
  auto add_text = op(sw::Op::kAdd).bytes(std::string_view("k")).i64(1);
  write_seed(dir, "add_to_text", authed + frame(set) + frame(add_text));
  auto auth = op(sw::Op::kAuth).bytes(sw::kAuthMagic).bytes(std::string_view("fuzz-token"));
  write_seed(dir, "own_auth", raw + frame(auth) + frame(ping));
  auto bad_auth = op(sw::Op::kAuth).bytes(sw::kAuthMagic).bytes(std::string_view("wrong"));
  write_seed(dir, "wrong_token", raw + frame(bad_auth) + frame(ping));
}

// ---- tcp op header -----------------------------------------------------------------------
void op_header_seeds(const fs::path& dir) {
  using parallel::OpType;
  using parallel::tcp::detail::OpHeader;
  // Bytes 0-1 choose this rank's collective and dtype; then the peer's header and 64 bytes.
  auto seed = [&](const std::string& name, OpType type, bool threaded, DType dtype, const OpHeader& theirs,
                  size_t payload) {
    Bytes b;
    b += static_cast<char>(static_cast<int>(type) | (threaded ? 8 : 0));
    b += static_cast<char>(static_cast<int>(dtype));
    b.append(reinterpret_cast<const char*>(&theirs), sizeof theirs);
    for (size_t i = 0; i < payload; ++i) b += static_cast<char>(i);
    write_seed(dir, name, b);
  };
  seed("match_all_reduce", OpType::ALL_REDUCE, false, kFloat32,
       OpHeader::make(OpType::ALL_REDUCE, 1, 0, kFloat32, 64), 64);
  seed("match_broadcast_threaded", OpType::BROADCAST, true, kInt64,
       OpHeader::make(OpType::BROADCAST, 1, 0, kInt64, 64, 0), 64);
  seed("mismatch_op", OpType::ALL_REDUCE, false, kFloat32, OpHeader::make(OpType::BARRIER, 1, 0, kFloat32, 64, 3), 64);
  seed("short_payload", OpType::REDUCE, true, kFloat64,
       OpHeader::make(OpType::REDUCE, 1, 0, kFloat64, 64, 0, parallel::ReduceOp::MAX), 10);
}

// ---- DataLoader wire ---------------------------------------------------------------------
Bytes stream_of(const std::vector<Bytes>& payloads) {
  fuzz::SocketPair pair;
  for (const Bytes& p : payloads) data::detail::send_frame(pair.writer, p);
  pair.close_writer();
  Bytes out;
  char buf[4096];
  ssize_t r;
  while ((r = ::read(pair.reader, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(r));
  return out;
}

void wire_seeds(const fs::path& dir) {
  using data::detail::ByteWriter;
  ByteWriter fetch;
  fetch.put<uint8_t>(1);
  fetch.put<uint64_t>(7);
  fetch.put<uint64_t>(3);
  for (uint64_t i : {4, 9, 2}) fetch.put<uint64_t>(i);
  ByteWriter reset;
  reset.put<uint8_t>(2);
  write_seed(dir, "tasks", stream_of({fetch.take(), reset.take()}));

  // Replies as a worker writes them (data/detail/worker_reply.h): a batch of two float32
  // [2, 4] tensors and an empty int64 one in a 128-byte buffer, whose structure bytes say
  // "a vector of one map {"x": tensor, "y": tensor, "z": tensor}" (the fuzz target's batch type).
  std::vector<Tensor> tensors{zeros({2, 4}), zeros({2, 4}), zeros({0}, TensorOptions(kInt64))};
  ByteWriter meta;
  meta.put<uint64_t>(1);
  meta.put<uint64_t>(3);
  for (const char* key : {"x", "y", "z"}) {
    meta.put_string(key);
    meta.put<uint8_t>(1);  // optional engaged
    meta.put<uint8_t>(1);  // tensor defined
  }
  using data::detail::batch_reply;
  const Bytes batch = batch_reply(7, 128, tensors, {0, 64, 128}, meta.bytes());
  const Bytes error = data::detail::error_reply(8, ErrorCode::kValue, "ValueError: bad sample");
  const Bytes exhausted = data::detail::exhausted_reply(9);
  // Replies the parent must refuse: a tensor past its buffer, and a byte count that wraps.
  const Bytes past = batch_reply(10, 64, {zeros({64})}, {0}, "");
  ByteWriter wraps;
  wraps.put<uint8_t>(1);
  wraps.put<uint64_t>(11);
  wraps.put<uint64_t>(4096);
  wraps.put<uint64_t>(1);
  wraps.put<int8_t>(static_cast<int8_t>(kInt64));
  wraps.put<uint64_t>(1);
  wraps.put<int64_t>(int64_t{1} << 61);  // 2^61 * 8 bytes wraps to 0
  wraps.put<uint64_t>(0);
  wraps.put_string("");
  write_seed(dir, "bad_replies", stream_of({past, wraps.take()}));
  write_seed(dir, "replies", stream_of({batch, error, exhausted}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  const fs::path tmp = fs::temp_directory_path() / ("ember_make_seeds_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  safetensors_seeds(root / "safetensors", tmp);
  checkpoint_seeds(root / "checkpoint", tmp);
  store_seeds(root / "store_frame");
  op_header_seeds(root / "tcp_op_header");
  wire_seeds(root / "dataloader_wire");
  fs::remove_all(tmp);
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
