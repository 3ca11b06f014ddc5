// fork_children: child processes for the stores' multi-process tests. Each child runs its body
// and _exit()s (0 when the body returned, 1 when it threw), never returning into GoogleTest.
// Header-only; tests only.
#pragma once
#include <gtest/gtest.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

namespace ember::parallel::test {

/// Forks n children, child i running body(i); returns their pids (fewer, with a test failure,
/// when fork fails).
inline std::vector<pid_t> fork_children(int n, const std::function<void(int)>& body) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork failed";
      break;
    }
    if (pid == 0) {
      int code = 1;
      try {
        body(i);
        code = 0;
      } catch (...) {
      }
      ::_exit(code);  // no gtest teardown in the child
    }
    pids.push_back(pid);
  }
  return pids;
}

/// Reaps every child; each must have exited with status 0.
inline void expect_children_succeeded(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

}  // namespace ember::parallel::test
