// Intra-op parallelism: one process-wide pool of worker threads that kernels split loops over.
// Fork-safe: a child process never uses the parent's (dead) threads; it re-creates the pool
// lazily on first use. No OpenMP (it does not survive fork). All functions are thread-safe;
// parallel_for called from inside a pool task, or with 1 thread, runs inline.
#pragma once
#include <cstdint>
#include <functional>

namespace ember {

/// Sets the number of threads kernels may use (>= 1); also sets OpenBLAS's thread count (to 1
/// under use_deterministic_algorithms(true): Note [Deterministic GEMM]).
void set_num_threads(int num_threads);

namespace detail {
/// OpenBLAS's own thread count: get_num_threads(), or 1 under use_deterministic_algorithms(true)
/// (Note [Deterministic GEMM] in core/kernels/cpu/blas_gemm.cpp). Called when either changes.
void apply_blas_threads();
}  // namespace detail

/// Default: EMBER_NUM_THREADS if set, else the number of CPUs this process may run on
/// (available_cpu_count(): its affinity mask, e.g. the block ember-run bound a rank to).
int get_num_threads();

/// Calls f(chunk_begin, chunk_end) over [begin, end), split into at most get_num_threads()
/// chunks of at least grain_size elements. Returns when all chunks are done; the first
/// exception thrown by any chunk is rethrown in the caller.
void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& f);

/// True while the calling thread runs a parallel_for chunk on a pool worker.
bool in_parallel_region();

}  // namespace ember
