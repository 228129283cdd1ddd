#include "grid/child_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <system_error>

namespace posenc::cli {
namespace {

// The self-pipe and the stop signal: process-wide, as signal handlers are.
int g_pipe[2] = {-1, -1};
volatile std::sig_atomic_t g_stop_signal = 0;

void OnSignal(int signal) {
  if (signal != SIGCHLD && g_stop_signal == 0) g_stop_signal = signal;
  const int saved = errno;  // write(2) is async-signal-safe; errno is the interrupted code's
  const char byte = 0;
  [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &byte, 1);  // full pipe: a wake-up is pending anyway
  errno = saved;
}

}  // namespace

ChildWatch::ChildWatch() {
  if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    sigaction(kSignals[i], nullptr, &previous_[i]);
    if (kSignals[i] != SIGCHLD && previous_[i].sa_handler == SIG_IGN) continue;
    installed_[i] = sigaction(kSignals[i], &action, nullptr) == 0;
  }
}

ChildWatch::~ChildWatch() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    if (installed_[i]) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  ::close(g_pipe[0]);
  ::close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

void ChildWatch::Wait() const {
  pollfd readable{.fd = g_pipe[0], .events = POLLIN, .revents = 0};
  while (::poll(&readable, 1, -1) < 0 && errno == EINTR) {
  }
  char drained[64];
  while (::read(g_pipe[0], drained, sizeof drained) > 0) {
  }
}

int ChildWatch::StopSignal() const { return g_stop_signal; }

void ChildWatch::DieOf(int signal) {
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(signal);
  std::_Exit(128 + signal);  // not reached: the signal's default action ends the process
}

}  // namespace posenc::cli
