#include "autograd/engine.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/error_code.h"
#include "core/stream.h"
#include "core/profiler.h"
#include "core/thread_device.h"

// Note [Engine threads]
// Every device has one worker thread with a ready queue, started on first use. A node runs on
// the worker of node->device() (the device of its forward outputs, i.e. of the gradient it
// receives), except the nodes on the device of the first root when that is a CPU device: the
// thread that called backward runs those itself (as PyTorch's engine runs CPU work on the
// calling thread), from the GraphTask's own queue, and sleeps only while that queue is empty.
// A single-device CPU backward thus never hands off to another thread: no wake-up latency,
// and no second thread for the scheduler to place on a core another process is using (with
// one rank per core under DDP a migrated worker costs several percent of the step). Each
// backward call is a GraphTask: dependency counts and input buffers live there, guarded by
// its mutex; `outstanding` counts queued + running nodes, and the caller returns once it
// reaches zero. Within one queue, nodes with a higher sequence number (created later in
// forward) run first. A backward started on a worker thread (reentrant, e.g. from a custom
// Function's backward) runs its GraphTask inline on that thread so it cannot deadlock waiting
// for itself. After fork() the child starts with no workers and creates them again on demand.
// A worker owns its device for its whole life (Note [Device-owning threads] in core/thread_device.h):
// it calls set_thread_device once, and runs each CUDA node under the stream that the thread
// which called backward had current on that device.

namespace ember::autograd {
namespace {

struct NodeTask;

struct GraphTask {
  std::mutex mu;
  std::vector<Node*> nodes;                        // every node counted (to reset their engine state)
  int outstanding = 0;                             // guarded by mu
  std::exception_ptr error;                        // guarded by mu
  std::atomic<bool> failed{false};                 // error != nullptr, readable without mu
  std::condition_variable done_cv;
  bool keep_graph = false;
  bool inline_mode = false;
  std::deque<NodeTask>* inline_queue = nullptr;
  // The calling thread's device (see Note [Engine threads]) and its ready nodes; both guarded
  // by mu. caller_device < 0: every node goes to its device's worker.
  int caller_device = -1;
  std::vector<NodeTask>* caller_queue = nullptr;
  // grad(): edges whose incoming gradient is captured, by (node, input_nr)
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> capture;
  TensorList* captured = nullptr;
  bool run_accumulate = true;
  // The backward caller's current stream of each CUDA device (index = device index); empty
  // without CUDA devices. Written before any node is scheduled, then read only.
  std::vector<Stream> caller_streams;
};

struct NodeTask {
  std::shared_ptr<GraphTask> task;
  std::shared_ptr<Node> node;
  TensorList inputs;
  uint64_t priority = 0;  // set by schedule(): see Note [Ready order]
};

// Note [Ready order]
// Of the nodes ready on a device, the one created last runs first (the deepest part of the
// graph, as PyTorch's ready queue), except AccumulateGrad, which always runs before anything
// else: it is cheap, and it is what fires a parameter's post-accumulate-grad hook, so running
// it as soon as its gradient is complete lets DistributedDataParallel start reducing a bucket
// while the rest of backward still computes. Without that a parameter whose AccumulateGrad
// was reached early in the walk (a Linear's bias, say) would wait for the whole depth-first
// descent below its sibling edge, and with it every bucket after its own.
constexpr uint64_t kAccumulatePriority = ~uint64_t{0};

struct TaskOrder {
  bool operator()(const NodeTask& a, const NodeTask& b) const { return a.priority < b.priority; }
};

struct ReadyQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::priority_queue<NodeTask, std::vector<NodeTask>, TaskOrder> q;  // guarded by mu
};

thread_local bool t_is_worker = false;
thread_local int t_worker_device = -1;                 // flat index of this worker's device
thread_local std::vector<NodeTask>* t_local = nullptr;  // same-device successors, run without a queue

void run_task(NodeTask&& t);

class Workers {
 public:
  static Workers& get() {
    static Workers* w = [] {
      auto* p = new Workers();  // leaked: threads outlive static destruction safely
      pthread_atfork(nullptr, nullptr, [] { Workers::get().reset_after_fork(); });
      return p;
    }();
    return *w;
  }

  void push(Device d, NodeTask&& t) {
    ReadyQueue* q = queue_for(d);
    {
      std::lock_guard<std::mutex> lk(q->mu);
      q->q.push(std::move(t));
    }
    q->cv.notify_one();
  }

 private:
  ReadyQueue* queue_for(Device d) {
    int idx = d.flat_index();
    std::lock_guard<std::mutex> lk(mu_);
    if (!queues_[idx]) {
      queues_[idx] = new ReadyQueue();
      ReadyQueue* q = queues_[idx];
      std::thread([q, idx] { worker_loop(q, idx); }).detach();
    }
    return queues_[idx];
  }

  static void worker_loop(ReadyQueue* q, int device_idx) {
    t_is_worker = true;
    t_worker_device = device_idx;
    const Device device(static_cast<DeviceType>(device_idx / kMaxDevicesPerType), device_idx % kMaxDevicesPerType);
    profiler::set_thread_name("autograd " + device.str());
    try {
      set_thread_device(device);
    } catch (const std::exception&) {
      // A CUDA device that cannot be made current: each node's own device guard reports it.
    }
    GradMode::set_enabled(false);
    std::vector<NodeTask> local;
    t_local = &local;
    for (;;) {
      NodeTask t;
      {
        std::unique_lock<std::mutex> lk(q->mu);
        q->cv.wait(lk, [&] { return !q->q.empty(); });
        t = std::move(const_cast<NodeTask&>(q->q.top()));
        q->q.pop();
      }
      run_task(std::move(t));
      // Successors on this device made ready by that task run here, most recent first.
      while (!local.empty()) {
        NodeTask next = std::move(local.back());
        local.pop_back();
        run_task(std::move(next));
      }
    }
  }

  void reset_after_fork() {
    // The parent's workers do not exist in the child: forget their queues (leaked on purpose).
    new (&mu_) std::mutex();
    for (auto& q : queues_) q = nullptr;
  }

  std::mutex mu_;
  ReadyQueue* queues_[2 * kMaxDevicesPerType] = {};  // guarded by mu_
};

// Pushes onto a stack run back to front, kept in the order of Note [Ready order] as the
// workers' priority queues are: ascending priority, so AccumulateGrad is on top and then the
// node created last; among equal priorities the task pushed last runs first.
void push_ready(std::vector<NodeTask>& stack, NodeTask&& t) {
  auto pos = stack.end();
  while (pos != stack.begin() && std::prev(pos)->priority > t.priority) --pos;
  stack.insert(pos, std::move(t));
}

void schedule(const std::shared_ptr<GraphTask>& task, NodeTask&& t) {
  // Caller holds task->mu. See Note [Ready order].
  ++task->outstanding;
  const bool accumulate = dynamic_cast<const AccumulateGrad*>(t.node.get()) != nullptr;
  t.priority = accumulate ? kAccumulatePriority : t.node->sequence_nr();
  if (task->inline_mode) {
    // Run front to back: AccumulateGrad goes to the front.
    if (accumulate) {
      task->inline_queue->push_front(std::move(t));
    } else {
      task->inline_queue->push_back(std::move(t));
    }
    return;
  }
  Device d = t.node->device();
  if (d.flat_index() == task->caller_device) {
    push_ready(*task->caller_queue, std::move(t));
    task->done_cv.notify_all();  // the caller may be asleep waiting for work
  } else if (t_local && d.flat_index() == t_worker_device) {
    push_ready(*t_local, std::move(t));
  } else {
    Workers::get().push(d, std::move(t));
  }
}

void accumulate_into(TensorList& buf, size_t i, Tensor&& g) {
  if (!g.defined()) return;
  if (!buf[i].defined()) {
    buf[i] = std::move(g);
  } else {
    buf[i] = native::add(buf[i], g);
  }
}

void check_anomaly(Node& node, const TensorList& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& g = outs[i];
    if (!g.defined() || !g.is_floating_point()) continue;
    if (native::any(native::isnan(g)).item() != 0) {
      EMBER_THROW(Error, "Function '", node.name(), "' returned nan values in its ", i, "th output. It was created by ",
                  node.forward_context().empty() ? std::string("an op recorded before anomaly mode was enabled")
                                                 : node.forward_context());
    }
  }
}

void run_hooks(Node& node, TensorList& inputs) {
  for (uint32_t i = 0; i < node.num_outputs() && i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    auto impl = node.output(i);
    if (!impl || !impl->autograd) continue;
    AutogradMeta& m = *impl->autograd;
    for (auto& [id, hook] : m.hooks) {
      Tensor r = hook(inputs[i]);
      if (r.defined()) inputs[i] = r;
    }
    if (m.retains_grad) {
      if (!m.grad) m.grad = std::make_unique<Tensor>();
      *m.grad = m.grad->defined() ? native::add(*m.grad, inputs[i]) : native::clone(inputs[i]);
    }
  }
}

// The error `error`, raised again as the same ember::Error subclass (core/error_code.h, so every
// type in EMBER_FORALL_ERROR_SUBCLASSES keeps its own; another exception becomes ember::Error),
// named once by the node it came from: "in backward of <node>: <message>". An error that starts
// "<node>: " (SavedVariable::unpack names the op it unpacks for) loses that prefix rather than
// naming the node twice; one that already names the node or another backward (a nested backward
// pass, the in-place check's "saved by <node>", anomaly mode's report) is kept as it is. The
// location stays the original check's (where()): see Note [Error messages] in core/error.h.
std::exception_ptr with_node_name(const std::exception_ptr& error, Node& node) {
  ErrorDescription d = describe_exception(error);
  std::string& msg = d.message;
  const std::string& name = node.name();
  if (msg.compare(0, name.size() + 2, name + ": ") == 0) msg.erase(0, name.size() + 2);
  if (msg.find("in backward of ") == std::string::npos && msg.find(name) == std::string::npos)
    msg = "in backward of " + name + ": " + msg;
  return make_exception(d.code, msg, d.where);
}

void run_task(NodeTask&& t) {
  auto& task = t.task;
  Node& node = *t.node;
  std::shared_ptr<GraphTask> keep = task;  // the waiter may free the task once outstanding hits 0
  std::unique_lock<std::mutex> done_lock(keep->mu, std::defer_lock);
  if (!task->failed.load(std::memory_order_acquire)) {
    try {
      std::optional<StreamGuard> stream;
      const Device d = node.device();
      if (d.is_cuda() && d.index >= 0 && static_cast<size_t>(d.index) < task->caller_streams.size()) {
        stream.emplace(task->caller_streams[static_cast<size_t>(d.index)]);
      }
      TensorList& inputs = t.inputs;
      run_hooks(node, inputs);
      if (task->captured) {
        auto it = task->capture.find(&node);
        if (it != task->capture.end()) {
          for (auto [input_nr, slot] : it->second) {
            if (input_nr < inputs.size() && inputs[input_nr].defined()) {
              Tensor& dst = (*task->captured)[slot];
              dst = dst.defined() ? native::add(dst, inputs[input_nr]) : inputs[input_nr];
            }
          }
        }
      }
      TensorList outputs;
      if (task->run_accumulate || !dynamic_cast<AccumulateGrad*>(&node)) {
        EMBER_PROFILE_SCOPE_DYNAMIC(node.name(), kAutograd);
        outputs = node.apply(std::move(inputs));
        if (AnomalyMode::is_enabled()) check_anomaly(node, outputs);
      }
      if (!task->keep_graph) node.release_variables();
      const auto& edges = node.next_edges();
      done_lock.lock();
      for (size_t j = 0; j < edges.size(); ++j) {
        const Edge& e = edges[j];
        if (!e.valid() || e.fn->engine_task_ != task.get()) continue;  // pruned or not part of this pass
        Node& next = *e.fn;
        TensorList& buf = next.engine_inputs_;
        if (buf.empty()) buf.resize(std::max<uint32_t>(next.num_outputs(), e.input_nr + 1));
        if (j < outputs.size()) accumulate_into(buf, e.input_nr, std::move(outputs[j]));
        if (--next.engine_deps_ == 0) schedule(task, NodeTask{task, e.fn, std::move(buf)});
      }
    } catch (...) {  // anything a user's backward or hook throws, not only std::exception
      if (!done_lock.owns_lock()) done_lock.lock();
      if (!task->error) {
        task->error = with_node_name(std::current_exception(), node);
        task->failed.store(true, std::memory_order_release);
      }
    }
  }
  if (!done_lock.owns_lock()) done_lock.lock();
  if (--keep->outstanding == 0) keep->done_cv.notify_all();
  done_lock.unlock();
  t = NodeTask();
}

}  // namespace

namespace detail {

void execute(const std::vector<Edge>& roots, TensorList root_grads, bool keep_graph, const std::vector<Edge>* capture,
             TensorList* captured) {
  auto task = std::make_shared<GraphTask>();
  task->keep_graph = keep_graph;
  for (int i = 0; i < cuda_device_count(); ++i) task->caller_streams.push_back(current_stream(Device::cuda(i)));
  if (capture) {
    task->captured = captured;
    task->run_accumulate = false;
    captured->assign(capture->size(), Tensor());
    for (size_t i = 0; i < capture->size(); ++i) {
      const Edge& e = (*capture)[i];
      if (e.valid()) task->capture[e.fn.get()].emplace_back(e.input_nr, i);
    }
  }
  // Count dependencies over every node reachable from the roots.
  auto claim = [&](Node* n) {
    EMBER_CHECK(n->engine_task_ == nullptr, "backward: another backward pass is running through part of this graph "
                "(", n->name(), "); concurrent backward over shared graph nodes is not supported");
    n->engine_task_ = task.get();
    n->engine_deps_ = 0;
    n->engine_inputs_.clear();
    task->nodes.push_back(n);
  };
  struct Release {
    GraphTask* t;
    ~Release() {
      for (Node* n : t->nodes) {
        n->engine_task_ = nullptr;
        n->engine_inputs_.clear();
      }
    }
  };
  std::vector<Node*> stack;
  try {
    for (const Edge& r : roots) {
      if (r.valid() && r.fn->engine_task_ != task.get()) {
        claim(r.fn.get());
        stack.push_back(r.fn.get());
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        if (e.fn->engine_task_ != task.get()) {
          claim(e.fn.get());
          stack.push_back(e.fn.get());
        }
        ++e.fn->engine_deps_;
      }
    }
  } catch (...) {
    Release{task.get()};
    throw;
  }
  Release release{task.get()};
  std::deque<NodeTask> local;
  std::vector<NodeTask> caller_local;
  if (t_is_worker) {
    task->inline_mode = true;
    task->inline_queue = &local;
  } else {
    for (const Edge& r : roots) {
      if (!r.valid()) continue;
      const Device d = r.fn->device();
      if (d.is_cpu()) {
        task->caller_device = d.flat_index();
        task->caller_queue = &caller_local;
      }
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lk(task->mu);
    for (size_t i = 0; i < roots.size(); ++i) {
      const Edge& r = roots[i];
      if (!r.valid()) continue;
      auto& buf = r.fn->engine_inputs_;
      if (buf.empty()) buf.resize(std::max<uint32_t>(r.fn->num_outputs(), r.input_nr + 1));
      accumulate_into(buf, r.input_nr, std::move(root_grads[i]));
    }
    for (const Edge& r : roots) {
      if (!r.valid() || r.fn->engine_deps_ != 0 || r.fn->engine_inputs_.empty()) continue;
      schedule(task, NodeTask{task, r.fn, std::move(r.fn->engine_inputs_)});
      r.fn->engine_inputs_.clear();
    }
  }
  if (task->inline_mode) {
    while (!local.empty()) {
      NodeTask t = std::move(local.front());
      local.pop_front();
      run_task(std::move(t));
    }
  } else {
    // Run this thread's share (if any) as it becomes ready; return once nothing is left.
    NoGradGuard no_grad;  // as on the workers
    std::unique_lock<std::mutex> lk(task->mu);
    for (;;) {
      task->done_cv.wait(lk, [&] { return task->outstanding == 0 || !caller_local.empty(); });
      if (caller_local.empty()) break;
      NodeTask t = std::move(caller_local.back());
      caller_local.pop_back();
      lk.unlock();
      run_task(std::move(t));
      lk.lock();
    }
  }
  if (task->error) std::rethrow_exception(task->error);
}

}  // namespace detail

namespace {
void make_roots(const TensorList& tensors, const TensorList& grads, std::vector<Edge>& roots, TensorList& root_grads,
                const char* op) {
  EMBER_CHECK_T(ValueError, grads.empty() || grads.size() == tensors.size(), op, ": got ", tensors.size(),
                " tensors and ", grads.size(), " gradients");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.requires_grad(), op, ": element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      EMBER_CHECK(t.numel() == 1, op, ": grad can be implicitly created only for scalar outputs (got a tensor of shape ",
                  t.sizes(), ")");
      g = ones_like(t);
    } else {
      EMBER_CHECK_T(ValueError, g.sizes() == t.sizes(), op, ": mismatch in shape: grad_output[", i, "] has a shape of ",
                    g.sizes(), " and output[", i, "] has a shape of ", t.sizes());
    }
    roots.push_back(gradient_edge(t));
    root_grads.push_back(g);
  }
}
}  // namespace

void backward(const TensorList& tensors, const TensorList& grad_tensors, bool retain_graph) {
  std::vector<Edge> roots;
  TensorList root_grads;
  make_roots(tensors, grad_tensors, roots, root_grads, "backward");
  detail::execute(roots, std::move(root_grads), retain_graph, nullptr, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs, bool retain_graph,
                bool allow_unused) {
  std::vector<Edge> roots;
  TensorList root_grads;
  make_roots(outputs, grad_outputs, roots, root_grads, "grad");
  std::vector<Edge> capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].requires_grad(), "grad: One of the differentiated Tensors (input ", i,
                ") does not require grad");
    capture.push_back(gradient_edge(inputs[i]));
  }
  TensorList captured;
  detail::execute(roots, std::move(root_grads), retain_graph, &capture, &captured);
  for (size_t i = 0; i < captured.size(); ++i) {
    EMBER_CHECK(allow_unused || captured[i].defined(), "grad: One of the differentiated Tensors (input ", i,
                ") appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.");
  }
  return captured;
}

}  // namespace ember::autograd

namespace ember {
void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, gradient.defined() ? autograd::TensorList{gradient} : autograd::TensorList{}, retain_graph);
}
}  // namespace ember
