#include "examples/common/distributed_job.h"

#include <unistd.h>

#include <cstdarg>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/stream.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/tcp/process_group_tcp.h"

namespace ember_examples {

std::vector<double> DistributedJob::sum(std::vector<double> values) const {
  if (!group || world == 1) return values;
  ember::Tensor t = ember::from_vector(values);
  group->all_reduce(t, ember::parallel::ReduceOp::SUM)->wait(timeout_ms);
  const double* p = t.data_ptr<double>();
  return std::vector<double>(p, p + values.size());
}

void DistributedJob::barrier() const {
  if (group && world > 1) group->barrier()->wait(timeout_ms);
}

namespace {
std::string pick_backend(const JobOptions& o, const ember::parallel::DistributedEnv& env) {
  if (!o.backend.empty()) return o.backend;
  if (env.under_mpirun) return "mpi";
  return ember::cuda_device_count() > 0 ? "nccl" : "tcp";
}
}  // namespace

DistributedJob join_job(const std::string& program, const JobOptions& o, std::FILE* out) {
  DistributedJob job;
  if (!o.ddp) return job;
  const auto env = ember::parallel::read_distributed_env();
  EMBER_CHECK_T(ember::ValueError, env.rank && env.world_size, program,
                ": --ddp needs a launcher: run it under `ember-run --nproc-per-node N` or `mpirun -np N` "
                "(or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does)");
  const std::string backend = pick_backend(o, env);
  ember::parallel::InitOptions io;
  io.timeout_ms = o.timeout_s * 1000;
  job.group = ember::parallel::init_process_group(backend, io);
  job.rank = job.group->rank();
  job.world = job.group->size();
  job.local_rank = env.local_rank.value_or(0);
  job.local_world = env.local_world_size.value_or(1);
  job.timeout_ms = io.timeout_ms;
  // Every rank says who it is (ember-run prefixes the line with the rank): a test or an
  // operator can find the process of a given rank, and on tcp the address its peers reach.
  std::string where;
  if (const auto* tcp = dynamic_cast<const ember::parallel::ProcessGroupTCP*>(job.group.get());
      tcp != nullptr && !tcp->address().empty())
    where = ", listening on " + tcp->address();
  std::fprintf(out, "%s: rank %d of %d (local rank %d, pid %d), %s backend%s%s\n", program.c_str(), job.rank,
               job.world, job.local_rank, static_cast<int>(::getpid()), backend.c_str(),
               env.restart_count ? (", restart " + std::to_string(env.restart_count)).c_str() : "", where.c_str());
  std::fflush(out);
  return job;
}

void say(std::FILE* out, const char* format, ...) {
  if (out == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(out, format, args);
  va_end(args);
  std::fflush(out);
}

uint64_t epoch_seed(uint64_t seed, int epoch) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace ember_examples
