// all_reduce: ring reduce-scatter followed by ring all-gather, chunked and pipelined.
//
// Note [Ring pipeline]
// The tensor is cut into size() chunks (nearly equal; some may be empty) and each chunk into
// nseg segments of at most segment_bytes. Step g = 0 .. 2(n-1)-1: rank r sends chunk
// (r - g) mod n to rank r+1 and receives chunk (r - g - 1) mod n from rank r-1. During the
// first n-1 steps (reduce-scatter) a received segment lands in a one-segment buffer and is
// reduced into place; after them rank r holds the reduced chunk (r + 1) mod n, and in the
// last n-1 steps (all-gather) received segments land in place directly. Item i = g*nseg + k
// is segment k of step g. Send i (for g > 0) forwards what receive i - nseg produced, so it
// waits for exactly that receive: the sender thread streams segments as soon as each is
// reduced while the receiving thread takes in the next, and the kernel's socket buffers
// keep the wire busy while a segment is being reduced. Causality makes the in-place writes
// safe: receive i can only arrive after the peer got our send i - nseg, so memory is never
// overwritten before it was sent. AVG divides each segment by n right after its last
// reduction, before the all-gather sends it. Large tensors run the ring block by block
// (block_bytes each, back to back in one plan): a block's data is still in the cache when
// its all-gather sends what its reduce-scatter just wrote, which halves the memory traffic.
//
// Note [Same-host all_reduce]
// When all ranks share this host and may read each other's memory (probe_cma, at group
// construction), an all_reduce of at least cma_min_bytes runs the same ring without moving
// its data through TCP: at step g a rank tells its next neighbour, in a 40-byte record on
// their connection, where in its tensor the chunk of that step is; the neighbour copies it
// with process_vm_readv (one kernel copy, segment by segment into a cache-sized buffer that it
// reduces from, or straight into place in the all-gather) and answers with an
// acknowledgement. A region a rank advertised is only overwritten (all-gather, in place) once
// the reader acknowledged that step, and the collective returns only once the last step was
// acknowledged, so no peer ever reads memory that is changing or that the caller got back.
// The connections carry every record, so a dead peer (connection closed, or the copy failing
// with "No such process") or a hung one (deadline) fails the collective as on the TCP path.
// It is the fallback where shared memory is not available (below).
//
// Note [Shared-memory all_reduce]
// When all ranks share this host (SharedMemory::create, at group construction), every
// all_reduce runs through the ranks' shared-memory segments instead (tcp/detail/shm.h), in
// rounds of at most shm_bytes of the tensor. "The tensor" may be several: all_reduce_coalesced
// hands the list as one flat range (FlatView), read and written in place piece by piece, so
// DDP's buckets need no flat copy of their gradients (Note [Direct buckets] in
// parallel/reducer.cpp). In round k, rank r owns chunk r of the block
// (part_begin). It (1) waits until every peer finished reading its data area in round k-1
// (their `done` reached k-1), (2) copies every chunk but its own into its data area at the
// chunk's offset, writes the op header and publishes `posted` = k, (3) waits for every peer's
// `posted` and compares their headers with its own (ranks in different collectives fail
// naming both; and since every collective's start is published in the control block too,
// ShmControl::entered, a peer found in a collective of another kind at the same point fails
// the wait at once rather than at the timeout), (4) reduces its own chunk in place in its tensor, reading the peers' copies
// straight from their segments (64 KiB at a time, AVG dividing as each piece is complete),
// copies the result into its own data area's chunk r (which step 2 left free) and publishes
// `reduced`, (5) copies each peer's reduced chunk from that peer's data area into its tensor,
// and publishes `done`. Nothing a peer reads is overwritten before the peer said it was done
// with it, and a rank never reads its peers' tensors, so the collective returns without a
// last handshake. Per byte of the tensor that is one copy out, one reduction over n inputs
// for 1/n of it and one copy in: no system call per byte, no kernel copy and no page pinning
// (the TCP and CMA paths pay those per segment), and a handful of futex calls per round.
// Only the chunk's owner computes it, so every rank gets bit-identical results. Waits sleep
// on futexes, in slices that also check the peer's connection: a dead peer (connection
// closed), a hung one (deadline) or a peer whose group broke (its `aborted` flag) fails the
// collective and breaks the group, as on the TCP path; a failing rank raises its own flag.
//
// Note [Small shared-memory all_reduce]
// Three waits per round cost more than the data moved when the tensor is small: an all_reduce
// of at most kSmallShmBytes (and at most half the data area) runs one round in which every
// rank copies its whole input into half k % 2 of its data area, publishes `posted` = k, waits
// for every peer's `posted`, and combines the n copies itself, in rank order (so the ranks
// get the same bits), piece by piece into its tensor, then publishes `done`. Its only wait for
// the peers is `posted`: the half it writes was last read in round k-2 (k-1 when that round
// used the whole area), whose `done` is long published in a run of collectives. Headers live
// in slot k % 2 for the same reason: a peer may still compare round k-1's.
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>

#include "core/ops/native.h"
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/tcp/collectives.h"
#include "parallel/distributed/tcp/detail/cma.h"
#include "parallel/distributed/tcp/detail/shm.h"

namespace ember::parallel::tcp {

namespace {

// The elements one all_reduce works on, as one flat range: a tensor, or the tensors of an
// all_reduce_coalesced in order (Note [Shared-memory all_reduce] reads and writes them in place).
class FlatView {
 public:
  explicit FlatView(const std::vector<Tensor>& tensors) {
    esz_ = static_cast<int64_t>(tensors.front().element_size());
    for (const Tensor& t : tensors) {
      starts_.push_back(numel_);
      data_.push_back(static_cast<uint8_t*>(t.raw_data()));
      numel_ += t.numel();
    }
  }
  int64_t numel() const { return numel_; }
  /// fn(pointer, offset from begin, elements) over the contiguous pieces of [begin, begin + len).
  template <class F>
  void for_each(int64_t begin, int64_t len, F&& fn) const {
    if (len <= 0) return;
    // The last tensor starting at or before `begin` (empty tensors share their successor's start).
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
    const int64_t end = begin + len;
    for (int64_t pos = begin; pos < end; ++i) {
      const int64_t stop = std::min(end, i + 1 < starts_.size() ? starts_[i + 1] : numel_);
      if (stop > pos) fn(data_[i] + (pos - starts_[i]) * esz_, pos - begin, stop - pos);
      pos = std::max(pos, stop);
    }
  }

 private:
  std::vector<int64_t> starts_;
  std::vector<uint8_t*> data_;
  int64_t numel_ = 0;
  int64_t esz_ = 1;
};

// Note [Small shared-memory all_reduce]: up to here one round that reads all n copies on every
// rank beats three waits; above it the chunked round's 1/n of the reduction per rank wins.
constexpr size_t kSmallShmBytes = 64 << 10;

void all_reduce_one(detail::Context& ctx, const OpInfo& info, Tensor& t, uint32_t part, ReduceOp op) {
  const int n = ctx.size;
  const int r = ctx.rank;
  const int64_t numel = t.numel();
  const int64_t esz = static_cast<int64_t>(t.element_size());
  const DType dtype = t.dtype();
  uint8_t* base = static_cast<uint8_t*>(t.raw_data());
  const int64_t seg_elems = std::max<int64_t>(1, static_cast<int64_t>(ctx.segment_bytes) / esz);
  const int64_t block_elems = std::max<int64_t>(n, static_cast<int64_t>(ctx.block_bytes) / esz);
  const int steps = 2 * (n - 1);
  uint8_t* tmp = ctx.tmp(static_cast<size_t>(seg_elems * esz));

  detail::PipelinePlan plan;
  plan.send_socket = &ctx.socket(ctx.next());
  plan.send_peer = ctx.next();
  plan.recv_socket = &ctx.socket(ctx.prev());
  plan.recv_peer = ctx.prev();
  plan.header = detail::OpHeader::make(info.type, info.seq, part, dtype, t.nbytes(), -1, op);
  plan.deadline = ctx.deadline();
  struct RecvInfo {
    int64_t begin;     // first element it covers
    bool reduce;       // reduce-scatter: combine tmp into place
    bool last_reduce;  // its final reduction (AVG divides here)
  };
  std::vector<RecvInfo> infos;
  // See Note [Ring pipeline]: the ring runs over one block at a time, the blocks back to back.
  for (int64_t b0 = 0; b0 < numel; b0 += block_elems) {
    const int64_t blen = std::min(block_elems, numel - b0);
    const int64_t max_chunk = (blen + n - 1) / n;
    const int64_t nseg = std::max<int64_t>(1, (max_chunk + seg_elems - 1) / seg_elems);
    const int64_t first = static_cast<int64_t>(plan.recvs.size());  // this block's receive 0
    auto seg_range = [&](int c, int64_t k, int64_t* begin, int64_t* len) {
      const int64_t cb = b0 + detail::part_begin(blen, n, c);
      const int64_t ce = b0 + detail::part_begin(blen, n, c + 1);
      const int64_t b = std::min(ce, cb + k * seg_elems);
      *begin = b;
      *len = std::min(ce, b + seg_elems) - b;
    };
    for (int g = 0; g < steps; ++g) {
      const int send_chunk = ((r - g) % n + n) % n;
      const int recv_chunk = ((r - g - 1) % n + n) % n;
      const bool reducing = g < n - 1;
      for (int64_t k = 0; k < nseg; ++k) {
        int64_t b, len;
        seg_range(send_chunk, k, &b, &len);
        plan.sends.push_back({base + b * esz, static_cast<size_t>(len * esz), g == 0 ? -1 : first + (g - 1) * nseg + k});
        seg_range(recv_chunk, k, &b, &len);
        // All-gather writes in place over what step g+1-n sent from there.
        const int64_t after_send = reducing ? -1 : first + (g + 1 - n) * nseg + k;
        plan.recvs.push_back({reducing ? tmp : base + b * esz, static_cast<size_t>(len * esz), after_send});
        infos.push_back({b, reducing, g == n - 2});
      }
    }
  }
  plan.on_received = [&](size_t i) {
    const RecvInfo& ri = infos[i];
    if (!ri.reduce) return;  // all-gather: already in place
    const int64_t len = static_cast<int64_t>(plan.recvs[i].num_bytes) / esz;
    uint8_t* dst = base + ri.begin * esz;
    parallel::detail::reduce_into(dtype, op, dst, dst, tmp, len);
    if (op == ReduceOp::AVG && ri.last_reduce) parallel::detail::divide_by(dtype, dst, len, n);
  };
  ctx.run(info, plan);
}

// One record of the same-host path: where a step's chunk is (kDesc), or that it was read (kAck).
struct CmaRecord {
  static constexpr uint32_t kMagic = 0x454d4331;  // "EMC1"
  static constexpr uint32_t kDesc = 1, kAck = 2;
  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint64_t seq = 0;
  uint32_t part = 0;
  uint32_t step = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
};
static_assert(sizeof(CmaRecord) == 40, "CmaRecord is a wire format");

[[noreturn]] void cma_fail(detail::Context& ctx, const OpInfo& info, detail::PipelineFailure f) {
  const std::string msg = detail::describe_failure(info, f, ctx.timeout_ms);
  if (ctx.state->break_group(msg)) EMBER_THROW(DistributedError, msg);
  EMBER_THROW(DistributedError, info.description, " aborted: ", ctx.state->reason());
}

// See Note [Same-host all_reduce].
void all_reduce_cma(detail::Context& ctx, const OpInfo& info, Tensor& t, uint32_t part, ReduceOp op) {
  using detail::IoResult;
  using detail::PipelineFailure;
  ctx.state->check_not_broken(info.description);
  const int n = ctx.size;
  const int r = ctx.rank;
  const int next = ctx.next(), prev = ctx.prev();
  const int64_t numel = t.numel();
  const int64_t esz = static_cast<int64_t>(t.element_size());
  const DType dtype = t.dtype();
  uint8_t* base = static_cast<uint8_t*>(t.raw_data());
  const int64_t seg_elems = std::max<int64_t>(1, static_cast<int64_t>(ctx.segment_bytes) / esz);
  const int steps = 2 * (n - 1);
  const pid_t prev_pid = ctx.cma_pids[static_cast<size_t>(prev)];
  const auto deadline = ctx.deadline();
  detail::Socket& to_next = ctx.socket(next);
  detail::Socket& from_prev = ctx.socket(prev);

  // The op header, as the TCP path sends it (marked as this path's), so that ranks running
  // different collectives fail with a clear message.
  detail::OpHeader header = detail::OpHeader::make(info.type, info.seq, part, dtype, t.nbytes(), -1, op);
  header.reserved = 1;
  if (IoResult io = to_next.send_all(&header, sizeof header, deadline); !io.ok()) cma_fail(ctx, info, {true, next, io, ""});
  {
    detail::OpHeader theirs;
    if (IoResult io = from_prev.recv_all(&theirs, sizeof theirs, deadline); !io.ok())
      cma_fail(ctx, info, {false, prev, io, ""});
    if (!(theirs == header))
      cma_fail(ctx, info, {false, prev, {}, "rank " + std::to_string(prev) + " is running " + theirs.str() +
                                                " but this rank is running " + header.str()});
  }

  int64_t acked = -1;               // the last step `next` acknowledged reading
  std::deque<CmaRecord> descs;      // steps `prev` advertised, not yet read
  // Reads one record from `s` (of `peer`) and files it.
  auto read_record = [&](detail::Socket& s, int peer) {
    CmaRecord rec;
    if (IoResult io = s.recv_all(&rec, sizeof rec, deadline); !io.ok()) cma_fail(ctx, info, {false, peer, io, ""});
    const bool desc_ok = rec.kind == CmaRecord::kDesc && peer == prev;
    const bool ack_ok = rec.kind == CmaRecord::kAck && peer == next;
    if (rec.magic != CmaRecord::kMagic || rec.seq != info.seq || rec.part != part || (!desc_ok && !ack_ok))
      cma_fail(ctx, info, {false, peer, {}, "rank " + std::to_string(peer) + " sent a malformed same-host record"});
    if (rec.kind == CmaRecord::kAck) {
      acked = std::max<int64_t>(acked, rec.step);
    } else {
      descs.push_back(rec);
    }
  };
  auto chunk = [&](int c, int64_t* begin, int64_t* len) {
    *begin = detail::part_begin(numel, n, c);
    *len = detail::part_begin(numel, n, c + 1) - *begin;
  };
  uint8_t* tmp = ctx.tmp(static_cast<size_t>(seg_elems * esz));
  for (int g = 0; g < steps; ++g) {
    const int send_chunk = ((r - g) % n + n) % n;
    const int recv_chunk = ((r - g - 1) % n + n) % n;
    const bool reducing = g < n - 1;
    int64_t sb, slen, rb, rlen;
    chunk(send_chunk, &sb, &slen);
    chunk(recv_chunk, &rb, &rlen);
    CmaRecord desc;
    desc.kind = CmaRecord::kDesc;
    desc.seq = info.seq;
    desc.part = part;
    desc.step = static_cast<uint32_t>(g);
    desc.addr = reinterpret_cast<uintptr_t>(base + sb * esz);
    desc.len = static_cast<uint64_t>(slen * esz);
    if (IoResult io = to_next.send_all(&desc, sizeof desc, deadline); !io.ok()) cma_fail(ctx, info, {true, next, io, ""});
    while (descs.empty()) read_record(from_prev, prev);
    const CmaRecord theirs = descs.front();
    descs.pop_front();
    if (theirs.step != static_cast<uint32_t>(g) || theirs.len != static_cast<uint64_t>(rlen * esz))
      cma_fail(ctx, info, {false, prev, {}, "rank " + std::to_string(prev) + " advertised step " +
                                                std::to_string(theirs.step) + " of " + std::to_string(theirs.len) +
                                                " bytes, expected step " + std::to_string(g) + " of " +
                                                std::to_string(rlen * esz)});
    uint8_t* dst = base + rb * esz;
    auto read = [&](void* into, uint64_t from, size_t bytes) {
      const std::string err = detail::cma_read(prev_pid, into, from, bytes);
      if (!err.empty())
        cma_fail(ctx, info, {false, prev, {}, "reading from rank " + std::to_string(prev) + " (pid " +
                                                  std::to_string(prev_pid) + "): " + err +
                                                  " (it died, or its process group broke)"});
    };
    if (reducing) {
      for (int64_t off = 0; off < rlen; off += seg_elems) {
        const int64_t len = std::min(seg_elems, rlen - off);
        read(tmp, theirs.addr + static_cast<uint64_t>(off * esz), static_cast<size_t>(len * esz));
        uint8_t* d = dst + off * esz;
        parallel::detail::reduce_into(dtype, op, d, d, tmp, len);
        if (op == ReduceOp::AVG && g == n - 2) parallel::detail::divide_by(dtype, d, len, n);
      }
    } else {
      // In place over what this rank advertised at step g + 1 - n: wait until it was read.
      while (acked < g + 1 - n) read_record(to_next, next);
      read(dst, theirs.addr, static_cast<size_t>(rlen * esz));
    }
    CmaRecord ack;
    ack.kind = CmaRecord::kAck;
    ack.seq = info.seq;
    ack.part = part;
    ack.step = static_cast<uint32_t>(g);
    if (IoResult io = from_prev.send_all(&ack, sizeof ack, deadline); !io.ok()) cma_fail(ctx, info, {true, prev, io, ""});
  }
  // Nobody may still be reading this tensor when the caller gets it back.
  while (acked < steps - 1) read_record(to_next, next);
}

// Round k of a shared-memory all_reduce: publishes this rank's header as posted, waits for every
// peer's, and fails naming the first peer that runs another call.
void post_and_compare_headers(detail::SharedMemory& shm, int r, int n, uint32_t k, const detail::OpHeader& header,
                              const std::function<void(int, std::atomic<uint32_t>&, uint32_t)>& wait,
                              const std::function<void(const std::string&)>& fail) {
  detail::ShmControl& mine = shm.control(r);
  mine.header[k % 2] = header;
  shm.publish(mine.posted, k);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    wait(p, shm.control(p).posted, k);
    const detail::OpHeader theirs = shm.control(p).header[k % 2];
    if (!(theirs == header))
      fail("rank " + std::to_string(p) + " is running " + theirs.str() + " but this rank is running " + header.str());
  }
}

// See Note [Small shared-memory all_reduce]: `flat` fits in half the data area.
void all_reduce_shm_small(detail::Context& ctx, detail::SharedMemory& shm, const FlatView& flat, DType dtype,
                          ReduceOp op, const detail::OpHeader& header, const std::function<void(int, std::atomic<uint32_t>&, uint32_t)>& wait,
                          const std::function<void(const std::string&)>& fail) {
  const int n = ctx.size;
  const int r = ctx.rank;
  const int64_t numel = flat.numel();
  const int64_t esz = static_cast<int64_t>(element_size(dtype));
  const size_t half = shm.data_bytes() / 2;
  const uint32_t k = shm.next_round();
  // Half k % 2 was last written in round k-2, unless round k-1 used the whole area.
  const uint32_t free_after = shm.last_whole_round() == k - 1 ? k - 1 : k - 2;
  for (int p = 0; p < n; ++p) {
    if (p != r) wait(p, shm.control(p).done, free_after);
  }
  detail::ShmControl& mine = shm.control(r);
  const size_t at = (k % 2) * half;
  uint8_t* my_area = shm.data(r) + at;
  flat.for_each(0, numel, [&](uint8_t* src, int64_t off, int64_t len) {
    std::memcpy(my_area + off * esz, src, static_cast<size_t>(len * esz));
  });
  post_and_compare_headers(shm, r, n, k, header, wait, fail);
  // Every rank combines the n copies in rank order, so every rank gets the same bits.
  flat.for_each(0, numel, [&](uint8_t* dst, int64_t off, int64_t len) {
    auto src = [&](int q) { return shm.data(q) + at + off * esz; };
    parallel::detail::reduce_into(dtype, op, dst, src(0), src(1), len);
    for (int q = 2; q < n - 1; ++q) parallel::detail::reduce_into(dtype, op, dst, dst, src(q), len);
    if (n > 2) {
      parallel::detail::reduce_last_into(dtype, op, dst, src(n - 1), nullptr, len, n);
    } else if (op == ReduceOp::AVG) {
      parallel::detail::divide_by(dtype, dst, len, n);
    }
  });
  shm.publish(mine.done, k);
}

// See Note [Shared-memory all_reduce]. `tensors` (one dtype) are reduced as one flat tensor.
void all_reduce_shm(detail::Context& ctx, const OpInfo& info, const std::vector<Tensor>& tensors, uint32_t part,
                    ReduceOp op) {
  ctx.state->check_not_broken(info.description);
  detail::SharedMemory& shm = *ctx.shm;
  const int n = ctx.size;
  const int r = ctx.rank;
  const FlatView flat(tensors);
  const int64_t numel = flat.numel();
  const int64_t esz = static_cast<int64_t>(tensors.front().element_size());
  const DType dtype = tensors.front().dtype();
  const int64_t block_elems = std::max<int64_t>(1, static_cast<int64_t>(shm.data_bytes()) / esz);  // fits
  const int64_t piece_elems = std::max<int64_t>(1, (64 << 10) / esz);
  const auto deadline = ctx.deadline();
  detail::OpHeader header =
      detail::OpHeader::make(info.type, info.seq, part, dtype, static_cast<uint64_t>(numel * esz), -1, op);
  header.reserved = 2;  // this path's
  detail::ShmControl& mine = shm.control(r);
  uint8_t* my_data = shm.data(r);
  auto fail = [&](const std::string& why) {
    shm.mark_aborted();
    const std::string msg = info.description + " failed: " + why;
    if (ctx.state->break_group(msg)) EMBER_THROW(DistributedError, msg);
    EMBER_THROW(DistributedError, info.description, " aborted: ", ctx.state->reason());
  };
  auto wait = [&](int peer, std::atomic<uint32_t>& word, uint32_t target) {
    const std::string why =
        shm.wait_for(peer, word, target, header, ctx.socket(peer), deadline, ctx.timeout_ms, *ctx.state);
    if (!why.empty()) fail("receiving from rank " + std::to_string(peer) + ": " + why);
  };
  if (static_cast<size_t>(numel * esz) <= std::min(shm.data_bytes() / 2, kSmallShmBytes))
    return all_reduce_shm_small(ctx, shm, flat, dtype, op, header, wait, fail);
  int64_t b0 = 0;
  do {  // at least one round, so that a 0-element all_reduce still checks the peers' call
    const int64_t blen = std::min(block_elems, numel - b0);
    auto chunk = [&](int c, int64_t* begin, int64_t* len) {
      *begin = detail::part_begin(blen, n, c);
      *len = detail::part_begin(blen, n, c + 1) - *begin;
    };
    const uint32_t k = shm.next_round();
    shm.set_last_whole_round(k);
    for (int p = 0; p < n; ++p) {
      if (p != r) wait(p, shm.control(p).done, k - 1);
    }
    for (int c = 0; c < n; ++c) {
      int64_t cb, clen;
      chunk(c, &cb, &clen);
      if (c == r) continue;
      uint8_t* out = my_data + cb * esz;
      flat.for_each(b0 + cb, clen, [&](uint8_t* src, int64_t off, int64_t len) {
        std::memcpy(out + off * esz, src, static_cast<size_t>(len * esz));
      });
    }
    post_and_compare_headers(shm, r, n, k, header, wait, fail);
    int64_t rb, rlen;
    chunk(r, &rb, &rlen);
    flat.for_each(b0 + rb, rlen, [&](uint8_t* dst_all, int64_t off_all, int64_t len_all) {
      for (int64_t done = 0; done < len_all; done += piece_elems) {
        const int64_t len = std::min(piece_elems, len_all - done);
        const int64_t off = rb + off_all + done;  // in the block, as in the data areas
        uint8_t* dst = dst_all + done * esz;
        const int last = r == n - 1 ? n - 2 : n - 1;  // its reduction also divides and publishes
        for (int p = 0; p < n; ++p) {
          if (p != r && p != last) parallel::detail::reduce_into(dtype, op, dst, dst, shm.data(p) + off * esz, len);
        }
        parallel::detail::reduce_last_into(dtype, op, dst, shm.data(last) + off * esz, my_data + off * esz, len, n);
      }
    });
    shm.publish(mine.reduced, k);
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      wait(p, shm.control(p).reduced, k);
      int64_t pb, plen;
      chunk(p, &pb, &plen);
      const uint8_t* in = shm.data(p) + pb * esz;
      flat.for_each(b0 + pb, plen, [&](uint8_t* dst, int64_t off, int64_t len) {
        std::memcpy(dst, in + off * esz, static_cast<size_t>(len * esz));
      });
    }
    shm.publish(mine.done, k);
    b0 += blen;
  } while (b0 < numel);
}

}  // namespace

void all_reduce(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  if (ctx.size == 1) return;  // the sum (avg, max, ...) of one value is that value
  for (size_t p = 0; p < tensors.size(); ++p) {
    if (ctx.shm != nullptr) {
      all_reduce_shm(ctx, info, {tensors[p]}, static_cast<uint32_t>(p), op);
    } else if (!ctx.cma_pids.empty() && tensors[p].nbytes() >= ctx.cma_min_bytes) {
      all_reduce_cma(ctx, info, tensors[p], static_cast<uint32_t>(p), op);
    } else {
      all_reduce_one(ctx, info, tensors[p], static_cast<uint32_t>(p), op);
    }
  }
}

void all_reduce_coalesced(detail::Context& ctx, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  if (ctx.size == 1) return;
  if (ctx.shm != nullptr) return all_reduce_shm(ctx, info, tensors, 0, op);  // in place, no flat copy
  // The other paths move one tensor: through a flat copy, reduced as part 0 (what all_reduce
  // of that flat tensor would run, so the ranks may mix the two forms).
  std::vector<Tensor> pieces;
  for (const Tensor& t : tensors) pieces.push_back(native::reshape(t, {-1}));
  std::vector<Tensor> flat{native::cat(pieces, 0)};
  if (!ctx.cma_pids.empty() && flat[0].nbytes() >= ctx.cma_min_bytes) {
    all_reduce_cma(ctx, info, flat[0], 0, op);
  } else {
    all_reduce_one(ctx, info, flat[0], 0, op);
  }
  int64_t off = 0;
  for (Tensor& t : tensors) {
    native::copy_(t, native::view(native::narrow(flat[0], 0, off, t.numel()), t.sizes()));
    off += t.numel();
  }
}

}  // namespace ember::parallel::tcp
