// How long a model's forward passes will take on this machine, said before
// a long run starts (`posenc ppl`, `posenc study`), so that a run of hours
// is no surprise.
#pragma once

#include <string>

namespace posenc::cli {

// What the model sustains of the FMA peak in a prefill (`posenc bench model`
// and the study measured 0.68-0.73 on AVX2): the estimate's rate.
inline constexpr double kSustainedShareOfPeak = 0.7;

struct RunEstimate {
  double flops = 0;
  double seconds = 0;      // flops at kSustainedShareOfPeak of the peak
  double peak_gflops = 0;  // this machine's fp32 FMA peak, all threads, measured now
};

// Measures the FMA peak (a fraction of a second) and divides.
RunEstimate EstimateRun(double flops);

// "1.23 TFLOP: about 216 s (3.6 min) at 0.7 of this machine's FMA peak of
// 310 GFLOP/s"
std::string DescribeRunEstimate(const RunEstimate& estimate);

}  // namespace posenc::cli
