#include "parallel/distributed/tcp/detail/shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "core/env.h"
#include "parallel/distributed/tcp/detail/context.h"

namespace ember::parallel::tcp::detail {

namespace {

static_assert(sizeof(ShmControl) <= SharedMemory::kDataOffset, "the control block must fit before the data area");

// Ranks with the same boot id share a machine (and its /dev/shm).
std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

std::string to_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Maps `name` (created when `create`), `bytes` long; nullptr on any failure.
void* map_segment(const std::string& name, size_t bytes, bool create) {
  const int fd = create ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  bool ok = true;
  if (create) {
    // Allocated now, not at first touch: a full /dev/shm (a container's is often 64 MiB) must
    // turn the path off here, not raise SIGBUS in the middle of a collective.
    ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  } else {
    struct stat st{};
    ok = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes;  // a segment of another size: not ours
  }
  void* p = ok ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the words live in memory shared between processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// Whether `a` is at or past `b` on the wrapping round counter.
bool reached(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long wait_for polls before it sleeps (EMBER_TCP_SHM_SPIN_US, 0 turns polling off). A
// peer that is running publishes within microseconds; a futex sleep turns that into a wake-up,
// which a busy scheduler serves late, while a short poll costs at most this much CPU per wait.
std::chrono::nanoseconds spin_time() {
  static const std::chrono::nanoseconds t{env::integer("EMBER_TCP_SHM_SPIN_US", 0, 1000000).value_or(20) * 1000};
  return t;
}

}  // namespace

std::unique_ptr<SharedMemory> SharedMemory::create(Store& store, int rank, int size, bool enabled, size_t data_bytes,
                                                   int64_t timeout_ms) {
  if (size == 1) return nullptr;
  if (!env::flag("EMBER_TCP_SHM", true)) enabled = false;
  std::unique_ptr<SharedMemory> shm(new SharedMemory());
  shm->rank_ = rank;
  shm->data_bytes_ = data_bytes;
  shm->map_bytes_ = kDataOffset + data_bytes;
  shm->maps_.assign(static_cast<size_t>(size), nullptr);
  const std::string my_boot = boot_id();
  bool ok = enabled && !my_boot.empty();
  if (ok) {
    std::random_device rd;
    std::ostringstream name;
    name << "/ember-tcp-" << ::getpid() << '-' << rank << '-' << std::hex << rd() << rd();
    shm->own_name_ = name.str();
    void* p = map_segment(shm->own_name_, shm->map_bytes_, /*create=*/true);
    if (p == nullptr) {
      ::shm_unlink(shm->own_name_.c_str());  // in case it was made but not mapped
      shm->own_name_.clear();
      ok = false;
    } else {
      new (p) ShmControl();
      shm->maps_[static_cast<size_t>(rank)] = p;
    }
  }
  store.set("tcp/shm/who/" + std::to_string(rank), ok ? my_boot + " " + shm->own_name_ : std::string("off"));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    std::istringstream in(to_string(store.get("tcp/shm/who/" + std::to_string(peer), timeout_ms)));
    std::string boot, name;
    in >> boot >> name;
    if (!ok || !in || boot != my_boot) {
      ok = false;
      continue;
    }
    void* p = map_segment(name, shm->map_bytes_, /*create=*/false);
    if (p == nullptr) ok = false;
    shm->maps_[static_cast<size_t>(peer)] = p;
  }
  store.set("tcp/shm/ok/" + std::to_string(rank), ok ? "1" : "0");
  bool all = true;
  for (int peer = 0; peer < size; ++peer) {
    all = to_string(store.get("tcp/shm/ok/" + std::to_string(peer), timeout_ms)) == "1" && all;
  }
  // Every rank has reported, so every rank is done opening this one's segment: its name can go,
  // and the memory lives exactly as long as the mappings (no segment outlives the processes).
  if (!shm->own_name_.empty()) ::shm_unlink(shm->own_name_.c_str());
  shm->own_name_.clear();
  if (!all) return nullptr;  // the destructor unmaps what was mapped
  return shm;
}

SharedMemory::~SharedMemory() {
  for (void* p : maps_) {
    if (p != nullptr) ::munmap(p, map_bytes_);
  }
  if (!own_name_.empty()) ::shm_unlink(own_name_.c_str());
}

void SharedMemory::publish(std::atomic<uint32_t>& word, uint32_t value) {
  // Sequentially consistent against the sleeper's increment and re-load in wait_for: either
  // the sleeper sees `value` and does not sleep, or this sees it counted and wakes it.
  word.store(value, std::memory_order_seq_cst);
  if (control(rank_).sleepers.load(std::memory_order_seq_cst) != 0) futex(&word, FUTEX_WAKE, INT32_MAX, nullptr);
}

void SharedMemory::mark_aborted() {
  ShmControl& c = control(rank_);
  c.aborted.store(1, std::memory_order_release);
  // A waiter woken here sees the flag; one about to sleep sees it after its slice.
  for (std::atomic<uint32_t>* w : {&c.posted, &c.reduced, &c.done}) futex(w, FUTEX_WAKE, INT32_MAX, nullptr);
}

void SharedMemory::enter(OpType type, uint64_t seq) {
  ++tasks_;
  const uint64_t v = (static_cast<uint64_t>(tasks_) << 32) | ((seq & 0xFFFFFF) << 8) | static_cast<uint8_t>(type);
  control(rank_).entered.store(v, std::memory_order_release);
}

std::string SharedMemory::wait_for(int peer, std::atomic<uint32_t>& word, uint32_t target, const OpHeader& running,
                                   Socket& peer_socket, Clock::time_point deadline, int64_t timeout_ms,
                                   const GroupState& state) {
  const std::string who = "rank " + std::to_string(peer);
  ShmControl& theirs = control(peer);
  // Every failure is checked against `word` once more: a peer publishes what it owes before it
  // moves on, fails, aborts or exits, so what it published in time is never reported lost.
  auto unless_reached = [&](std::string why) { return reached(word.load(std::memory_order_acquire), target) ? "" : why; };
  if (spin_time().count() > 0) {  // poll first; the loop below checks everything and sleeps
    const auto spin_until = Clock::now() + spin_time();
    for (uint32_t i = 1; !reached(word.load(std::memory_order_acquire), target); ++i) {
      cpu_relax();
      if (i % 64 == 0 && (theirs.aborted.load(std::memory_order_relaxed) != 0 || Clock::now() >= spin_until)) break;
    }
  }
  for (;;) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (reached(seen, target)) return "";
    if (theirs.aborted.load(std::memory_order_acquire) != 0)
      return unless_reached(who + "'s process group broke (it failed or aborted a collective)");
    // The peer at this rank's task in a collective of another kind, or past this task without
    // having published `word` (it publishes before it moves on, so `word` is loaded again after
    // `entered`): the ranks called different collectives.
    const uint64_t e = theirs.entered.load(std::memory_order_acquire);
    const int32_t ahead = static_cast<int32_t>(static_cast<uint32_t>(e >> 32) - tasks_);
    const auto type = static_cast<OpType>(e & 0xFF);
    if (ahead > 0 || (ahead == 0 && type != static_cast<OpType>(running.op)))
      return unless_reached(who + " is running " + op_type_name(type) + " #" + std::to_string((e >> 8) & 0xFFFFFF) +
                            " but this rank is running " + running.str());
    if (state.broken()) return "this rank's process group broke: " + state.reason();
    const auto now = Clock::now();
    if (now >= deadline)
      return "timed out after " + std::to_string(timeout_ms) + " ms (" + who +
             " is hung, too slow, or has not called this collective)";
    // A slice at a time, to notice a peer that died (its connection closes) without a signal.
    const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(20));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    // Counted as a sleeper before `word` is checked again (seq_cst, see publish): a value
    // published after that check finds the count and wakes this one.
    theirs.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const bool timed_out = reached(word.load(std::memory_order_seq_cst), target)
                               ? false
                               : futex(&word, FUTEX_WAIT, seen, &ts) != 0 && errno == ETIMEDOUT;
    theirs.sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (timed_out) {
      char byte;
      const ssize_t r = ::recv(peer_socket.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (r == 0) return unless_reached(who + " closed the connection (it died, or its process group broke or was destroyed)");
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return unless_reached("connection to " + who + " failed: " + std::strerror(errno) + " (it died?)");
    }
  }
}

}  // namespace ember::parallel::tcp::detail
