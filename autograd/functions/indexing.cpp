// Tensor indexing: index() and index_put_() (see Note [Indexing]).
#include "autograd/indexing.h"

#include <numeric>

#include "autograd/functions/detail.h"

namespace ember {

// Note [Indexing]
// An index is applied in two steps, as in PyTorch. (1) The basic terms walk the dimensions left
// to right and make a view: an integer selects, a Slice slices, None and bools insert a
// dimension (of size 0 for false), Ellipsis skips the dimensions the other terms leave. Tensor
// terms keep their dimension and are remembered with its position: an int64/int32 tensor as
// itself, a bool mask over k dimensions as the k int64 index tensors of its true positions.
// (2) If tensor terms remain, they are broadcast together, the dimensions they index are moved
// to the front and flattened, the indices linearized, and one index_select gathers. The
// broadcast index shape replaces the indexed dimensions, where the first was if they were
// adjacent, else in front (NumPy's rule). Every index is read and checked on the host before
// anything is gathered or written (IndexError naming the dimension of self and its size).
// index() uses the differentiable ops, so gradients flow through the views and index_select.
// index_put_ builds the same view with native ops (sharing self's storage), checks that the
// value broadcasts to the shape index() would return, and writes each indexed row with native
// copy_/add_ (a bool mask over all of self with a number is masked_fill_). Its node gives self's
// gradient with the written region zeroed (unchanged for accumulate) and value's as
// grad.index(indices) summed to value's shape. Duplicate indices without accumulate: the last
// write wins (PyTorch leaves it undefined).

namespace {

struct IndexPlan {
  Tensor view;                    // self after the basic terms
  std::vector<int64_t> adv_dims;  // dimensions of `view` indexed by tensors, ascending
  std::vector<Tensor> adv_index;  // one int64 CPU tensor per such dimension, wrapped and checked
};

// The flattened gather of the tensor terms (step 2 of Note [Indexing]).
struct Gather {
  IntList index_shape;                    // broadcast shape of the index tensors
  std::vector<std::vector<int64_t>> rows; // per indexed dimension: its index for each gathered row
  IntList perm;                           // indexed dimensions first, then the others in order
  IntList rest;                           // sizes of the other dimensions
  int64_t indexed_numel = 1;              // product of the indexed dimensions' sizes
  int64_t insert_at = 0;                  // where the index shape goes in the result
};

Tensor index_op_unsqueeze(bool diff, const Tensor& t, int64_t d) {
  return diff ? unsqueeze(t, d) : native::unsqueeze(t, d);
}
Tensor index_op_slice(bool diff, const Tensor& t, int64_t d, int64_t start, int64_t stop, int64_t step) {
  return diff ? slice(t, d, start, stop, step) : native::slice(t, d, start, stop, step);
}
Tensor index_op_select(bool diff, const Tensor& t, int64_t d, int64_t i) {
  return diff ? select(t, d, i) : native::select(t, d, i);
}

// A dimension of size 1 (or 0 for false) at `dim`: the bool term.
Tensor insert_bool_dim(bool diff, const Tensor& t, int64_t dim, bool keep) {
  Tensor out = index_op_unsqueeze(diff, t, dim);
  return keep ? out : index_op_slice(diff, out, dim, 0, 0, 1);
}

void check_in_range(const char* op, int64_t i, int64_t dim, int64_t size) {
  EMBER_CHECK_T(IndexError, i >= -size && i < size, op, ": index ", i, " is out of bounds for dimension ", dim,
                " with size ", size);
}

IndexPlan plan_index(const Tensor& self, const std::vector<TensorIndex>& indices, bool diff, const char* op) {
  EMBER_CHECK(self.defined(), op, ": operation on an undefined Tensor");
  int64_t consumed = 0;
  int ellipses = 0;
  for (const auto& ix : indices) {
    if (ix.is_integer() || ix.is_slice()) {
      ++consumed;
    } else if (ix.is_tensor()) {
      EMBER_CHECK_T(ValueError, ix.tensor().defined(), op, ": an index tensor is undefined");
      consumed += ix.tensor().dtype() == kBool ? ix.tensor().dim() : 1;
    } else if (ix.is_ellipsis()) {
      ++ellipses;
    }
  }
  EMBER_CHECK_T(IndexError, ellipses <= 1, op, ": an index can only have a single ellipsis ('...')");
  EMBER_CHECK_T(IndexError, consumed <= self.dim(), op, ": too many indices for tensor of dimension ", self.dim(),
                " (got ", consumed, ")");
  IndexPlan p;
  p.view = self;
  int64_t dim = 0;  // position in p.view
  int64_t src = 0;  // the dimension of self the next consuming term indexes
  for (size_t term = 0; term < indices.size(); ++term) {
    const TensorIndex& ix = indices[term];
    switch (ix.kind()) {
      case TensorIndex::Kind::kNone:
        p.view = index_op_unsqueeze(diff, p.view, dim++);
        break;
      case TensorIndex::Kind::kBoolean:
        p.view = insert_bool_dim(diff, p.view, dim++, ix.boolean());
        break;
      case TensorIndex::Kind::kEllipsis:
        dim += self.dim() - consumed;
        src += self.dim() - consumed;
        break;
      case TensorIndex::Kind::kInteger: {
        const int64_t size = p.view.size(dim);
        const int64_t i = ix.integer();
        check_in_range(op, i, src++, size);
        p.view = index_op_select(diff, p.view, dim, i < 0 ? i + size : i);
        break;
      }
      case TensorIndex::Kind::kSlice:
        p.view = index_op_slice(diff, p.view, dim++, ix.slice().start(), ix.slice().stop(), ix.slice().step());
        ++src;
        break;
      case TensorIndex::Kind::kTensor: {
        const Tensor& t = ix.tensor();
        if (t.dtype() == kBool && t.dim() == 0) {  // a 0-dim mask is a bool term
          p.view = insert_bool_dim(diff, p.view, dim++, t.item() != 0);
          break;
        }
        if (t.dtype() == kBool) {
          const int64_t k = t.dim();
          const IntList want(p.view.sizes().begin() + dim, p.view.sizes().begin() + dim + k);
          EMBER_CHECK_T(IndexError, t.sizes() == want, op, ": the shape of the mask ", t.sizes(), " at index ", term,
                        " does not match the shape of the indexed tensor ", want, " at dimension ", src);
          const std::vector<int64_t> m = t.to_vector<int64_t>();
          std::vector<std::vector<int64_t>> coords(static_cast<size_t>(k));
          for (int64_t flat = 0; flat < static_cast<int64_t>(m.size()); ++flat) {
            if (m[static_cast<size_t>(flat)] == 0) continue;
            int64_t r = flat;
            for (int64_t d = k - 1; d >= 0; --d) {
              coords[static_cast<size_t>(d)].push_back(r % want[static_cast<size_t>(d)]);
              r /= want[static_cast<size_t>(d)];
            }
          }
          for (int64_t d = 0; d < k; ++d) {
            p.adv_dims.push_back(dim + d);
            p.adv_index.push_back(from_vector(coords[static_cast<size_t>(d)]));
          }
          dim += k;
          src += k;
          break;
        }
        EMBER_CHECK_T(TypeError, t.dtype() == kInt64 || t.dtype() == kInt32, op,
                      ": tensors used as indices must be long, int or bool tensors, got ", t.dtype());
        const int64_t size = p.view.size(dim);
        std::vector<int64_t> v = t.to_vector<int64_t>();
        for (auto& i : v) {
          check_in_range(op, i, src, size);
          if (i < 0) i += size;
        }
        p.adv_dims.push_back(dim++);
        p.adv_index.push_back(native::reshape(from_vector(v), t.sizes()));
        ++src;
        break;
      }
    }
  }
  return p;
}

Gather plan_gather(const IndexPlan& p, const char* op) {
  Gather g;
  g.index_shape = p.adv_index[0].sizes();
  for (size_t k = 1; k < p.adv_index.size(); ++k) {
    g.index_shape = native::broadcast_shapes(g.index_shape, p.adv_index[k].sizes(), op);
  }
  for (const Tensor& idx : p.adv_index) g.rows.push_back(native::expand(idx, g.index_shape).to_vector<int64_t>());
  const auto n = static_cast<int64_t>(p.adv_dims.size());
  bool adjacent = true;
  for (int64_t k = 1; k < n; ++k) adjacent = adjacent && p.adv_dims[k] == p.adv_dims[0] + k;
  g.insert_at = adjacent ? p.adv_dims[0] : 0;
  g.perm = p.adv_dims;
  for (int64_t d = 0; d < p.view.dim(); ++d) {
    if (std::find(p.adv_dims.begin(), p.adv_dims.end(), d) == p.adv_dims.end()) {
      g.perm.push_back(d);
      g.rest.push_back(p.view.size(d));
    }
  }
  for (int64_t d : p.adv_dims) g.indexed_numel *= p.view.size(d);
  return g;
}

// Linear index of each gathered row into the flattened indexed dimensions.
Tensor linear_index(const IndexPlan& p, const Gather& g) {
  std::vector<int64_t> lin(g.rows.empty() ? 0 : g.rows[0].size(), 0);
  int64_t scale = 1;
  for (int64_t k = static_cast<int64_t>(p.adv_dims.size()) - 1; k >= 0; --k) {
    for (size_t i = 0; i < lin.size(); ++i) lin[i] += g.rows[static_cast<size_t>(k)][i] * scale;
    scale *= p.view.size(p.adv_dims[static_cast<size_t>(k)]);
  }
  return native::to(from_vector(lin), p.view.device());
}

IntList concat(const IntList& a, const IntList& b) {
  IntList out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// The permutation moving the first `block` dimensions of an ndim tensor to position `at`
// (inverse = true: back to the front).
IntList move_block(int64_t block, int64_t at, int64_t ndim, bool inverse) {
  IntList order;
  for (int64_t d = block; d < block + at; ++d) order.push_back(d);
  for (int64_t d = 0; d < block; ++d) order.push_back(d);
  for (int64_t d = block + at; d < ndim; ++d) order.push_back(d);
  if (!inverse) return order;
  IntList inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return inv;
}

// The shape index() returns for this plan.
IntList result_shape(const IndexPlan& p, const Gather* g) {
  if (g == nullptr) return p.view.sizes();
  IntList s(g->rest.begin(), g->rest.begin() + g->insert_at);
  s.insert(s.end(), g->index_shape.begin(), g->index_shape.end());
  s.insert(s.end(), g->rest.begin() + g->insert_at, g->rest.end());
  return s;
}

}  // namespace

Tensor index(const Tensor& self, const std::vector<TensorIndex>& indices) {
  IndexPlan p = plan_index(self, indices, /*diff=*/true, "index");
  if (p.adv_dims.empty()) return p.view;
  Gather g = plan_gather(p, "index");
  Tensor flat = reshape(permute(p.view, g.perm), concat({g.indexed_numel}, g.rest));
  Tensor out = reshape(index_select(flat, 0, linear_index(p, g)), concat(g.index_shape, g.rest));
  if (g.insert_at > 0) {
    out = permute(out, move_block(static_cast<int64_t>(g.index_shape.size()), g.insert_at, out.dim(), false));
  }
  return out;
}

Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value, bool accumulate) {
  EMBER_CHECK(self.defined(), "index_put_: operation on an undefined Tensor");
  EMBER_CHECK_T(ValueError, value.defined(), "index_put_: the value tensor is undefined");
  autograd::detail::check_inplace(self, "index_put_");
  const bool track = autograd::any_requires_grad({&self, &value});
  const autograd::Edge prev = track ? autograd::gradient_edge(self) : autograd::Edge{};

  IndexPlan p = plan_index(self, indices, /*diff=*/false, "index_put_");
  std::optional<Gather> g;
  if (!p.adv_dims.empty()) g = plan_gather(p, "index_put_");
  const IntList shape = result_shape(p, g ? &*g : nullptr);
  bool broadcasts = value.dim() <= static_cast<int64_t>(shape.size());
  for (int64_t d = 1; broadcasts && d <= value.dim(); ++d) {
    const int64_t have = value.sizes()[static_cast<size_t>(value.dim() - d)];
    broadcasts = have == 1 || have == shape[shape.size() - static_cast<size_t>(d)];
  }
  EMBER_CHECK_T(ValueError, broadcasts, "index_put_: shape mismatch: value tensor of shape ", value.sizes(),
                " cannot be broadcast to indexing result of shape ", shape);
  Tensor src = native::expand(native::to(value, self.device(), self.dtype()), shape);
  if (!g) {
    Tensor dst = p.view;
    accumulate ? native::add_(dst, src) : native::copy_(dst, src);
  } else {
    if (g->insert_at > 0) {
      src = native::permute(src, move_block(static_cast<int64_t>(g->index_shape.size()), g->insert_at, src.dim(), true));
    }
    const int64_t n = static_cast<int64_t>(g->rows[0].size());
    src = native::reshape(src, concat({n}, g->rest));
    Tensor vp = native::permute(p.view, g->perm);
    for (int64_t i = 0; i < n; ++i) {
      Tensor dst = vp;
      for (const auto& r : g->rows) dst = native::select(dst, 0, r[static_cast<size_t>(i)]);
      Tensor row = native::select(src, 0, i);
      accumulate ? native::add_(dst, row) : native::copy_(dst, row);
    }
  }
  if (track) {
    auto node = std::make_shared<FunctionNode>(
        "IndexPutBackward0", [indices, accumulate, mv = InputMeta(value)](FunctionNode& n, TensorList& grads) {
          TensorList out(2);
          if (n.needs_input_grad(0)) {
            out[0] = grads[0];
            if (!accumulate) {
              out[0] = native::clone(grads[0]);
              index_put_(out[0], indices, 0.0);
            }
          }
          if (n.needs_input_grad(1)) {
            Tensor gv = autograd::detail::reduce_grad(index(grads[0], indices), mv);
            out[1] = gv.device() == mv.device ? gv : native::to(gv, mv.device);
          }
          return out;
        });
    node->mutable_next_edges() = {prev, value.requires_grad() ? autograd::gradient_edge(value) : autograd::Edge{}};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}

Tensor& index_put_(Tensor& self, const std::vector<TensorIndex>& indices, double value) {
  EMBER_CHECK(self.defined(), "index_put_: operation on an undefined Tensor");
  if (indices.size() == 1 && indices[0].is_tensor() && indices[0].tensor().defined() &&
      indices[0].tensor().dtype() == kBool && indices[0].tensor().sizes() == self.sizes()) {
    return masked_fill_(self, indices[0].tensor(), value);  // x.index_put_({mask}, v): one pass
  }
  return index_put_(self, indices, scalar_tensor(value, TensorOptions(self.dtype()).device(self.device())));
}

}  // namespace ember
