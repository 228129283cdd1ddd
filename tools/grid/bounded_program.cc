#include "grid/bounded_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX kill
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <thread>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, for posix_spawn

namespace posenc::cli {

ProgramOutput RunBoundedProgram(const std::vector<std::string>& argv, double timeout_s) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: posix_spawn's type
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (error != 0) {
    ::close(fds[0]);
    throw std::system_error(error, std::generic_category(), "cannot start " + argv[0]);
  }
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  const auto left_ms = [&] {
    const auto left = deadline - std::chrono::steady_clock::now();
    return static_cast<int>(
        std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count()));
  };
  ProgramOutput out;
  // Read until end of output (the program, or whatever it started, closed
  // it) or the deadline.
  for (bool open = true; open;) {
    pollfd readable{.fd = fds[0], .events = POLLIN, .revents = 0};
    const int ready = ::poll(&readable, 1, left_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;  // the deadline
    char block[4096];
    const ssize_t n = ::read(fds[0], block, sizeof block);
    if (n < 0 && errno == EINTR) continue;
    open = n > 0;
    const std::size_t keep = std::min<std::size_t>(std::max<ssize_t>(n, 0), kMaxKeptBytes - out.output.size());
    out.output.append(block, keep);
    out.cut = out.cut || keep < static_cast<std::size_t>(std::max<ssize_t>(n, 0));
  }
  ::close(fds[0]);
  // Then wait for it to exit, until the same deadline.
  while (true) {
    const pid_t done = ::waitpid(pid, &out.status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (left_ms() == 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &out.status, 0) < 0 && errno == EINTR) {
      }
      out.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  while (!out.output.empty() && (out.output.back() == '\n' || out.output.back() == ' ')) out.output.pop_back();
  return out;
}

}  // namespace posenc::cli
