// The best variant and those within noise of it (include/posenc/paired_comparison.h).
#include "posenc/paired_comparison.h"

#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "compare";

std::optional<double> Mean(const UnitValues& values) {
  double sum = 0.0;
  int count = 0;
  for (const std::optional<double>& v : values) {
    if (!v) continue;
    sum += *v;
    ++count;
  }
  if (count == 0) return std::nullopt;
  return sum / count;
}

}  // namespace

std::vector<std::size_t> BestWithinNoise::WithinNoise() const {
  std::vector<std::size_t> out;
  for (const VariantComparison& c : others) {
    if (c.within_noise) out.push_back(c.variant);
  }
  return out;
}

BestWithinNoise FindBestWithinNoise(std::span<const UnitValues> variants, const PairedComparisonOptions& options) {
  std::optional<std::size_t> best;
  std::optional<double> best_mean;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    Require(variants[v].size() == variants[0].size(), kOp, "variants[" + std::to_string(v) + "].size()",
            static_cast<std::int64_t>(variants[v].size()),
            "must be the number of units of variants[0] (" + std::to_string(variants[0].size()) +
                "): the units are paired");
    const std::optional<double> mean = Mean(variants[v]);
    if (!mean) continue;
    if (!best || (options.higher_is_better ? *mean > *best_mean : *mean < *best_mean)) {
      best = v;
      best_mean = mean;
    }
  }
  Require(best.has_value(), kOp, "variants", Verbatim{"(no values)"}, "must hold at least one variant's value");
  BestWithinNoise out{.best = *best, .best_mean = *best_mean};
  const UnitValues& top = variants[*best];
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (v == *best || !Mean(variants[v])) continue;
    std::vector<double> a, b;  // best, other: on the units both ran
    for (std::size_t u = 0; u < top.size(); ++u) {
      if (!top[u] || !variants[v][u]) continue;
      a.push_back(options.higher_is_better ? *top[u] : *variants[v][u]);
      b.push_back(options.higher_is_better ? *variants[v][u] : *top[u]);
    }
    VariantComparison c{.variant = v};
    if (!a.empty()) {
      c.difference = options.range ? BoundedPairedDifferenceInterval(a, b, *options.range, options.level)
                                   : PairedDifferenceInterval(a, b, options.level);
      c.within_noise = !c.difference->ExcludesZero();
    }
    out.others.push_back(c);
  }
  return out;
}

}  // namespace posenc
