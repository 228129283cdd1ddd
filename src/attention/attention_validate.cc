// Argument checks and window conventions for attention.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/attention_rules.h"
#include "attention/lowering/encoding_lowering.h"
#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "attention";

// kv_lengths: empty, or one length in [0, kv_len] per batch row. Checked
// before the default query positions read it.
void ValidateKvLengths(const AttentionInputs& in) {
  const std::int64_t batch = in.q.batch(), kv_len = in.k.seq();
  if (in.kv_lengths.empty()) return;
  Require(static_cast<std::int64_t>(in.kv_lengths.size()) == batch, kOp, "kv_lengths.size()", in.kv_lengths.size(),
          "must equal batch = " + std::to_string(batch));
  for (std::size_t b = 0; b < in.kv_lengths.size(); ++b) {
    Require(in.kv_lengths[b] >= 0 && in.kv_lengths[b] <= kv_len, kOp, "kv_lengths[" + std::to_string(b) + "]",
            in.kv_lengths[b], "must be in [0, kv_len = " + std::to_string(kv_len) + "] (cache overflow)");
  }
}

}  // namespace

void AttentionMask::Validate() const {
  Require(window >= 0, kOp, "mask.window", window, "must be >= 0 (0: no window)");
  Require(sinks >= 0, kOp, "mask.sinks", sinks, "must be >= 0");
  Require(sinks == 0 || window > 0, kOp, "mask.sinks", sinks, "sinks need a window (the Λ mask)");
}

std::int64_t WindowFromFlashAttentionLeft(std::int64_t left) {
  Require(left >= 0, kOp, "window_size.left", left, "must be >= 0 (-1 means no window: use 0)");
  return left + 1;
}
std::int64_t WindowToFlashAttentionLeft(std::int64_t window) {
  Require(window > 0, kOp, "window", window, "must be > 0");
  return window - 1;
}

TokenPositions QueryPositions(const AttentionInputs& in) {
  if (in.q_positions) return *in.q_positions;
  const std::int64_t q_len = in.q.seq(), kv_len = in.k.seq();
  const auto last_of = [&](std::int64_t keys, const std::string& what) {
    Require(keys >= q_len, kOp, "q_len", q_len,
            "exceeds " + what + " = " + std::to_string(keys) +
                ": the default puts the queries at the end of the keys; give the query positions");
    return keys - q_len;
  };
  if (in.kv_lengths.empty()) return TokenPositions::Offset(last_of(kv_len, "kv_len"));
  ValidateKvLengths(in);
  std::vector<std::int64_t> offsets;
  for (std::size_t b = 0; b < in.kv_lengths.size(); ++b) {
    offsets.push_back(last_of(in.kv_lengths[b], "kv_lengths[" + std::to_string(b) + "]"));
  }
  return TokenPositions::Offsets(std::move(offsets));
}

void ValidateAttention(const AttentionInputs& in, const AttentionOptions& options) {
  ValidateView(in.q, kOp, "q");
  ValidateView(in.k, kOp, "k");
  ValidateView(in.v, kOp, "v");
  ValidateView(in.out, kOp, "out");
  const std::int64_t batch = in.q.shape[0], q_len = in.q.shape[1], q_heads = in.q.shape[2], head_dim = in.q.shape[3];
  const auto kv_len = in.k.seq(), kv_heads = in.k.heads();
  Require(head_dim > 0, kOp, "q.head_dim", head_dim, "must be > 0");
  // An empty value row would size the kernel's packed values as 0 bytes.
  Require(in.v.head_dim() > 0, kOp, "v.head_dim", in.v.head_dim(), "must be > 0");
  // The rules with numbers are built only for a check that fails (Require's
  // lazy form): a decode step validates every layer's attention.
  Require(in.k.batch() == batch, kOp, "k.batch", in.k.batch(),
          [&] { return "must equal q.batch = " + std::to_string(batch); });
  Require(in.k.head_dim() == head_dim, kOp, "k.head_dim", in.k.head_dim(),
          [&] { return "must equal q.head_dim = " + std::to_string(head_dim); });
  Require(kv_heads > 0 && q_heads % kv_heads == 0, kOp, "k.heads", kv_heads,
          [&] { return "must divide q.heads = " + std::to_string(q_heads) + " (GQA groups)"; });
  Require(
      in.v.batch() == batch && in.v.seq() == kv_len && in.v.heads() == kv_heads, kOp, "v.shape",
      [&] {
        return Verbatim{std::string("[")
                            .append(std::to_string(in.v.batch()))
                            .append(", ")
                            .append(std::to_string(in.v.seq()))
                            .append(", ")
                            .append(std::to_string(in.v.heads()))
                            .append(", ...]")};
      },
      "must match k's [batch, kv_len, kv_heads]");
  Require(in.out.batch() == batch && in.out.seq() == q_len && in.out.heads() == q_heads &&
              in.out.head_dim() == in.v.head_dim(),
          kOp, "out.shape", Verbatim{"[...]"}, "must be [batch, q_len, q_heads, v_dim]");
  for (const auto* view : {&in.k, &in.v}) {
    Require(view->dtype == in.q.dtype, kOp, "dtype", DTypeName(view->dtype), "q, k and v must share a dtype");
  }
  Require(in.out.dtype == in.q.dtype, kOp, "out.dtype", DTypeName(in.out.dtype), "must equal q's dtype");
  ValidateKvLengths(in);
  QueryPositions(in).Validate(kOp, batch, q_len);
  in.k_positions.Validate(kOp, batch, kv_len);
  options.mask.Validate();
  const detail::EncodingCall call{
      .head_dim = head_dim, .v_dim = in.v.head_dim(), .q_heads = q_heads, .mask = options.mask};
  std::visit([&](const auto& encoding) { detail::ValidateEncoding(encoding, call); }, options.encoding);
  Require(options.logn_train_length >= 0, kOp, "logn_train_length", options.logn_train_length, "must be >= 0 (0: off)");
  Require(options.logn_train_length != 1, kOp, "logn_train_length", 1, "must not be 1 (log base)");
  Require(options.sink_logits.empty() || static_cast<std::int64_t>(options.sink_logits.size()) == q_heads, kOp,
          "sink_logits.size()", options.sink_logits.size(), "must be 0 or q_heads = " + std::to_string(q_heads));
  for (std::size_t h = 0; h < options.sink_logits.size(); ++h) {
    // The kernel holds them as float32: +inf, or a double that rounds to it,
    // would make every row of the head NaN (exp(inf - inf)).
    const double sink = options.sink_logits[h];
    Require(!std::isnan(sink) && sink <= std::numeric_limits<float>::max(), kOp,
            "sink_logits[" + std::to_string(h) + "]", sink,
            "must be a number <= float32's largest (-inf: no sink for that head)");
  }
  Require(options.softcap >= 0 && std::isfinite(options.softcap), kOp, "softcap", options.softcap,
          "must be >= 0 (0: off)");
  if (options.softmax_scale) {
    Require(std::isfinite(*options.softmax_scale), kOp, "softmax_scale", *options.softmax_scale, "must be finite");
  }
}

}  // namespace posenc
