#include "posenc/alibi.h"

#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/token_positions.h"

namespace posenc {
namespace {
constexpr const char* kOp = "alibi";
}  // namespace

std::string_view AlibiFormName(AlibiForm form) { return form == AlibiForm::kDistance ? "distance" : "key-position"; }

AlibiForm ParseAlibiForm(std::string_view name) {
  if (name == "distance") return AlibiForm::kDistance;
  if (name == "key-position") return AlibiForm::kKeyPosition;
  ThrowError(kOp, "form", FormatValue(name), "must be \"distance\" or \"key-position\"");
}

void AlibiSpec::Validate() const {
  Require(heads > 0, kOp, "heads", heads, "must be > 0");
  Require(heads <= (std::int64_t{1} << 20), kOp, "heads", heads, "must be <= 1048576");
  Require(std::isfinite(max_bias) && max_bias > 0, kOp, "max_bias", max_bias, "must be a finite number > 0");
  Require(form == AlibiForm::kDistance || form == AlibiForm::kKeyPosition, kOp, "form", static_cast<int>(form),
          "must be kDistance or kKeyPosition");
}

std::vector<double> AlibiSlopes(const AlibiSpec& spec) {
  spec.Validate();
  std::int64_t m = 1;  // the largest power of two <= heads
  while (m * 2 <= spec.heads) m *= 2;
  std::vector<double> slopes;
  slopes.reserve(static_cast<std::size_t>(spec.heads));
  // 2^(-max_bias * k / m) by exp2 of the exact exponent: for max_bias = 8 and
  // m = 8 these are exactly 1/2, 1/4, ... (exact powers of two).
  for (std::int64_t h = 1; h <= m; ++h) slopes.push_back(std::exp2(-spec.max_bias * h / m));
  // The 2m series' odd powers, interleaving between the first series' values.
  for (std::int64_t k = 1; static_cast<std::int64_t>(slopes.size()) < spec.heads; k += 2) {
    slopes.push_back(std::exp2(-spec.max_bias * k / (2 * m)));
  }
  return slopes;
}

std::vector<double> AlibiSlopes(const AlibiSpec& spec, std::int64_t head_begin, std::int64_t head_count) {
  const std::vector<double> all = AlibiSlopes(spec);
  Require(head_begin >= 0 && head_begin <= spec.heads, kOp, "head_begin", head_begin,
          "must be in [0, heads = " + std::to_string(spec.heads) + "]");
  Require(head_count >= 0 && head_count <= spec.heads - head_begin, kOp, "head_count", head_count,
          "must be in [0, heads - head_begin = " + std::to_string(spec.heads - head_begin) + "]");
  return std::vector<double>(all.begin() + head_begin, all.begin() + head_begin + head_count);
}

std::vector<double> AlibiBias(const AlibiSpec& spec, std::int64_t q_len, std::int64_t k_len,
                              std::int64_t query_offset) {
  const std::vector<double> slopes = AlibiSlopes(spec);
  Require(q_len >= 0, kOp, "q_len", q_len, "must not be negative");
  Require(k_len >= 0, kOp, "k_len", k_len, "must not be negative");
  Require(query_offset >= 0, kOp, "query_offset", query_offset, "must not be negative");
  std::vector<double> bias(BufferElements(kOp, "q_len", q_len, "the [heads, q_len, k_len] bias",
                                          {spec.heads, q_len, k_len}, sizeof(double)));
  std::size_t at = 0;
  for (std::int64_t h = 0; h < spec.heads; ++h) {
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t qpos = query_offset + i;
      for (std::int64_t j = 0; j < k_len; ++j) {
        bias[at++] = AlibiBiasAt(spec.form, slopes[h], qpos, j);
      }
    }
  }
  return bias;
}

std::vector<double> AlibiKeyBiasFromMask(const AlibiSpec& spec, std::span<const std::uint8_t> mask, std::int64_t batch,
                                         std::int64_t k_len) {
  const std::vector<double> slopes = AlibiSlopes(spec);
  const std::vector<std::int64_t> positions = PositionIdsFromMask(mask, batch, k_len, 0);
  std::vector<double> bias(BufferElements(kOp, "k_len", k_len, "the [batch, heads, k_len] bias",
                                          {batch, spec.heads, k_len}, sizeof(double)));
  std::size_t at = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < spec.heads; ++h) {
      for (std::int64_t j = 0; j < k_len; ++j) {
        bias[at++] = AlibiBiasAt(AlibiForm::kKeyPosition, slopes[h], 0, positions[b * k_len + j]);
      }
    }
  }
  return bias;
}

}  // namespace posenc
