#include "attention/decode_keys.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "posenc/error.h"
#include "util/huge_pages.h"

namespace posenc::detail {
namespace {

constexpr const char* kOp = "attention";

// The key rotation of a RoPE-family encoding: what decides a lowered key.
struct KeyRotation {
  std::int64_t head_dim, rotary_dim;
  RopeLayout layout;
  const std::vector<double>* inv_freq;
  bool operator==(const KeyRotation& o) const {
    return head_dim == o.head_dim && rotary_dim == o.rotary_dim && layout == o.layout && *inv_freq == *o.inv_freq;
  }
};
KeyRotation RotationOf(const RopeSpec& spec, const RopeFrequencies& f) {
  return {spec.head_dim, spec.RotaryDim(), spec.layout, &f.inv_freq};
}

bool SameKeyLowering(const PositionEncoding& a, const PositionEncoding& b) {
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<RopeEncoding>(&a)) {
    const auto& y = std::get<RopeEncoding>(b);
    return RotationOf(x->spec, x->frequencies) == RotationOf(y.spec, y.frequencies);
  }
  if (const auto* x = std::get_if<ReRopeEncoding>(&a)) {
    const auto& y = std::get<ReRopeEncoding>(b);
    return RotationOf(x->spec, x->frequencies) == RotationOf(y.spec, y.frequencies) && x->window == y.window &&
           x->leak == y.leak;
  }
  if (const auto* x = std::get_if<SelfExtendEncoding>(&a)) {
    const auto& y = std::get<SelfExtendEncoding>(b);
    return RotationOf(x->spec, x->frequencies) == RotationOf(y.spec, y.frequencies) && x->group == y.group &&
           x->window == y.window;
  }
  return std::holds_alternative<NoPositionEncoding>(a);
}

hwy::AlignedFreeUniquePtr<float[]> Zeros(std::int64_t count) {
  auto data = hwy::AllocateAligned<float>(static_cast<std::size_t>(std::max<std::int64_t>(1, count)));
  Require(data != nullptr, kOp, "decode cache floats", count, "allocation failed");
  AdviseHugePages(data.get(), static_cast<std::size_t>(count) * sizeof(float));
  std::fill_n(data.get(), std::max<std::int64_t>(1, count), 0.0f);
  return data;
}

}  // namespace

bool DecodeKeys::Supports(const AttentionOptions& options) {
  return std::holds_alternative<NoPositionEncoding>(options.encoding) ||
         std::holds_alternative<RopeEncoding>(options.encoding) ||
         std::holds_alternative<ReRopeEncoding>(options.encoding) ||
         std::holds_alternative<SelfExtendEncoding>(options.encoding);
}

bool DecodeKeys::LoweredAs(const AttentionOptions& options, std::int64_t kv_heads, std::int64_t head_dim,
                           std::int64_t v_dim) const {
  return kv_heads == kv_heads_ && head_dim == head_dim_ && v_dim == v_dim_ &&
         SameKeyLowering(options.encoding, encoding_);
}

void DecodeKeys::Reset(const AttentionOptions& options, std::int64_t kv_heads, std::int64_t head_dim,
                       std::int64_t v_dim, std::int64_t first) {
  Require(first >= 0 && first % kChunk == 0, kOp, "decode keys first", first, "must be a multiple of 16 >= 0");
  encoding_ = options.encoding;
  kv_heads_ = kv_heads;
  head_dim_ = head_dim;
  v_dim_ = v_dim;
  value_cols_ = (v_dim + kChunk - 1) / kChunk * kChunk;
  two_keys_ = std::holds_alternative<ReRopeEncoding>(options.encoding) ||
              std::holds_alternative<SelfExtendEncoding>(options.encoding);
  first_ = first;
  tokens_ = first;
  capacity_ = 0;
  keys1_.reset();
  keys2_.reset();
  values_.reset();
}

// Whole chunks: the keys [0, keys) rounded up to a multiple of kChunk.
std::int64_t DecodeKeys::Chunked(std::int64_t keys) { return (keys + kChunk - 1) / kChunk * kChunk; }

void DecodeKeys::Reserve(std::int64_t keys) {
  if (keys <= capacity_) return;
  // Doubling: appends cost O(1) copies a token on average; a quarter more
  // than asked, so that the decode steps after a prefill do not copy the
  // cache at once.
  Reallocate(std::max(Chunked(keys + keys / 4 + 16 * kChunk), 2 * capacity_), 0);
}

void DecodeKeys::Reallocate(std::int64_t capacity, std::int64_t skip) {
  const std::int64_t moved = Chunked(kept()) - skip;
  const auto copy = [&](hwy::AlignedFreeUniquePtr<float[]>& data, std::int64_t per_key) {
    auto fresh = Zeros(kv_heads_ * capacity * per_key);
    for (std::int64_t h = 0; h < kv_heads_ && data; ++h) {
      std::memcpy(fresh.get() + h * capacity * per_key, data.get() + (h * capacity_ + skip) * per_key,
                  static_cast<std::size_t>(moved * per_key) * sizeof(float));
    }
    data = std::move(fresh);
  };
  copy(keys1_, head_dim_);
  if (two_keys_) copy(keys2_, head_dim_);
  copy(values_, value_cols_);
  capacity_ = capacity;
}

void DecodeKeys::Append(const AttentionPlan& plan) {
  const std::int64_t n = plan.kv_len;
  Reserve(kept() + n);
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t key = kept() + t, chunk = key / kChunk, lane = key % kChunk;
    for (std::int64_t h = 0; h < kv_heads_; ++h) {
      const std::int64_t source = t * kv_heads_ + h;
      for (int which = 0; which < (two_keys_ ? 2 : 1); ++which) {
        const std::vector<float>& k = which == 0 ? plan.k1 : plan.k2;
        float* dst =
            (which == 0 ? keys1_ : keys2_).get() + h * capacity_ * head_dim_ + chunk * head_dim_ * kChunk + lane;
        for (std::int64_t d = 0; d < head_dim_; ++d) dst[d * kChunk] = k[source * head_dim_ + d];
      }
      std::copy_n(plan.v.data() + source * v_dim_, v_dim_, values_.get() + (h * capacity_ + key) * value_cols_);
    }
  }
  tokens_ += n;
}

void DecodeKeys::AppendRaw(const float* k, const float* v, std::int64_t n, const AttentionOptions& options) {
  // The keys as their own queries (one per kv head): only their lowering is
  // kept. Options that speak of query heads do not lower keys.
  AttentionOptions keys_only = options;
  keys_only.sink_logits.clear();
  constexpr std::int64_t kPiece = 256;
  std::vector<float> ignored(static_cast<std::size_t>(std::min(n, kPiece) * kv_heads_ * v_dim_));
  AttentionPlan plan{};
  for (std::int64_t first = 0; first < n; first += kPiece) {
    const std::int64_t count = std::min(kPiece, n - first);
    AttentionInputs piece;
    piece.q =
        ConstTensorView::Contiguous(k + first * kv_heads_ * head_dim_, DType::kF32, {1, count, kv_heads_, head_dim_});
    piece.k = piece.q;
    piece.v = ConstTensorView::Contiguous(v + first * kv_heads_ * v_dim_, DType::kF32, {1, count, kv_heads_, v_dim_});
    piece.out = TensorView::Contiguous(ignored.data(), DType::kF32, {1, count, kv_heads_, v_dim_});
    piece.q_positions = TokenPositions::Offset(tokens_);
    piece.k_positions = TokenPositions::Offset(tokens_);
    PrepareAttentionPlan(piece, keys_only, plan);
    Append(plan);
  }
}

void DecodeKeys::Truncate(std::int64_t tokens) {
  Require(tokens >= first_, kOp, "decode keys truncate", tokens,
          "must be >= the first kept position " + std::to_string(first_));
  tokens_ = std::min(tokens_, tokens);
}

void DecodeKeys::DropFront(std::int64_t position) {
  Require(position >= first_ && position <= tokens_ && position % kChunk == 0, kOp, "decode keys drop front", position,
          "must be a multiple of 16 in [" + std::to_string(first_) + ", " + std::to_string(tokens_) + "]");
  // Chunks of 16 keys stay whole: the remaining chunks (the last one partly
  // filled) and their values move to the front as they are, into smaller
  // buffers when these hold over 4 times what is left (after a prefill).
  const std::int64_t dropped = position - first_, left = tokens_ - position;
  const std::int64_t smaller = Chunked(left + left / 4 + 16 * kChunk);
  if (capacity_ > 4 * smaller) {
    Reallocate(smaller, dropped);
  } else {
    const auto move = [&](hwy::AlignedFreeUniquePtr<float[]>& data, std::int64_t per_key) {
      for (std::int64_t h = 0; h < kv_heads_ && data; ++h) {
        float* head = data.get() + h * capacity_ * per_key;
        std::memmove(head, head + dropped * per_key, static_cast<std::size_t>(Chunked(left) * per_key) * sizeof(float));
      }
    };
    move(keys1_, head_dim_);
    if (two_keys_) move(keys2_, head_dim_);
    move(values_, value_cols_);
  }
  first_ = position;
}

double DecodeKeys::Bytes() const {
  return sizeof(float) * static_cast<double>(kv_heads_ * capacity_) *
         static_cast<double>((two_keys_ ? 2 : 1) * head_dim_ + value_cols_);
}

}  // namespace posenc::detail
