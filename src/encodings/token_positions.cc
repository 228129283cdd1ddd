#include "posenc/token_positions.h"

#include <algorithm>
#include <string>

#include "posenc/error.h"
#include "posenc/input_file.h"

namespace posenc {
namespace {

// a * b as a message prints it; one beyond int64 is written as the factors.
std::string ProductText(std::int64_t a, std::int64_t b) {
  const std::int64_t product = CheckedProduct({a, b});
  return product >= 0 ? std::to_string(product) : std::to_string(a) + " * " + std::to_string(b) + " (beyond int64)";
}

}  // namespace

TokenPositions TokenPositions::Offset(std::int64_t start) {
  TokenPositions p;
  p.start_ = start;
  return p;
}

TokenPositions TokenPositions::Offsets(std::vector<std::int64_t> offsets) {
  TokenPositions p;
  p.offsets_ = std::move(offsets);
  return p;
}

TokenPositions TokenPositions::Ids(std::vector<std::int64_t> ids) {
  TokenPositions p;
  p.ids_ = std::move(ids);
  return p;
}

void TokenPositions::Validate(std::string_view op, std::int64_t batch, std::int64_t seq) const {
  // The last token of a row sits at first + seq - 1.
  const std::int64_t last_first = kMaxPosition - std::max<std::int64_t>(seq - 1, 0);
  // Names and rules are built only for a check that fails (Require's lazy
  // form): every RoPE call of a decode step checks its positions.
  const auto check = [&](std::int64_t first, const auto& name, std::int64_t last) {
    Require(first >= 0, op, name, first, "must not be negative");
    Require(first <= last, op, name, first, [&] {
      return "must be <= " + std::to_string(last) + " so that every position up to it + seq - 1 is <= 2^53 " +
             "(exact in float64)";
    });
  };
  if (!ids_.empty()) {
    Require(static_cast<std::int64_t>(ids_.size()) == CheckedProduct({batch, seq}), op, "position_ids.size()",
            ids_.size(), [&] { return "must equal batch * seq = " + ProductText(batch, seq); });
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      check(
          ids_[i], [&] { return "position_ids[" + std::to_string(i) + "]"; }, kMaxPosition);
    }
  } else if (!offsets_.empty()) {
    Require(static_cast<std::int64_t>(offsets_.size()) == batch, op, "offsets.size()", offsets_.size(),
            [&] { return "must equal batch = " + std::to_string(batch) + " (one per sequence)"; });
    for (std::size_t b = 0; b < offsets_.size(); ++b) {
      check(
          offsets_[b], [&] { return "offsets[" + std::to_string(b) + "]"; }, last_first);
    }
  } else {
    check(start_, "offset", last_first);
  }
}

std::int64_t TokenPositions::Length(std::int64_t batch, std::int64_t seq) const {
  if (batch == 0 || seq == 0) return 0;
  if (!ids_.empty()) return *std::max_element(ids_.begin(), ids_.end()) + 1;
  if (!offsets_.empty()) return *std::max_element(offsets_.begin(), offsets_.end()) + seq;
  return start_ + seq;
}

std::vector<std::int64_t> PositionIdsFromMask(std::span<const std::uint8_t> mask, std::int64_t batch, std::int64_t seq,
                                              std::int64_t pad_position) {
  Require(batch >= 0, "positions", "batch", batch, "must not be negative");
  Require(seq >= 0, "positions", "seq", seq, "must not be negative");
  Require(static_cast<std::int64_t>(mask.size()) == CheckedProduct({batch, seq}), "positions", "mask.size()",
          mask.size(), "must equal batch * seq = " + ProductText(batch, seq));
  Require(pad_position >= 0, "positions", "pad_position", pad_position, "must not be negative");
  std::vector<std::int64_t> ids(mask.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t real = 0;
    for (std::int64_t s = 0; s < seq; ++s) {
      const std::size_t i = static_cast<std::size_t>(b * seq + s);
      Require(mask[i] <= 1, "positions", "mask[" + std::to_string(i) + "]", int{mask[i]},
              "must be 0 (padding) or 1 (token)");
      ids[i] = mask[i] ? real++ : pad_position;
    }
  }
  return ids;
}

}  // namespace posenc
