// A byte n-gram language model with Witten-Bell interpolation: the floor a
// neural byte model must beat to have learned more context than the last
// few bytes (posenc zoo prints orders 2 to 5 beside its models).
//
// Witten & Bell (1991), in the interpolated form of Chen & Goodman (1998,
// eq. 17), for a context h of k bytes and h' its last k - 1 bytes:
//
//   p_k(w | h) = (c(h w) + T(h) p_{k-1}(w | h')) / (c(h) + T(h))   if c(h) > 0
//   p_k(w | h) = p_{k-1}(w | h')                                   if c(h) = 0
//
// c(h w) the corpus's count of h followed by w, c(h) = sum_w c(h w),
// T(h) the number of distinct bytes that follow h; the recursion ends in the
// uniform distribution over the 256 bytes (p_{-1}(w) = 1/256), so every byte
// has a probability > 0 after every context. An order-n model reads contexts
// of up to n - 1 bytes; a context the corpus never had (c(h) = 0) backs off
// to the longest of its suffixes that it had.
//
// Counts are kept in sorted tables, one per context length (k <= 7 bytes and
// the next byte packed into 64 bits), so fitting is a radix sort of the
// corpus's n-grams (a few MB: well under a second a context length) and a
// lookup is a binary search. Deterministic and single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace posenc {

class ByteNgram {
 public:
  static constexpr int kMaxOrder = 8;  // a context of 7 bytes and the next byte fill a 64-bit key

  // Counts the n-grams of orders 1..order of `corpus`. Throws posenc::Error
  // for order outside [1, kMaxOrder] and an empty corpus.
  ByteNgram(std::span<const std::uint8_t> corpus, int order);

  int Order() const { return order_; }

  // p(next | context) under the model of order `order` (0: Order()), which
  // reads the last order - 1 bytes of `context` (all of it when shorter).
  // Throws posenc::Error for order outside [0, Order()].
  double Probability(std::span<const std::uint8_t> context, std::uint8_t next, int order = 0) const;
  // p(w | context) for every byte w (they sum to 1).
  std::array<double, 256> Distribution(std::span<const std::uint8_t> context, int order = 0) const;

  // -log p (nats) of text[i] given the up to order - 1 bytes before it in
  // `text`, for every i in [first, text.size()). Throws posenc::Error for
  // first outside [0, text.size()] and a bad order.
  std::vector<double> Losses(std::span<const std::uint8_t> text, std::int64_t first, int order = 0) const;

 private:
  // The n-grams whose context has k bytes: keys (context << 8 | next) in
  // ascending order with their counts, and per context its first key, c(h)
  // and T(h) (the keys of one context are adjacent).
  struct Table {
    std::vector<std::uint64_t> keys;
    std::vector<std::int64_t> counts;
    std::vector<std::uint64_t> contexts;
    std::vector<std::int64_t> context_first, context_total, context_types;
  };

  int CheckedOrder(int order) const;
  // The context's row in tables_[k], or -1 when the corpus never had it.
  std::int64_t FindContext(std::size_t k, std::uint64_t context) const;

  int order_ = 0;
  std::vector<Table> tables_;  // [k] for k = 0..order - 1 (k = 0: the empty context, the unigram counts)
};

}  // namespace posenc
