// The Engine executes backward over the graph: it counts each node's dependencies, then runs
// ready nodes on one worker thread per device (cpu:N, cuda:N), so backward through replicas
// on several devices runs concurrently. The calling thread waits; the first error raised by
// any node is rethrown there with the node's name. Thread-safe: concurrent backward calls on
// disjoint graphs are fine. A backward called from inside a node (reentrant) runs inline on
// the calling worker. See Note [Engine threads] in engine.cpp.
#pragma once
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

/// Accumulates gradients of `tensors` (seeded with `grad_tensors`, or ones for scalars) into
/// the .grad of the leaves they depend on.
void backward(const TensorList& tensors, const TensorList& grad_tensors = {}, bool retain_graph = false);

/// Returns d(outputs)/d(inputs) without touching any .grad. With allow_unused, inputs that the
/// outputs do not depend on get undefined tensors; otherwise that is an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

namespace detail {
/// Runs the graph from `roots`; when `capture` is given, records the gradient flowing into each
/// of those edges into `captured` and does not run AccumulateGrad nodes.
void execute(const std::vector<Edge>& roots, TensorList root_grads, bool keep_graph,
             const std::vector<Edge>* capture, TensorList* captured);
}  // namespace detail

}  // namespace ember::autograd
