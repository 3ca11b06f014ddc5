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
  if (group->backend_name() == "nccl" && t.device() != device) t = t.to(device);  // nccl: CUDA tensors only
  group->all_reduce(t, ember::parallel::ReduceOp::SUM)->wait(timeout_ms);
  if (!t.device().is_cpu()) t = t.to(ember::Device::cpu(0));
  const double* p = t.data_ptr<double>();
  return std::vector<double>(p, p + values.size());
}

void DistributedJob::barrier() const {
  if (group && world > 1) group->barrier()->wait(timeout_ms);
}

std::string default_ddp_backend(const std::string& explicit_backend, bool under_mpirun, int cuda_devices) {
  if (!explicit_backend.empty()) return explicit_backend;
  if (cuda_devices > 0) return "nccl";
  return under_mpirun ? "mpi" : "tcp";
}

ember::Device ddp_device(int local_rank, int cuda_devices) {
  EMBER_CHECK_T(ember::ValueError, local_rank >= 0, "ddp_device: LOCAL_RANK must be >= 0, got ", local_rank);
  return cuda_devices > 0 ? ember::Device::cuda(local_rank % cuda_devices) : ember::Device::cpu(0);
}

DistributedJob join_job(const std::string& program, const JobOptions& o, std::FILE* out) {
  DistributedJob job;
  if (!o.ddp) return job;
  const auto env = ember::parallel::read_distributed_env();
  EMBER_CHECK_T(ember::ValueError, env.rank && env.world_size,
                "--ddp needs a launcher: run it under `ember-run --nproc-per-node N` or `mpirun -np N` "
                "(or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does)");
  const int gpus = ember::cuda_device_count();
  const std::string backend = default_ddp_backend(o.backend, env.under_mpirun, gpus);
  ember::parallel::InitOptions io;
  io.timeout_ms = o.timeout_s * 1000;
  job.group = ember::parallel::init_process_group(backend, io);
  job.rank = job.group->rank();
  job.world = job.group->size();
  job.local_rank = env.local_rank.value_or(0);
  job.local_world = env.local_world_size.value_or(1);
  job.timeout_ms = io.timeout_ms;
  job.device = ddp_device(job.local_rank, gpus);
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

uint64_t mix_seed(uint64_t seed, uint64_t value) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + value + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t epoch_seed(uint64_t seed, int epoch) { return mix_seed(seed, static_cast<uint64_t>(epoch)); }

std::unique_ptr<ember::parallel::DeterministicReducer> local_shard_reducer(ember::nn::Module& model, int64_t shards) {
  std::vector<ember::Tensor> params;
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters()) {
    params.push_back(p);
    names.push_back(name);
  }
  return std::make_unique<ember::parallel::DeterministicReducer>(
      params, names, nullptr, ember::parallel::DeterministicReducerOptions{.num_shards = shards});
}

}  // namespace ember_examples
