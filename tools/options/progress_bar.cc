#include "options/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

double LogInterval() {
  const char* text = std::getenv("POSENC_PROGRESS_SECONDS");
  if (text == nullptr) return kLogInterval;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  Require(*text != '\0' && *end == '\0' && std::isfinite(seconds) && seconds >= 0, "progress",
          "POSENC_PROGRESS_SECONDS", std::string(text), "must be a number of seconds >= 0");
  return seconds;
}

}  // namespace

ProgressBar::ProgressBar(std::string label, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), terminal_(isatty(STDERR_FILENO) != 0),
      log_interval_(LogInterval()), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ProgressBar::Update(std::int64_t done, std::int64_t total) {
  total_ = std::max<std::int64_t>(total, 1);
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since < (terminal_ ? 0.2 : log_interval_)) return;
  last_draw_ = now;
  Draw(done, false);
}

void ProgressBar::Finish() { Draw(total_, true); }

void ProgressBar::Draw(std::int64_t done, bool final) {
  constexpr int kWidth = 30;
  const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  if (!terminal_ && final) {  // a log: the step's last line
    std::fprintf(stderr, "%s: %lld %s, %.0f %s/s, %.1f s\n", label_.c_str(), static_cast<long long>(done),
                 unit_.c_str(), rate, unit_.c_str(), seconds);
    std::fflush(stderr);
    return;
  }
  if (!terminal_) {  // a log, while the step runs
    std::fprintf(stderr, "%s: %lld of %lld %s (%.0f%%), %.0f %s/s, %.1f s; about %.0f s left\n", label_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), unit_.c_str(), 100 * fraction, rate,
                 unit_.c_str(), seconds, eta);
    std::fflush(stderr);
    return;
  }
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %lld/%lld %s, %.0f %s/s, %.0f s%s%s", label_.c_str(), bar.c_str(),
               100 * fraction, static_cast<long long>(done), static_cast<long long>(total_), unit_.c_str(), rate,
               unit_.c_str(), final ? seconds : eta, final ? "" : " left", final ? "\n" : "\033[K");
  std::fflush(stderr);
}

}  // namespace posenc::cli
