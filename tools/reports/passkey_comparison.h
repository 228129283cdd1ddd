// Methods compared on the same independent passkey trials: the rule of
// docs/results/README.md ("Statistics") for paired trials. Two methods are
// paired by trial (the same length and trial index: the same filler, key
// and depth, checked by the prompt's digest); McNemar's exact test on the
// trials only one of them found (rate_interval.h) says whether one beats
// the other (p < 0.05) or the two are within noise, with no order drawn
// between methods within noise of each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/rate_interval.h"
#include "reports/passkey_report.h"

namespace posenc::cli {

inline constexpr double kPasskeyAlpha = 0.05;  // "A beats B" only where p < this

// Two methods on the trials both ran.
struct PasskeyPair {
  std::string a, b;  // as asked, a before b in the report's order
  std::int64_t trials = 0, found_a = 0, found_b = 0;
  McNemarTest test;  // only_a: trials only a found; only_b: only b

  bool BeyondNoise() const { return test.p_value < kPasskeyAlpha; }
  // The one that beats the other, or "" within noise.
  std::string Winner() const;
};

// The methods at one length: each distinct computation once (a method that
// is another's computation here, such as one that is the model's own RoPE,
// shares that method's trials and is named in `same_trials`).
struct PasskeyLengthComparison {
  std::int64_t length = 0;
  std::vector<std::string> methods;                              // distinct, in the order asked
  std::vector<std::pair<std::string, std::string>> same_trials;  // (method, the method whose trials it is)
  // The method with the most trials found (the first so in the order asked);
  // a description, not a verdict: the verdicts are the pairs'.
  std::string most_found;
  std::vector<PasskeyPair> pairs;  // every pair of `methods`
};

// Per length, in ascending order, for a report of the independent design.
// Throws posenc::Error naming the length, the trial and the methods when a
// trial's key, depth or prompt differs between two methods (not paired).
std::vector<PasskeyLengthComparison> ComparePasskeyMethods(const PasskeyReport& report);

}  // namespace posenc::cli
