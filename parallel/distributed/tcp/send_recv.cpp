#include "parallel/distributed/tcp/send_recv.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ember::parallel::tcp {

using detail::Clock;

namespace {

struct FrameHeader {
  static constexpr uint32_t kMagic = 0x454d5032;  // "EMP2"
  uint32_t magic = kMagic;
  uint8_t dtype = 0;
  uint8_t reserved[3] = {};
  int64_t tag = 0;
  uint64_t num_bytes = 0;
};
static_assert(sizeof(FrameHeader) == 24, "FrameHeader is a wire format");

}  // namespace

struct P2PEngine::Op {
  bool is_send = false;
  int peer = -1;
  int64_t tag = 0;
  DType dtype = kFloat32;
  std::shared_ptr<Work> work;
  std::string description;
  std::vector<Tensor> tensors;
  uint64_t num_bytes = 0;
  Clock::time_point deadline;
  // Send progress: header then each tensor, as iovecs consumed front to back.
  FrameHeader header;
  std::vector<iovec> iov;
  size_t iov_pos = 0;
  // Recv progress: which tensor, how far into it.
  size_t piece = 0;
  size_t piece_got = 0;
};

namespace {
std::string mismatch(int peer, const FrameHeader& h, const P2PEngine::Op& op) {
  return "rank " + std::to_string(peer) + " sent " + std::to_string(h.num_bytes) + " bytes of " +
         dtype_name(static_cast<DType>(h.dtype)) + " with tag " + std::to_string(h.tag) + " but " +
         op.description + " expects " + std::to_string(op.num_bytes) + " bytes of " + dtype_name(op.dtype);
}
}  // namespace

struct P2PEngine::Peer {
  bool closed = false;
  std::deque<std::unique_ptr<Op>> sends;
  std::map<int64_t, std::deque<std::unique_ptr<Op>>> posted;          // recvs waiting, by tag
  struct Stashed {
    DType dtype;
    std::vector<uint8_t> data;
  };
  std::map<int64_t, std::deque<Stashed>> unexpected;  // frames that came before their recv
  // The frame being received.
  FrameHeader in_header;
  size_t header_got = 0;
  bool in_payload = false;
  std::unique_ptr<Op> target;           // the recv it goes to, or null: into stash
  std::vector<uint8_t> stash;
  size_t stash_got = 0;
};

namespace {

std::string failure_text(const detail::IoResult& r, int peer) {
  const std::string p = "rank " + std::to_string(peer);
  if (r.status == detail::IoStatus::CLOSED)
    return p + " closed the connection (it died, or its process group broke or was destroyed)";
  return r.describe() + " (" + p + " died or its process group broke)";
}

void copy_into(std::vector<Tensor>& tensors, const uint8_t* src) {
  for (auto& t : tensors) {
    if (t.nbytes() > 0) std::memcpy(t.raw_data(), src, t.nbytes());
    src += t.nbytes();
  }
}

}  // namespace

P2PEngine::P2PEngine(int rank, int size, detail::Mesh* mesh, detail::GroupState* state, int64_t timeout_ms)
    : rank_(rank), size_(size), mesh_(mesh), state_(state), timeout_ms_(timeout_ms) {
  for (int p = 0; p < size; ++p) peers_.push_back(std::make_unique<Peer>());
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  EMBER_CHECK_T(DistributedError, wake_fd_ >= 0, "tcp: eventfd: ", std::strerror(errno));
  thread_ = std::thread([this] { loop(); });
}

P2PEngine::~P2PEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake();
  thread_.join();
  ::close(wake_fd_);
}

void P2PEngine::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof one);
}

std::unique_ptr<P2PEngine::Op> P2PEngine::make_op(bool is_send, std::shared_ptr<Work> work, const OpInfo& info,
                                                  std::vector<Tensor> tensors, int peer, int tag) const {
  auto op = std::make_unique<Op>();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->dtype = tensors.front().dtype();
  op->work = std::move(work);
  op->description = info.description;
  op->tensors = std::move(tensors);
  for (auto& t : op->tensors) op->num_bytes += t.nbytes();
  op->deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  return op;
}

void P2PEngine::submit(std::unique_ptr<Op> op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.push_back(std::move(op));
  }
  wake();
}

void P2PEngine::send(std::shared_ptr<Work> work, const OpInfo& info, std::vector<Tensor> tensors, int dst,
                     int tag) {
  auto op = make_op(/*is_send=*/true, std::move(work), info, std::move(tensors), dst, tag);
  op->header.dtype = static_cast<uint8_t>(op->dtype);
  op->header.tag = tag;
  op->header.num_bytes = op->num_bytes;
  op->iov.push_back({&op->header, sizeof op->header});
  for (auto& t : op->tensors)
    if (t.nbytes() > 0) op->iov.push_back({t.raw_data(), t.nbytes()});
  submit(std::move(op));
}

void P2PEngine::recv(std::shared_ptr<Work> work, const OpInfo& info, std::vector<Tensor> tensors, int src,
                     int tag) {
  submit(make_op(/*is_send=*/false, std::move(work), info, std::move(tensors), src, tag));
}

void P2PEngine::fail_all(const std::string& why) {
  for (auto& p : peers_) {
    for (auto& op : p->sends)
      op->work->finish(std::make_exception_ptr(DistributedError(op->description + " " + why)));
    p->sends.clear();
    for (auto& [tag, q] : p->posted)
      for (auto& op : q) op->work->finish(std::make_exception_ptr(DistributedError(op->description + " " + why)));
    p->posted.clear();
    if (p->target) p->target->work->finish(std::make_exception_ptr(DistributedError(p->target->description + " " + why)));
    p->target.reset();
  }
}

// A failure on one peer's connection breaks the group: every pending op fails. The ops of
// that peer say what happened; the others that the group broke because of it.
void P2PEngine::fail_peer(int peer, const std::string& why) {
  peers_[peer]->closed = true;
  const std::string msg = "failed: " + why;
  const bool first = state_->break_group("tcp rank " + std::to_string(rank_) + "/" + std::to_string(size_) +
                                         ": point-to-point traffic with rank " + std::to_string(peer) +
                                         " failed: " + why);
  const std::string reason = state_->reason();
  Peer& p = *peers_[peer];
  auto fail_op = [&](Op& op) {
    op.work->finish(std::make_exception_ptr(
        DistributedError(op.description + (first ? " " + msg : " aborted: " + reason))));
  };
  for (auto& op : p.sends) fail_op(*op);
  p.sends.clear();
  for (auto& [tag, q] : p.posted)
    for (auto& op : q) fail_op(*op);
  p.posted.clear();
  if (p.target) fail_op(*p.target);
  p.target.reset();
  fail_all("aborted: " + reason);
}

void P2PEngine::adopt(std::unique_ptr<Op> op) {
  if (state_->broken()) {
    op->work->finish(state_->not_run(op->description));
    return;
  }
  const int peer = op->peer;
  Peer& p = *peers_[peer];
  if (!op->is_send) {
    auto it = p.unexpected.find(op->tag);
    if (it != p.unexpected.end() && !it->second.empty()) {
      // The message came before its recv: it waited in memory.
      Peer::Stashed& stashed = it->second.front();
      std::vector<uint8_t>& data = stashed.data;
      FrameHeader h;
      h.tag = op->tag;
      h.num_bytes = data.size();
      h.dtype = static_cast<uint8_t>(stashed.dtype);
      if (data.size() != op->num_bytes || stashed.dtype != op->dtype) {
        const std::string why = mismatch(peer, h, *op);
        p.posted[op->tag].push_back(std::move(op));
        return fail_peer(peer, why);
      }
      copy_into(op->tensors, data.data());
      it->second.pop_front();
      if (it->second.empty()) p.unexpected.erase(it);
      op->work->finish();
      return;
    }
  }
  if (op->is_send) {
    p.sends.push_back(std::move(op));
  } else {
    p.posted[op->tag].push_back(std::move(op));
  }
  if (p.closed)
    fail_peer(peer, "rank " + std::to_string(peer) +
                        " closed the connection earlier (it died, or its process group broke or was destroyed)");
}

void P2PEngine::deliver_stash(int peer) {
  Peer& p = *peers_[peer];
  const int64_t tag = p.in_header.tag;
  auto it = p.posted.find(tag);
  if (it == p.posted.end() || it->second.empty()) {
    p.unexpected[tag].push_back({static_cast<DType>(p.in_header.dtype), std::move(p.stash)});
    return;
  }
  // A recv was posted while the frame was arriving into the stash.
  Op& op = *it->second.front();
  if (p.stash.size() != op.num_bytes || op.dtype != static_cast<DType>(p.in_header.dtype))
    return fail_peer(peer, mismatch(peer, p.in_header, op));
  copy_into(op.tensors, p.stash.data());
  op.work->finish();
  it->second.pop_front();
  if (it->second.empty()) p.posted.erase(it);
}

// Returns false when the connection failed (already reported).
bool P2PEngine::progress_send(int peer) {
  Peer& p = *peers_[peer];
  detail::Socket& s = mesh_->socket(peer, detail::kP2PChannel);
  while (!p.sends.empty()) {
    Op& op = *p.sends.front();
    while (op.iov_pos < op.iov.size()) {
      msghdr msg{};
      msg.msg_iov = op.iov.data() + op.iov_pos;
      msg.msg_iovlen = op.iov.size() - op.iov_pos;
      const ssize_t r = ::sendmsg(s.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        fail_peer(peer, "sending to rank " + std::to_string(peer) + ": " +
                            failure_text({detail::IoStatus::ERROR, errno, 0}, peer));
        return false;
      }
      size_t left = static_cast<size_t>(r);
      while (op.iov_pos < op.iov.size() && left >= op.iov[op.iov_pos].iov_len) {
        left -= op.iov[op.iov_pos].iov_len;
        ++op.iov_pos;
      }
      if (op.iov_pos < op.iov.size()) {
        op.iov[op.iov_pos].iov_base = static_cast<char*>(op.iov[op.iov_pos].iov_base) + left;
        op.iov[op.iov_pos].iov_len -= left;
      }
    }
    op.work->finish();
    p.sends.pop_front();
  }
  return true;
}

bool P2PEngine::progress_recv(int peer) {
  Peer& p = *peers_[peer];
  detail::Socket& s = mesh_->socket(peer, detail::kP2PChannel);
  for (;;) {
    size_t got = 0;
    detail::IoResult r;
    if (!p.in_payload) {
      r = s.recv_some(reinterpret_cast<uint8_t*>(&p.in_header) + p.header_got, sizeof(FrameHeader) - p.header_got,
                      &got);
      if (!r.ok()) {
        if (r.status == detail::IoStatus::CLOSED && p.header_got == 0 && p.sends.empty() && p.posted.empty()) {
          p.closed = true;  // an orderly close with nothing pending: not (yet) an error
          return false;
        }
        fail_peer(peer, "receiving from rank " + std::to_string(peer) + ": " + failure_text(r, peer));
        return false;
      }
      if (got == 0) return true;
      p.header_got += got;
      if (p.header_got < sizeof(FrameHeader)) continue;
      const FrameHeader& h = p.in_header;
      if (h.magic != FrameHeader::kMagic) {
        fail_peer(peer, "receiving from rank " + std::to_string(peer) + ": not an ember frame (stream out of sync)");
        return false;
      }
      p.in_payload = true;
      p.header_got = 0;
      auto it = p.posted.find(h.tag);
      if (it != p.posted.end() && !it->second.empty()) {
        p.target = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) p.posted.erase(it);
        if (p.target->num_bytes != h.num_bytes || p.target->dtype != static_cast<DType>(h.dtype)) {
          fail_peer(peer, mismatch(peer, h, *p.target));
          return false;
        }
        p.target->piece = 0;
        p.target->piece_got = 0;
      } else {
        p.stash.assign(h.num_bytes, 0);
        p.stash_got = 0;
      }
    }
    // Payload.
    bool complete = false;
    if (p.target) {
      Op& op = *p.target;
      while (op.piece < op.tensors.size() && op.piece_got == op.tensors[op.piece].nbytes()) {
        ++op.piece;
        op.piece_got = 0;
      }
      if (op.piece == op.tensors.size()) {
        complete = true;
      } else {
        Tensor& t = op.tensors[op.piece];
        r = s.recv_some(static_cast<uint8_t*>(t.raw_data()) + op.piece_got, t.nbytes() - op.piece_got, &got);
        op.piece_got += got;
      }
    } else {
      if (p.stash_got == p.stash.size()) {
        complete = true;
      } else {
        r = s.recv_some(p.stash.data() + p.stash_got, p.stash.size() - p.stash_got, &got);
        p.stash_got += got;
      }
    }
    if (!r.ok()) {
      fail_peer(peer, "receiving from rank " + std::to_string(peer) + ": " + failure_text(r, peer));
      return false;
    }
    if (complete) {
      p.in_payload = false;
      if (p.target) {
        p.target->work->finish();
        p.target.reset();
      } else {
        deliver_stash(peer);
      }
      continue;
    }
    if (got == 0) return true;
  }
}

void P2PEngine::loop() {
  std::vector<pollfd> fds;
  std::vector<int> fd_peer;
  for (;;) {
    std::vector<std::unique_ptr<Op>> fresh;
    bool stop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fresh.swap(incoming_);
      stop = stop_;
    }
    if (stop) {
      for (auto& op : fresh) peers_[op->peer]->sends.push_back(std::move(op));
      fail_all("aborted: the process group was destroyed");
      return;
    }
    for (auto& op : fresh) {
      const int peer = op->peer;
      const bool is_send = op->is_send;
      adopt(std::move(op));
      if (is_send && !peers_[peer]->closed && !state_->broken()) progress_send(peer);
    }
    if (state_->broken()) fail_all("aborted: " + state_->reason());

    // Deadlines: the first op past its deadline breaks the group.
    const auto now = Clock::now();
    Clock::time_point next_deadline = Clock::time_point::max();
    const Op* expired = nullptr;
    auto check = [&](const Op& op) {
      if (op.deadline <= now && expired == nullptr) expired = &op;
      next_deadline = std::min(next_deadline, op.deadline);
    };
    for (auto& p : peers_) {
      for (auto& op : p->sends) check(*op);
      for (auto& [tag, q] : p->posted)
        for (auto& op : q) check(*op);
      if (p->target) check(*p->target);
    }
    if (expired != nullptr) {
      const int peer = expired->peer;
      fail_peer(peer, std::string(expired->is_send ? "sending to" : "waiting for") + " rank " +
                          std::to_string(peer) + ": timed out after " + std::to_string(timeout_ms_) + " ms (rank " +
                          std::to_string(peer) + " is hung, or never posted the matching " +
                          (expired->is_send ? "recv" : "send") + ")");
      continue;
    }

    fds.clear();
    fd_peer.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fd_peer.push_back(-1);
    for (int peer = 0; peer < size_ && !state_->broken(); ++peer) {  // a broken group's sockets are dead
      if (peer == rank_ || peers_[peer]->closed) continue;
      short events = POLLIN;
      if (!peers_[peer]->sends.empty()) events |= POLLOUT;
      fds.push_back({mesh_->socket(peer, detail::kP2PChannel).fd(), events, 0});
      fd_peer.push_back(peer);
    }
    const int timeout = next_deadline == Clock::time_point::max() ? -1 : detail::poll_timeout_ms(next_deadline);
    const int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      fail_all("failed: poll(): " + std::string(std::strerror(errno)));
      continue;
    }
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      const int peer = fd_peer[i];
      if (peers_[peer]->closed || state_->broken()) continue;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (!progress_recv(peer)) continue;
      }
      if (fds[i].revents & (POLLOUT | POLLERR)) progress_send(peer);
    }
  }
}

}  // namespace ember::parallel::tcp
