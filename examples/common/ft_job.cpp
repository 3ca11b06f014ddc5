#include "examples/common/ft_job.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/cpu_affinity.h"
#include "core/deterministic.h"
#include "core/env.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/thread_pool.h"

namespace ember_examples {

namespace {

namespace ft = ember::parallel::ft;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t a = 0;
  for (size_t b; (b = s.find(sep, a)) != std::string::npos; a = b + 1) out.push_back(s.substr(a, b - a));
  out.push_back(s.substr(a));
  return out;
}

}  // namespace

FtFaults::FtFaults(const std::string& spec, int slot, int64_t incarnation, std::FILE* out)
    : slot_(slot), incarnation_(incarnation), out_(out) {
  if (spec.empty()) return;
  for (const std::string& item : split(spec, ',')) {
    const std::vector<std::string> f = split(item, ':');
    EMBER_CHECK_T(ember::ValueError, f.size() == 5, "--ft-fault: expected SLOT:INCARNATION:STEP:POINT:SIGNAL, got '",
                  item, "'");
    Fault x;
    x.slot = std::stoi(f[0]);
    x.incarnation = std::stoll(f[1]);
    x.step = f[2] == "*" ? -1 : std::stoll(f[2]);
    x.point = f[3];
    EMBER_CHECK_T(ember::ValueError,
                  x.point == "forward" || x.point == "backward" || x.point == "commit" || x.point == "loaded",
                  "--ft-fault: POINT is forward, backward, commit or loaded; got '", x.point, "'");
    if (f[4].rfind("SLEEP", 0) == 0) {
      x.sleep_ms = std::stoll(f[4].substr(5));
    } else {
      EMBER_CHECK_T(ember::ValueError, f[4] == "KILL" || f[4] == "STOP",
                    "--ft-fault: SIGNAL is KILL, STOP or SLEEP<ms>; got '", f[4], "'");
      x.signo = f[4] == "KILL" ? SIGKILL : SIGSTOP;
    }
    faults_.push_back(x);
  }
}

void FtFaults::at(const std::string& point, int64_t step) const {
  for (const Fault& f : faults_) {
    const bool here = f.slot == slot_ && f.incarnation == incarnation_ && (f.step < 0 || f.step == step);
    if (!here || f.point != point) continue;
    if (f.signo == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(f.sleep_ms));
      continue;
    }
    std::fprintf(out_, "ft-fault: slot %d raising SIG%s at step %lld (%s) at %.3f ms\n", slot_,
                 f.signo == SIGKILL ? "KILL" : "STOP", static_cast<long long>(step), point.c_str(), wall_ms());
    std::fflush(out_);
    ::raise(f.signo);
  }
}

void prepare_ft_rank(int threads, bool deterministic) {
  EMBER_CHECK_T(ember::ValueError, ft::enabled_by_environment(),
                "--ft: run the ranks under `ember-run --ft --nproc-per-node N ...` (EMBER_FT is not set)");
  const int local_world = static_cast<int>(ember::env::integer("LOCAL_WORLD_SIZE", 1, 1 << 24).value_or(1));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ember::set_num_threads(threads > 0 ? threads
                                     : std::max(1, std::min(ember::available_cpu_count(), cores / local_world)));
  if (deterministic) ember::use_deterministic_algorithms(true);
}

ft::ManagerOptions ft_manager_options(ember::nn::Module& model, ember::optim::Optimizer& optimizer, std::FILE* out,
                                      FtExtraState extra) {
  ft::ManagerOptions mo = ft::options_from_environment();
  mo.state_dict = [&model, &optimizer, save = extra.save] {
    ft::StateDict s;
    for (const auto& [k, t] : model.state_dict()) s.tensors.emplace_back("model." + k, t);
    for (const auto& [idx, state] : optimizer.state_dict().state)
      for (const auto& [k, t] : state) s.tensors.emplace_back("optim." + std::to_string(idx) + "." + k, t);
    const std::vector<uint8_t> rng = ember::default_generator().get_state();
    s.metadata["rng.cpu"] = std::string(rng.begin(), rng.end());  // raw bytes: entries are length-prefixed
    if (save) save(s);
    return s;
  };
  mo.load_state_dict = [&model, &optimizer, load = extra.load](const ft::StateDict& s) {
    ember::nn::StateDict msd;
    ember::optim::OptimizerStateDict osd = optimizer.state_dict();
    osd.state.clear();
    for (const auto& [name, t] : s.tensors) {
      if (name.rfind("model.", 0) == 0) {
        msd.emplace_back(name.substr(6), t);
      } else if (name.rfind("optim.", 0) == 0) {
        const size_t dot = name.find('.', 6);
        EMBER_CHECK_T(ember::ValueError, dot != std::string::npos, "--ft: a peer sent state '", name, "'");
        osd.state[std::stoll(name.substr(6, dot - 6))][name.substr(dot + 1)] = t;
      }
    }
    model.load_state_dict(msd);
    optimizer.load_state_dict(osd);
    const auto rng = s.metadata.find("rng.cpu");
    EMBER_CHECK_T(ember::ValueError, rng != s.metadata.end(), "--ft: a peer sent no generator state (\"rng.cpu\")");
    ember::default_generator().set_state(std::vector<uint8_t>(rng->second.begin(), rng->second.end()));
    if (load) load(s);
  };
  mo.log = [out](const std::string& line) {
    std::fprintf(out, "%s\n", line.c_str());
    std::fflush(out);
  };
  return mo;
}

std::string parameter_hash(const ember::nn::Module& m) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& item : m.named_parameters()) {
    const ember::Tensor t = item.value().contiguous();
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void print_ft_step_trace(std::FILE* out, int64_t step, const ft::Manager& manager, const ember::nn::Module& model,
                         double protocol_ms) {
  std::fprintf(out, "step-trace step=%lld slot=%d ranks=%d hash=%s t_ms=%.3f ft_ms=%.3f\n",
               static_cast<long long>(step), manager.replica_id(), manager.num_participants(),
               parameter_hash(model).c_str(), wall_ms(), protocol_ms);
  std::fflush(out);
}

}  // namespace ember_examples
