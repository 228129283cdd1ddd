#include "posenc/rope_permute.h"

#include <cstring>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {

void PermuteQkRows(void* weight, std::size_t row_bytes, std::int64_t heads, std::int64_t head_dim,
                   std::int64_t rotary_dim, PermuteDirection direction) {
  Require(heads > 0, "permute", "heads", heads, "must be > 0");
  Require(head_dim > 0, "permute", "head_dim", head_dim, "must be > 0");
  Require(rotary_dim > 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0, "permute", "rotary_dim", rotary_dim,
          "must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  Require(weight != nullptr, "permute", "weight", Verbatim{"null"}, "must point to the rows");
  auto* rows = static_cast<unsigned char*>(weight);
  const std::int64_t pairs = rotary_dim / 2;
  std::vector<unsigned char> head_copy(static_cast<std::size_t>(rotary_dim) * row_bytes);
  for (std::int64_t h = 0; h < heads; ++h) {
    unsigned char* head = rows + static_cast<std::size_t>(h * head_dim) * row_bytes;
    std::memcpy(head_copy.data(), head, head_copy.size());
    for (std::int64_t half = 0; half < 2; ++half) {
      for (std::int64_t k = 0; k < pairs; ++k) {
        const std::int64_t interleaved = 2 * k + half;  // row of pair k, member `half`
        const std::int64_t half_split = half * pairs + k;
        const bool to_half_split = direction == PermuteDirection::kInterleavedToHalfSplit;
        const std::int64_t to = to_half_split ? half_split : interleaved;
        const std::int64_t from = to_half_split ? interleaved : half_split;
        std::memcpy(head + to * row_bytes, head_copy.data() + from * row_bytes, row_bytes);
      }
    }
  }
}

}  // namespace posenc
