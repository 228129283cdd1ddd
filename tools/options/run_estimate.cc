#include "options/run_estimate.h"

#include <cstdio>

#include "machine_limits.h"

namespace posenc::cli {

RunEstimate EstimateRun(double flops) {
  const bench::FmaPeak peak = bench::MeasureFmaPeak(1);
  return {.flops = flops, .seconds = flops / (kSustainedShareOfPeak * peak.gflops * 1e9), .peak_gflops = peak.gflops};
}

std::string DescribeRunEstimate(const RunEstimate& e) {
  char text[160];
  std::snprintf(text, sizeof text,
                "%.3g TFLOP: about %.0f s (%.1f min) at %.1f of this machine's FMA peak of %.0f GFLOP/s",
                e.flops / 1e12, e.seconds, e.seconds / 60, kSustainedShareOfPeak, e.peak_gflops);
  return text;
}

}  // namespace posenc::cli
