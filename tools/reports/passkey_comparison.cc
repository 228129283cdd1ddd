#include "reports/passkey_comparison.h"

#include <algorithm>
#include <map>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "passkey";

// What a method computes at a length: methods with the same text share cells.
std::string Computation(const PasskeyCell& c) { return c.same_as_none ? "none" : c.resolved; }

using TrialCells = std::map<std::int64_t, const PasskeyCell*>;  // by trial index

PasskeyPair Compare(const std::string& a, const TrialCells& at_a, const std::string& b, const TrialCells& at_b) {
  PasskeyPair pair{.a = a, .b = b};
  std::int64_t only_a = 0, only_b = 0;
  for (const auto& [trial, x] : at_a) {
    const auto it = at_b.find(trial);
    if (it == at_b.end()) continue;  // a grid merged before every cell finished
    const PasskeyCell& y = *it->second;
    if (x->key != y.key || x->depth != y.depth || x->prompt_sha256 != y.prompt_sha256) {
      ThrowError(kOp, "trial", std::to_string(trial),
                 "at length " + std::to_string(x->length) + " is another prompt for " + a + " than for " + b +
                     " (key " + x->key + " / " + y.key + "): the trials are not paired");
    }
    ++pair.trials;
    pair.found_a += x->found;
    pair.found_b += y.found;
    only_a += x->found && !y.found;
    only_b += y.found && !x->found;
  }
  pair.test = McNemarExactTest(only_a, only_b);
  return pair;
}

}  // namespace

std::string PasskeyPair::Winner() const {
  if (!BeyondNoise()) return "";
  return test.only_a > test.only_b ? a : b;
}

std::vector<PasskeyLengthComparison> ComparePasskeyMethods(const PasskeyReport& report) {
  std::vector<PasskeyLengthComparison> out;
  for (const std::int64_t length : report.lengths) {
    PasskeyLengthComparison at{.length = length};
    std::map<std::string, TrialCells> trials;  // by method
    std::map<std::string, std::string> first;  // computation -> the first method asking for it
    for (const std::string& method : report.methods) {
      for (const PasskeyCell& c : report.cells) {
        if (c.method == method && c.length == length) trials[method][c.trial] = &c;
      }
      if (trials[method].empty()) continue;  // no trial of it finished yet
      const std::string computation = Computation(*trials[method].begin()->second);
      const auto [it, added] = first.try_emplace(computation, method);
      if (added) {
        at.methods.push_back(method);
      } else {
        at.same_trials.emplace_back(method, it->second);
      }
    }
    if (at.methods.empty()) continue;  // no trial of this length finished yet
    double best = -1;
    for (const std::string& method : at.methods) {
      std::int64_t found = 0;
      for (const auto& [trial, c] : trials[method]) found += c->found;
      const double rate = static_cast<double>(found) / static_cast<double>(trials[method].size());
      if (rate > best) best = rate, at.most_found = method;
    }
    for (std::size_t i = 0; i < at.methods.size(); ++i) {
      for (std::size_t j = i + 1; j < at.methods.size(); ++j) {
        const std::string &a = at.methods[i], &b = at.methods[j];
        at.pairs.push_back(Compare(a, trials[a], b, trials[b]));
      }
    }
    out.push_back(std::move(at));
  }
  return out;
}

}  // namespace posenc::cli
