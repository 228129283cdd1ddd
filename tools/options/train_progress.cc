#include "options/train_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace posenc::cli {

TrainProgress::TrainProgress(std::string label)
    : label_(std::move(label)), terminal_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void TrainProgress::Update(const TinyLmTrainProgress& progress) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!terminal_) {
    if (progress.step < next_log_step_ && progress.step != progress.steps) return;
    next_log_step_ = progress.step + std::max<std::int64_t>(1, progress.steps / 10);
    std::fprintf(stderr, "%s: step %lld/%lld, loss %.4f, %.0f tok/s, %.1f s\n", label_.c_str(),
                 static_cast<long long>(progress.step), static_cast<long long>(progress.steps), progress.loss,
                 progress.tokens_per_s, seconds);
    std::fflush(stderr);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (progress.step != progress.steps && std::chrono::duration<double>(now - last_draw_).count() < 0.2) return;
  last_draw_ = now;
  Draw(progress);
}

void TrainProgress::Draw(const TinyLmTrainProgress& progress) {
  constexpr int kWidth = 30;
  const double fraction = std::clamp(
      static_cast<double>(progress.step) / static_cast<double>(std::max<std::int64_t>(progress.steps, 1)), 0.0, 1.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double left = fraction > 0 ? seconds * (1 - fraction) / fraction : 0;
  std::string bar(static_cast<std::size_t>(fraction * kWidth), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %3.0f%% step %lld/%lld, loss %.4f, %.0f tok/s, %.0f s left\033[K", label_.c_str(),
               bar.c_str(), 100 * fraction, static_cast<long long>(progress.step),
               static_cast<long long>(progress.steps), progress.loss, progress.tokens_per_s, left);
  std::fflush(stderr);
  drawn_ = true;
}

void TrainProgress::Finish() {
  if (terminal_ && drawn_) std::fputc('\n', stderr);
  drawn_ = false;  // a second Finish adds no empty line
}

}  // namespace posenc::cli
