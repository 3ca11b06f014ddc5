#include "parallel/parallel_apply.h"

#include <cxxabi.h>
#include <pthread.h>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <typeinfo>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/error_code.h"
#include "core/stream.h"
#include "core/thread_device.h"

// Note [Replica threads]
// Each device has one persistent replica thread with a FIFO of jobs, started on first use
// (DataParallel calls parallel_apply every step; starting threads each time would cost more
// than small replicas' forward). A call that lists a device twice gets a second thread for the
// second occurrence, so replicas of one call never wait on each other. A parallel_run issued
// from a replica thread (a DataParallel inside a replica) starts plain std::threads instead:
// queueing behind its own job would deadlock. Concurrent parallel_run calls from different
// user threads share the device threads; their jobs run in arrival order. The threads are
// named "dp-<device>" (e.g. dp-cpu:1). After fork() the child forgets the parent's threads
// (leaked, as the engine's) and starts new ones on demand. Each thread owns its device (Note
// [Device-owning threads] in core/thread_device.h): set_thread_device once when it starts, and each
// job runs under the caller's current stream of that device.

namespace ember::parallel {
namespace {

thread_local bool t_is_replica_thread = false;

// set_thread_device for a replica thread; a CUDA device that cannot be made current is reported
// by the replica's own ops (their device guards), not here.
void own_device(Device device) {
  try {
    set_thread_device(device);
  } catch (const std::exception&) {
  }
}

// What a group of jobs waits on.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = 0;  // guarded by mu
  void count_down() {
    std::lock_guard<std::mutex> lk(mu);
    if (--pending == 0) cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return pending == 0; });
  }
};

struct Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;  // guarded by mu
};

class ReplicaThreads {
 public:
  static ReplicaThreads& get() {
    static ReplicaThreads* threads = [] {
      auto* p = new ReplicaThreads();  // leaked: its threads outlive static destruction
      pthread_atfork(nullptr, nullptr, [] { ReplicaThreads::get().reset_after_fork(); });
      return p;
    }();
    return *threads;
  }

  /// Queues `job` on the thread for the `occurrence`-th use of `device` in one call.
  void post(Device device, int occurrence, std::function<void()> job) {
    Worker* w = worker(device, occurrence);
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->jobs.push_back(std::move(job));
    }
    w->cv.notify_one();
  }

 private:
  Worker* worker(Device device, int occurrence) {
    std::lock_guard<std::mutex> lk(mu_);
    Worker*& w = workers_[{device.flat_index(), occurrence}];
    if (!w) {
      w = new Worker();
      Worker* raw = w;
      // Named "dp-cpu:1" (".1" appended for a second occurrence) for top, gdb and profilers.
      std::array<char, 16> name{};
      std::snprintf(name.data(), name.size(), occurrence > 0 ? "dp-%s.%d" : "dp-%s", device.str().c_str(), occurrence);
      std::thread([raw, name, device] {
        pthread_setname_np(pthread_self(), name.data());
        own_device(device);
        loop(raw);
      }).detach();
    }
    return w;
  }

  static void loop(Worker* w) {
    t_is_replica_thread = true;
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lk(w->mu);
        w->cv.wait(lk, [&] { return !w->jobs.empty(); });
        job = std::move(w->jobs.front());
        w->jobs.pop_front();
      }
      job();  // never throws: parallel_run's jobs catch everything
    }
  }

  void reset_after_fork() {
    new (&mu_) std::mutex();
    new (&workers_) std::map<std::pair<int, int>, Worker*>();  // the old map and workers are leaked
  }

  std::mutex mu_;
  std::map<std::pair<int, int>, Worker*> workers_;  // guarded by mu_
};

// "ValueError" for ember's own types, else the demangled name ("std::out_of_range").
std::string type_name(const std::type_info& ti) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(ti.name(), nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled) ? demangled : ti.name();
  std::free(demangled);
  const std::string prefix = "ember::";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name;
}

struct Failure {
  std::exception_ptr error;
  std::string type;
  ErrorDescription description;  // message() and where() of an ember::Error, what() of another
};

// The replica's error as the same ember type (so callers can still catch e.g. ValueError),
// its message prefixed with the replica and device, its where() the original check's (Note
// [Error messages] in core/error.h).
[[noreturn]] void rethrow_with_context(const Failure& f, size_t replica, Device device) {
  std::ostringstream os;
  os << "Caught " << f.type << " in replica " << replica << " on device " << device << ": " << f.description.message;
  const ErrorCode code = f.description.code == ErrorCode::kUnknown ? ErrorCode::kError : f.description.code;
  throw_exception(code, os.str(), f.description.where);
}

}  // namespace

void parallel_run(const std::vector<std::function<void()>>& fns, const std::vector<Device>& devices) {
  EMBER_CHECK_T(ValueError, fns.size() == devices.size(), "parallel_apply: got ", fns.size(), " replicas and ",
                devices.size(), " devices");
  if (fns.empty()) return;
  const bool grad = autograd::GradMode::is_enabled();
  // Autocast is thread-local: the replicas run under the caller's (as torch's parallel_apply).
  const bool cpu_autocast = autograd::AutocastMode::is_enabled(DeviceType::CPU);
  const bool cuda_autocast = autograd::AutocastMode::is_enabled(DeviceType::CUDA);
  const DType cpu_autocast_dtype = autograd::AutocastMode::dtype(DeviceType::CPU);
  const DType cuda_autocast_dtype = autograd::AutocastMode::dtype(DeviceType::CUDA);
  std::vector<Failure> failures(fns.size());
  Latch latch;
  latch.pending = fns.size();
  // The caller's current stream of each replica's device, made current for the replica's job.
  std::vector<Stream> streams;
  for (const Device& d : devices) streams.push_back(current_stream(d));
  auto job = [&](size_t i) {
    return [&, i] {
      try {
        autograd::AutoGradMode mode(grad);
        autograd::autocast cpu_cast(DeviceType::CPU, cpu_autocast_dtype, cpu_autocast);
        autograd::autocast cuda_cast(DeviceType::CUDA, cuda_autocast_dtype, cuda_autocast);
        StreamGuard stream(streams[i]);
        fns[i]();
      } catch (const std::exception& e) {
        failures[i] = {std::current_exception(), type_name(typeid(e)), describe_exception(std::current_exception())};
      } catch (...) {
        failures[i] = {std::current_exception(), "unknown exception",
                       {ErrorCode::kUnknown, "(not a std::exception)", std::string()}};
      }
      latch.count_down();
    };
  };
  if (fns.size() == 1) {
    job(0)();
  } else if (t_is_replica_thread) {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < fns.size(); ++i) {
      threads.emplace_back([f = job(i), device = devices[i]] {
        t_is_replica_thread = true;
        own_device(device);
        f();
      });
    }
    for (auto& t : threads) t.join();
  } else {
    std::map<int, int> seen;
    for (size_t i = 0; i < fns.size(); ++i) {
      int occurrence = seen[devices[i].flat_index()]++;
      ReplicaThreads::get().post(devices[i], occurrence, job(i));
    }
  }
  latch.wait();
  for (size_t i = 0; i < failures.size(); ++i) {
    if (failures[i].error) rethrow_with_context(failures[i], i, devices[i]);
  }
}

namespace detail {
Device replica_device(const nn::Module& replica, const std::vector<Tensor>& input_tensors, size_t i) {
  for (const auto& p : replica.parameters()) return p.device();
  for (const auto& b : replica.buffers()) return b.device();
  if (!input_tensors.empty()) return input_tensors.front().device();
  return Device::cpu(static_cast<int>(i));
}
}  // namespace detail

}  // namespace ember::parallel
