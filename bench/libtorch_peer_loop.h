// The command loop of a LibTorch peer (bench/<name>_libtorch.cpp) that an ember benchmark drives
// over pipes as bench::TorchPeer expects (bench/harness.h, Note [LibTorch peer]): prints
// `ready <LibTorch version>`, then answers each line on stdin with one line: `quit` replies `bye`
// and ends the loop; any other command goes to handle(cmd, args), which prints its reply and
// returns true, or returns false for an unknown command (replied `error unknown command <cmd>`).
// Header-only, included by the peers alone (it includes LibTorch's headers).
#pragma once
#include <torch/version.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

namespace ember::bench {

template <typename Handle>
int serve_commands(Handle&& handle) {
  std::printf("ready %d.%d.%d\n", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream args(line);
    std::string cmd;
    args >> cmd;
    if (cmd == "quit") {
      std::printf("bye\n");
      std::fflush(stdout);
      return 0;
    }
    if (!handle(cmd, args)) std::printf("error unknown command %s\n", cmd.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace ember::bench
