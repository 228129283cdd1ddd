// Witten-Bell byte n-grams (include/posenc/byte_ngram.h): counting by radix
// sort, probabilities by the interpolation's recursion.
#include "posenc/byte_ngram.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "ngram";

// Sorts keys of `bytes` significant bytes, least significant byte first
// (LSD radix: linear in the corpus, where std::sort of a few million keys
// per context length would take seconds).
void RadixSort(std::vector<std::uint64_t>& keys, int bytes) {
  std::vector<std::uint64_t> scratch(keys.size());
  for (int pass = 0; pass < bytes; ++pass) {
    const int shift = 8 * pass;
    std::array<std::size_t, 257> start{};
    for (const std::uint64_t key : keys) ++start[((key >> shift) & 0xff) + 1];
    for (std::size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
    for (const std::uint64_t key : keys) scratch[start[(key >> shift) & 0xff]++] = key;
    keys.swap(scratch);
  }
}

}  // namespace

ByteNgram::ByteNgram(std::span<const std::uint8_t> corpus, int order) : order_(order) {
  Require(order >= 1 && order <= kMaxOrder, kOp, "order", order,
          "must be in [1, " + std::to_string(kMaxOrder) +
              "] (a context of order - 1 bytes and the next byte fill 64 bits)");
  Require(!corpus.empty(), kOp, "corpus", Verbatim{"0 bytes"}, "must not be empty");
  const auto n = static_cast<std::int64_t>(corpus.size());
  tables_.resize(static_cast<std::size_t>(order));
  for (std::int64_t k = 0; k < order; ++k) {
    Table& table = tables_[static_cast<std::size_t>(k)];
    if (n <= k) continue;  // no byte of the corpus has k bytes before it
    // Every byte with k bytes before it, as (those k bytes, the byte).
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(n - k));
    for (std::int64_t i = k; i < n; ++i) {
      std::uint64_t key = 0;
      for (std::int64_t j = i - k; j <= i; ++j) key = key << 8 | corpus[j];
      keys[i - k] = key;
    }
    RadixSort(keys, static_cast<int>(k) + 1);
    for (const std::uint64_t key : keys) {
      if (table.keys.empty() || table.keys.back() != key) {
        const std::uint64_t context = key >> 8;
        if (table.contexts.empty() || table.contexts.back() != context) {
          table.contexts.push_back(context);
          table.context_first.push_back(static_cast<std::int64_t>(table.keys.size()));
          table.context_total.push_back(0);
          table.context_types.push_back(0);
        }
        table.keys.push_back(key);
        table.counts.push_back(0);
        ++table.context_types.back();
      }
      ++table.counts.back();
      ++table.context_total.back();
    }
  }
}

int ByteNgram::CheckedOrder(int order) const {
  Require(order >= 0 && order <= order_, kOp, "order", order,
          "must be in [0, " + std::to_string(order_) + "] (0: the model's own order; at most the order it counted)");
  return order == 0 ? order_ : order;
}

std::int64_t ByteNgram::FindContext(std::size_t k, std::uint64_t context) const {
  const std::vector<std::uint64_t>& contexts = tables_[k].contexts;
  const auto it = std::lower_bound(contexts.begin(), contexts.end(), context);
  return it != contexts.end() && *it == context ? it - contexts.begin() : -1;
}

double ByteNgram::Probability(std::span<const std::uint8_t> context, std::uint8_t next, int order) const {
  const int n = CheckedOrder(order);
  const std::size_t longest = std::min(context.size(), static_cast<std::size_t>(n - 1));
  double p = 1.0 / 256;
  std::uint64_t h = 0;  // the last k bytes of the context
  for (std::size_t k = 0; k <= longest; ++k) {
    if (k > 0) h |= static_cast<std::uint64_t>(context[context.size() - k]) << (8 * (k - 1));
    const std::int64_t row = FindContext(k, h);
    if (row < 0) continue;  // c(h) = 0: p_k = p_{k-1}
    const Table& t = tables_[k];
    const auto first = t.keys.begin() + t.context_first[row];
    const auto last = first + t.context_types[row];
    const auto it = std::lower_bound(first, last, h << 8 | next);
    const double count = it != last && *it == (h << 8 | next) ? static_cast<double>(t.counts[it - t.keys.begin()]) : 0;
    const auto total = static_cast<double>(t.context_total[row]), types = static_cast<double>(t.context_types[row]);
    p = (count + types * p) / (total + types);
  }
  return p;
}

std::array<double, 256> ByteNgram::Distribution(std::span<const std::uint8_t> context, int order) const {
  const int n = CheckedOrder(order);
  const std::size_t longest = std::min(context.size(), static_cast<std::size_t>(n - 1));
  std::array<double, 256> p;
  p.fill(1.0 / 256);
  std::uint64_t h = 0;
  for (std::size_t k = 0; k <= longest; ++k) {
    if (k > 0) h |= static_cast<std::uint64_t>(context[context.size() - k]) << (8 * (k - 1));
    const std::int64_t row = FindContext(k, h);
    if (row < 0) continue;
    const Table& t = tables_[k];
    const auto total = static_cast<double>(t.context_total[row]), types = static_cast<double>(t.context_types[row]);
    for (double& v : p) v = types * v / (total + types);
    for (std::int64_t i = t.context_first[row]; i < t.context_first[row] + t.context_types[row]; ++i) {
      p[t.keys[i] & 0xff] += static_cast<double>(t.counts[i]) / (total + types);
    }
  }
  return p;
}

std::vector<double> ByteNgram::Losses(std::span<const std::uint8_t> text, std::int64_t first, int order) const {
  const int n = CheckedOrder(order);
  const auto size = static_cast<std::int64_t>(text.size());
  Require(first >= 0 && first <= size, kOp, "first", first,
          "must be in [0, " + std::to_string(size) + "] (an index into the text)");
  std::vector<double> losses;
  losses.reserve(static_cast<std::size_t>(size - first));
  for (std::int64_t i = first; i < size; ++i) {
    const std::int64_t begin = std::max<std::int64_t>(0, i - (n - 1));
    losses.push_back(-std::log(Probability(text.subspan(begin, i - begin), text[i], n)));
  }
  return losses;
}

}  // namespace posenc
