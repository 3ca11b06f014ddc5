// Plain reference implementations for the core op tests. A tensor is read element by element
// through its own sizes, strides and offset (no ember op is involved), held as row-major
// doubles in an Array, and every reference op is a naive loop over multi-indices: slow and
// obviously correct. Tensors with a chosen memory layout are built here too, by writing values
// through explicit strides (make_tensor). Header-only; used by tests only; not thread-safe.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::ref {

// ---- multi-indices ------------------------------------------------------------------------

inline int64_t count(const IntList& shape) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

/// Row-major linear position of `idx` in `shape`.
inline int64_t flat(const IntList& shape, const IntList& idx) {
  int64_t p = 0;
  for (size_t d = 0; d < shape.size(); ++d) p = p * shape[d] + idx[d];
  return p;
}

/// Calls f(idx) for every multi-index of `shape` in row-major order: once for a 0-dim shape,
/// never when a dimension is 0.
template <typename F>
void for_each_index(const IntList& shape, F&& f) {
  if (count(shape) == 0) return;
  IntList idx(shape.size(), 0);
  while (true) {
    f(static_cast<const IntList&>(idx));
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline std::string shape_str(const IntList& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

// ---- Array: logical values, row-major -----------------------------------------------------

struct Array {
  IntList shape;
  std::vector<double> v;

  Array() = default;
  Array(IntList s, std::vector<double> values) : shape(std::move(s)), v(std::move(values)) {
    if (static_cast<int64_t>(v.size()) != count(shape)) throw std::invalid_argument("ref::Array: size mismatch");
  }
  static Array filled(IntList s, double value) {
    std::vector<double> v(static_cast<size_t>(count(s)), value);
    return Array(std::move(s), std::move(v));
  }
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  double& at(const IntList& idx) { return v[static_cast<size_t>(flat(shape, idx))]; }
  double at(const IntList& idx) const { return v[static_cast<size_t>(flat(shape, idx))]; }
};

// ---- reading and writing tensors through their strides --------------------------------------

/// Element `elem` (counted from the storage base, in elements) of t's storage, as double.
inline double load(const Tensor& t, int64_t elem) {
  const char* base = static_cast<const char*>(t.storage().data());
  const char* p = base + elem * static_cast<int64_t>(t.element_size());
  switch (t.dtype()) {
    case DType::Float32: { float x; std::memcpy(&x, p, 4); return x; }
    case DType::Float64: { double x; std::memcpy(&x, p, 8); return x; }
    case DType::Int64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case DType::Int32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::Bool: { uint8_t x; std::memcpy(&x, p, 1); return x ? 1.0 : 0.0; }
    case DType::BFloat16: { BFloat16 x; std::memcpy(&x, p, 2); return static_cast<float>(x); }
    case DType::Float16: { Half x; std::memcpy(&x, p, 2); return static_cast<float>(x); }
  }
  throw std::invalid_argument("ref::load: unknown dtype");
}

/// Stores v (converted as a C++ cast would) at element `elem` of t's storage.
inline void store(const Tensor& t, int64_t elem, double v) {
  char* base = static_cast<char*>(t.storage().data());
  char* p = base + elem * static_cast<int64_t>(t.element_size());
  switch (t.dtype()) {
    case DType::Float32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case DType::Float64: { std::memcpy(p, &v, 8); return; }
    case DType::Int64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); return; }
    case DType::Int32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::Bool: { uint8_t x = v != 0; std::memcpy(p, &x, 1); return; }
    case DType::BFloat16: { BFloat16 x(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case DType::Float16: { Half x(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
  }
  throw std::invalid_argument("ref::store: unknown dtype");
}

/// Storage element of t[idx]: offset + sum(idx[d] * stride[d]).
inline int64_t elem_of(const Tensor& t, const IntList& idx) {
  int64_t e = t.storage_offset();
  for (size_t d = 0; d < idx.size(); ++d) e += idx[d] * t.strides()[d];
  return e;
}

/// The logical values of t, read through its own geometry.
inline Array read(const Tensor& t) {
  Array a = Array::filled(t.sizes(), 0.0);
  for_each_index(t.sizes(), [&](const IntList& idx) { a.at(idx) = load(t, elem_of(t, idx)); });
  return a;
}

/// Writes a's values into t through t's geometry (shapes must match).
inline void write(const Tensor& t, const Array& a) {
  if (t.sizes() != a.shape) throw std::invalid_argument("ref::write: shape mismatch");
  for_each_index(t.sizes(), [&](const IntList& idx) { store(t, elem_of(t, idx), a.at(idx)); });
}

// ---- building tensors with a chosen layout ---------------------------------------------------

enum class Layout {
  kContiguous,  // row-major, offset 0
  kTransposed,  // dims laid out in reverse order (what permute(reversed) of a contiguous base gives)
  kStrided,     // every dim taken with step 2 from a larger buffer, offset 1 (slice(..., step=2))
  kNarrowed,    // rows padded by 3 elements, offset 5 (narrow of a wider tensor)
};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kTransposed: return "transposed";
    case Layout::kStrided: return "strided";
    case Layout::kNarrowed: return "narrowed";
  }
  return "?";
}
inline const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> kAll = {Layout::kContiguous, Layout::kTransposed, Layout::kStrided,
                                           Layout::kNarrowed};
  return kAll;
}

/// A tensor of `dtype` on `device` holding `values` in the given memory layout. Storage outside
/// the view is filled with a sentinel (-77) so reads outside the view show up in results.
inline Tensor make(const Array& values, DType dtype, Layout layout = Layout::kContiguous,
                   Device device = Device::cpu()) {
  const IntList& s = values.shape;
  const size_t nd = s.size();
  IntList strides(nd, 0);
  int64_t offset = 0;
  auto extent = [&](const IntList& st) {  // elements spanned from offset
    int64_t e = 1;
    for (size_t d = 0; d < nd; ++d) e += std::max<int64_t>(s[d] - 1, 0) * st[d];
    return e;
  };
  switch (layout) {
    case Layout::kContiguous: {
      int64_t st = 1;
      for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) { strides[d] = st; st *= std::max<int64_t>(s[d], 1); }
      break;
    }
    case Layout::kTransposed: {
      int64_t st = 1;
      for (size_t d = 0; d < nd; ++d) { strides[d] = st; st *= std::max<int64_t>(s[d], 1); }
      break;
    }
    case Layout::kStrided: {
      int64_t st = 2;
      for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) { strides[d] = st; st *= 2 * std::max<int64_t>(s[d], 1); }
      offset = 1;
      break;
    }
    case Layout::kNarrowed: {
      int64_t st = 1;
      for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
        strides[d] = st;
        st *= std::max<int64_t>(s[d], 1) + (d == static_cast<int64_t>(nd) - 1 ? 3 : 0);
      }
      offset = 5;
      break;
    }
  }
  int64_t storage_elems = offset + extent(strides) + 4;
  Storage storage(static_cast<size_t>(storage_elems) * element_size(dtype), device);
  Tensor t = make_tensor(storage, s, strides, offset, dtype);
  for (int64_t e = 0; e < storage_elems; ++e) store(t, e, -77.0);
  write(t, values);
  return t;
}

/// Deterministic pseudo-random values in [lo, hi); integers when `integral`.
inline Array random(IntList shape, uint32_t seed, double lo = -3.0, double hi = 3.0, bool integral = false) {
  std::mt19937 gen(seed);
  Array a = Array::filled(std::move(shape), 0.0);
  for (auto& x : a.v) {
    if (integral) {
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi) - 1);
      x = static_cast<double>(d(gen));
    } else {
      std::uniform_real_distribution<double> d(lo, hi);
      x = d(gen);
    }
  }
  return a;
}

/// Values as the given dtype would hold them (the rounding a write to that dtype does).
inline Array as_dtype(const Array& a, DType dtype) {
  Tensor t = make(a, dtype);
  return read(t);
}

// ---- element-wise -------------------------------------------------------------------------

/// NumPy broadcasting, written out: align right, sizes equal or 1.
inline IntList broadcast(const IntList& a, const IntList& b) {
  size_t n = std::max(a.size(), b.size());
  IntList out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (da != db && da != 1 && db != 1) throw std::invalid_argument("ref::broadcast: incompatible shapes");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// a's value at `out_idx` of a broadcast result.
inline double at_broadcast(const Array& a, const IntList& out_idx) {
  IntList idx(a.shape.size());
  size_t lead = out_idx.size() - a.shape.size();
  for (size_t d = 0; d < a.shape.size(); ++d) idx[d] = a.shape[d] == 1 ? 0 : out_idx[d + lead];
  return a.at(idx);
}

template <typename F>
Array map(const Array& a, F f) {
  Array out = a;
  for (auto& x : out.v) x = f(x);
  return out;
}

template <typename F>
Array zip(const Array& a, const Array& b, F f) {
  Array out = Array::filled(broadcast(a.shape, b.shape), 0.0);
  for_each_index(out.shape, [&](const IntList& i) { out.at(i) = f(at_broadcast(a, i), at_broadcast(b, i)); });
  return out;
}

template <typename F>
Array zip3(const Array& a, const Array& b, const Array& c, F f) {
  Array out = Array::filled(broadcast(broadcast(a.shape, b.shape), c.shape), 0.0);
  for_each_index(out.shape, [&](const IntList& i) {
    out.at(i) = f(at_broadcast(a, i), at_broadcast(b, i), at_broadcast(c, i));
  });
  return out;
}

// ---- reductions -----------------------------------------------------------------------------

inline int64_t norm_dim(int64_t d, int64_t nd) {
  int64_t n = std::max<int64_t>(nd, 1);
  if (d < -n || d >= n) throw std::invalid_argument("ref::norm_dim: out of range");
  return d < 0 ? d + n : d;
}

/// Which dims of an nd-dim array `dims` names (empty = all).
inline std::vector<bool> reduced_mask(const IntList& dims, int64_t nd) {
  std::vector<bool> r(static_cast<size_t>(nd), dims.empty());
  for (auto d : dims) {
    if (nd > 0) r[static_cast<size_t>(norm_dim(d, nd))] = true;
  }
  return r;
}

inline IntList reduced_shape(const IntList& shape, const std::vector<bool>& red, bool keepdim) {
  IntList out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!red[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

/// Folds every group of reduced elements: acc = f(acc, x), starting from init.
template <typename F>
Array reduce(const Array& a, const IntList& dims, bool keepdim, double init, F f) {
  auto red = reduced_mask(dims, a.dim());
  Array out = Array::filled(reduced_shape(a.shape, red, keepdim), init);
  for_each_index(a.shape, [&](const IntList& i) {
    IntList o;
    for (size_t d = 0; d < i.size(); ++d) {
      if (!red[d]) o.push_back(i[d]);
      else if (keepdim) o.push_back(0);
    }
    double& acc = out.at(o);
    acc = f(acc, a.at(i));
  });
  return out;
}

inline Array sum(const Array& a, const IntList& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, 0.0, [](double acc, double x) { return acc + x; });
}
inline Array prod(const Array& a, const IntList& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, 1.0, [](double acc, double x) { return acc * x; });
}
inline Array amax(const Array& a, const IntList& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, -std::numeric_limits<double>::infinity(),
                [](double acc, double x) { return (std::isnan(acc) || std::isnan(x)) ? NAN : std::max(acc, x); });
}
inline Array amin(const Array& a, const IntList& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, std::numeric_limits<double>::infinity(),
                [](double acc, double x) { return (std::isnan(acc) || std::isnan(x)) ? NAN : std::min(acc, x); });
}
inline int64_t reduced_count(const Array& a, const IntList& dims) {
  auto red = reduced_mask(dims, a.dim());
  int64_t n = 1;
  for (size_t d = 0; d < red.size(); ++d) {
    if (red[d]) n *= a.shape[d];
  }
  return n;
}
inline Array mean(const Array& a, const IntList& dims = {}, bool keepdim = false) {
  double n = static_cast<double>(reduced_count(a, dims));
  return map(sum(a, dims, keepdim), [n](double s) { return s / n; });
}
/// Two-pass variance with Bessel-style correction.
inline Array var(const Array& a, const IntList& dims, int64_t correction, bool keepdim) {
  Array m = mean(a, dims, true);
  Array sq = zip(a, m, [](double x, double mu) { return (x - mu) * (x - mu); });
  double denom = static_cast<double>(reduced_count(a, dims) - correction);
  return map(sum(sq, dims, keepdim), [denom](double s) { return s / denom; });
}

/// (values, indices) of the max (or min) along dim; the first occurrence wins ties.
inline std::pair<Array, Array> arg_reduce(const Array& a, int64_t dim, bool keepdim, bool is_max) {
  int64_t nd = a.dim();
  int64_t d = norm_dim(dim, nd);
  std::vector<bool> red(static_cast<size_t>(nd), false);
  if (nd > 0) red[static_cast<size_t>(d)] = true;
  IntList os = reduced_shape(a.shape, red, keepdim);
  Array vals = Array::filled(os, 0.0), idxs = Array::filled(os, -1.0);
  for_each_index(a.shape, [&](const IntList& i) {
    IntList o;
    for (size_t k = 0; k < i.size(); ++k) {
      if (!red[k]) o.push_back(i[k]);
      else if (keepdim) o.push_back(0);
    }
    double x = a.at(i);
    double pos = nd > 0 ? static_cast<double>(i[static_cast<size_t>(d)]) : 0.0;
    double& best = vals.at(o);
    double& bi = idxs.at(o);
    if (bi < 0 || (is_max ? x > best : x < best)) { best = x; bi = pos; }
  });
  return {vals, idxs};
}

// ---- linear algebra -------------------------------------------------------------------------

/// [n,k] x [k,m] by the textbook triple loop.
inline Array mm(const Array& a, const Array& b) {
  int64_t n = a.shape[0], k = a.shape[1], m = b.shape[1];
  if (b.shape[0] != k) throw std::invalid_argument("ref::mm: shape mismatch");
  Array out = Array::filled({n, m}, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += a.v[i * k + p] * b.v[p * m + j];
      out.v[i * m + j] = s;
    }
  return out;
}

/// torch.matmul semantics written out: 1-D operands get a unit dim that is dropped afterwards,
/// batch dims broadcast.
inline Array matmul(const Array& a, const Array& b) {
  IntList as = a.shape, bs = b.shape;
  if (a.dim() == 1) as.insert(as.begin(), 1);
  if (b.dim() == 1) bs.push_back(1);
  int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  if (bs[bs.size() - 2] != k) throw std::invalid_argument("ref::matmul: shape mismatch");
  IntList ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  IntList batch = broadcast(ab, bb);
  Array A(as, a.v), B(bs, b.v);
  IntList full = batch;
  full.push_back(n);
  full.push_back(m);
  Array out = Array::filled(full, 0.0);
  for_each_index(full, [&](const IntList& idx) {
    IntList bi(idx.begin(), idx.end() - 2);
    int64_t i = idx[idx.size() - 2], j = idx.back();
    double s = 0;
    for (int64_t p = 0; p < k; ++p) {
      IntList ia = bi, ib = bi;
      ia.push_back(i); ia.push_back(p);
      ib.push_back(p); ib.push_back(j);
      // at_broadcast aligns the batch dims right and maps size-1 dims to 0
      s += at_broadcast(A, ia) * at_broadcast(B, ib);
    }
    out.at(idx) = s;
  });
  IntList final_shape = batch;
  if (a.dim() > 1) final_shape.push_back(n);
  if (b.dim() > 1) final_shape.push_back(m);
  return Array(final_shape, out.v);
}

// ---- shape and indexing ---------------------------------------------------------------------

inline Array permute(const Array& a, const IntList& perm) {
  IntList s(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) s[i] = a.shape[perm[i]];
  Array out = Array::filled(s, 0.0);
  for_each_index(s, [&](const IntList& o) {
    IntList i(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) i[perm[k]] = o[k];
    out.at(o) = a.at(i);
  });
  return out;
}

inline Array index_select(const Array& a, int64_t dim, const std::vector<int64_t>& index) {
  IntList s = a.shape;
  s[dim] = static_cast<int64_t>(index.size());
  Array out = Array::filled(s, 0.0);
  for_each_index(s, [&](const IntList& o) {
    IntList i = o;
    i[dim] = index[o[dim]];
    out.at(o) = a.at(i);
  });
  return out;
}

/// out[i] = a[i with dim replaced by index[i]]
inline Array gather(const Array& a, int64_t dim, const Array& index) {
  Array out = Array::filled(index.shape, 0.0);
  for_each_index(index.shape, [&](const IntList& o) {
    IntList i = o;
    i[dim] = static_cast<int64_t>(index.at(o));
    out.at(o) = a.at(i);
  });
  return out;
}

/// self[i with dim replaced by index[i]] += src[i] for every i of index.
inline Array scatter_add(const Array& self, int64_t dim, const Array& index, const Array& src) {
  Array out = self;
  for_each_index(index.shape, [&](const IntList& o) {
    IntList i = o;
    i[dim] = static_cast<int64_t>(index.at(o));
    out.at(i) += src.at(o);
  });
  return out;
}

/// self[..., index[j], ...] += src[..., j, ...]
inline Array index_add(const Array& self, int64_t dim, const std::vector<int64_t>& index, const Array& src) {
  Array out = self;
  for_each_index(src.shape, [&](const IntList& o) {
    IntList i = o;
    i[dim] = index[o[dim]];
    out.at(i) += src.at(o);
  });
  return out;
}

inline Array cat(const std::vector<Array>& parts, int64_t dim) {
  IntList s = parts.at(0).shape;
  s[dim] = 0;
  for (const auto& p : parts) s[dim] += p.shape[dim];
  Array out = Array::filled(s, 0.0);
  int64_t off = 0;
  for (const auto& p : parts) {
    for_each_index(p.shape, [&](const IntList& i) {
      IntList o = i;
      o[dim] += off;
      out.at(o) = p.at(i);
    });
    off += p.shape[dim];
  }
  return out;
}

/// Elements [start, start+length) of dim.
inline Array narrow(const Array& a, int64_t dim, int64_t start, int64_t length) {
  IntList s = a.shape;
  s[dim] = length;
  Array out = Array::filled(s, 0.0);
  for_each_index(s, [&](const IntList& o) {
    IntList i = o;
    i[dim] += start;
    out.at(o) = a.at(i);
  });
  return out;
}

/// softmax along dim as the definition reads, with the row max subtracted (exp(x - max) / sum).
inline Array softmax(const Array& a, int64_t dim, bool log) {
  int64_t d = norm_dim(dim, a.dim());
  Array mx = a.dim() == 0 ? a : amax(a, {d}, true);
  Array e = zip(a, mx, [](double x, double m) { return std::exp(x - m); });
  Array s = a.dim() == 0 ? e : sum(e, {d}, true);
  if (log) {
    return zip3(a, mx, s, [](double x, double m, double z) { return x - m - std::log(z); });
  }
  return zip(e, s, [](double x, double z) { return x / z; });
}

// ---- comparison -------------------------------------------------------------------------------

/// Relative/absolute tolerance for results of `dtype` checked against double references.
struct Tol {
  double rtol, atol;
};
inline Tol tol_for(DType dtype) {
  switch (dtype) {
    case DType::Float32: return {1e-5, 1e-5};
    case DType::Float64: return {1e-11, 1e-11};
    case DType::BFloat16: return {1e-2, 1e-2};
    case DType::Float16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

/// Same shape, and every element within atol + rtol*|expected| (NaN matches NaN, inf matches
/// an inf of the same sign).
inline ::testing::AssertionResult all_close(const Array& actual, const Array& expected, Tol tol) {
  if (actual.shape != expected.shape) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape) << " != expected "
                                         << shape_str(expected.shape);
  }
  int64_t bad = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double x = actual.v[i], e = expected.v[i];
    bool ok;
    if (std::isnan(e) || std::isnan(x)) {
      ok = std::isnan(e) && std::isnan(x);
    } else if (std::isinf(e) || std::isinf(x)) {
      ok = x == e;
    } else {
      ok = std::fabs(x - e) <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (!ok && bad++ == 0) first << "element " << i << ": got " << x << ", expected " << e;
  }
  if (bad) {
    return ::testing::AssertionFailure() << bad << " of " << actual.numel() << " elements differ; first "
                                         << first.str();
  }
  return ::testing::AssertionSuccess();
}

/// t (read through its strides) matches `expected`, and has dtype `dtype`.
inline ::testing::AssertionResult matches(const Tensor& t, const Array& expected, DType dtype) {
  if (!t.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (t.dtype() != dtype) {
    return ::testing::AssertionFailure() << "dtype " << dtype_name(t.dtype()) << " != expected " << dtype_name(dtype);
  }
  return all_close(read(t), expected, tol_for(dtype));
}
inline ::testing::AssertionResult matches(const Tensor& t, const Array& expected, DType dtype, Tol tol) {
  if (t.dtype() != dtype) {
    return ::testing::AssertionFailure() << "dtype " << dtype_name(t.dtype()) << " != expected " << dtype_name(dtype);
  }
  return all_close(read(t), expected, tol);
}

}  // namespace ember::ref
