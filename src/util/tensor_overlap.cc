#include "util/tensor_overlap.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

// Past this many search steps the answer is kUnknown. Common layouts
// (contiguous tensors, slices of one fused projection, transposed views)
// take a few dozen: axes of equal stride are merged first.
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 20;

// A variable x in [0, bound] with its weight (> 0) in the sum.
struct Term {
  std::uint64_t weight;
  std::uint64_t bound;
};

// Whether some x gives sum_k weight_k x_k == target, other than `forbidden`
// (the terms' values, in order; empty: none forbidden). Depth first over the
// terms, largest weight first: at each, only the x that leave a remainder the
// smaller terms can still reach are tried.
class BoundedSum {
 public:
  BoundedSum(std::vector<Term> terms, std::vector<std::uint64_t> forbidden)
      : terms_(std::move(terms)), forbidden_(std::move(forbidden)), x_(terms_.size()), reach_(terms_.size() + 1, 0) {
    std::vector<std::size_t> order(terms_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return terms_[a].weight > terms_[b].weight; });
    std::vector<Term> sorted;
    std::vector<std::uint64_t> sorted_forbidden;
    for (const std::size_t k : order) {
      sorted.push_back(terms_[k]);
      if (!forbidden_.empty()) sorted_forbidden.push_back(forbidden_[k]);
    }
    terms_ = std::move(sorted);
    forbidden_ = std::move(sorted_forbidden);
    for (std::size_t k = terms_.size(); k-- > 0;) reach_[k] = reach_[k + 1] + terms_[k].weight * terms_[k].bound;
  }

  Overlap Find(std::uint64_t target) {
    if (target > reach_[0]) return Overlap::kNone;
    if (Visit(0, target)) return Overlap::kShared;
    return gave_up_ ? Overlap::kUnknown : Overlap::kNone;
  }

 private:
  bool Visit(std::size_t k, std::uint64_t remaining) {
    if (++steps_ > kMaxSteps) {
      gave_up_ = true;
      return false;
    }
    if (k == terms_.size()) return remaining == 0 && (forbidden_.empty() || x_ != forbidden_);
    const Term& t = terms_[k];
    const std::uint64_t rest = reach_[k + 1];  // the most the later terms add
    const std::uint64_t short_by = remaining > rest ? remaining - rest : 0;
    const std::uint64_t low = short_by / t.weight + (short_by % t.weight != 0 ? 1 : 0);
    const std::uint64_t high = std::min(t.bound, remaining / t.weight);
    for (std::uint64_t x = low; x <= high; ++x) {
      x_[k] = x;
      if (Visit(k + 1, remaining - x * t.weight)) return true;
      if (gave_up_) return false;
    }
    return false;
  }

  std::vector<Term> terms_;
  std::vector<std::uint64_t> forbidden_, x_;
  std::vector<std::uint64_t> reach_;  // reach_[k]: the largest sum of terms k..end
  std::int64_t steps_ = 0;
  bool gave_up_ = false;
};

// A view's elements in bytes: element (i_0..i_3) starts at
// low + sum_d i'_d weight_d, with every stride made positive (i'_d counted
// from the end along a negative stride), over the axes of more than one
// element.
struct Layout {
  std::uintptr_t low = 0;
  std::uint64_t span = 0;  // from low to the start of the highest element
  std::uint64_t item = 0;  // bytes of an element
  std::vector<Term> axes;  // weight |stride| bytes (0 for a repeated element), bound count - 1
};

std::optional<Layout> LayoutOf(const ConstTensorView& view) {
  for (const std::int64_t n : view.shape) {
    if (n <= 0) return std::nullopt;  // no element
  }
  Layout layout;
  layout.item = DTypeSize(view.dtype);
  std::uintptr_t low = reinterpret_cast<std::uintptr_t>(view.data);
  for (std::size_t d = 0; d < 4; ++d) {
    if (view.shape[d] == 1) continue;
    const std::int64_t stride = view.strides[d] * static_cast<std::int64_t>(layout.item);
    const auto weight = static_cast<std::uint64_t>(stride < 0 ? -stride : stride);
    const auto bound = static_cast<std::uint64_t>(view.shape[d] - 1);
    if (stride < 0) low -= weight * bound;
    layout.span += weight * bound;
    layout.axes.push_back({weight, bound});
  }
  layout.low = low;
  return layout;
}

// Terms of equal weight merged into one (their sum is what the equation
// sees), zero weights dropped: one fused tensor's slices share their
// strides, and merged they leave the search a couple of choices per axis.
std::vector<Term> Merged(const std::vector<Term>& terms) {
  std::vector<Term> merged;
  for (const Term& t : terms) {
    if (t.weight == 0 || t.bound == 0) continue;
    const auto same = std::find_if(merged.begin(), merged.end(), [&](const Term& m) { return m.weight == t.weight; });
    if (same != merged.end()) {
      same->bound += t.bound;
    } else {
      merged.push_back(t);
    }
  }
  return merged;
}

std::string LayoutText(const ConstTensorView& view) {
  std::string text = "shape [";
  for (std::size_t d = 0; d < 4; ++d) text += (d ? ", " : "") + std::to_string(view.shape[d]);
  text += "], strides [";
  for (std::size_t d = 0; d < 4; ++d) text += (d ? ", " : "") + std::to_string(view.strides[d]);
  return text + "]";
}

}  // namespace

Overlap SharedMemory(const ConstTensorView& a, const ConstTensorView& b) {
  const std::optional<Layout> la = LayoutOf(a), lb = LayoutOf(b);
  if (!la || !lb) return Overlap::kNone;
  if (la->low + la->span + la->item <= lb->low || lb->low + lb->span + lb->item <= la->low) return Overlap::kNone;
  // A byte in both: low_a + sum i a + e_a = low_b + sum j b + e_b, e in
  // [0, item). With j' = (count - 1) - j and e_b' = item_b - 1 - e_b, every
  // unknown is >= 0 and on the left: sum i a + e_a + sum j' b + e_b' =
  // low_b - low_a + span_b + item_b - 1 (>= 0: the ranges meet).
  std::vector<Term> terms = la->axes;
  terms.insert(terms.end(), lb->axes.begin(), lb->axes.end());
  terms.push_back({1, la->item - 1});
  terms.push_back({1, lb->item - 1});
  const std::uint64_t target = lb->low + lb->span + lb->item - 1 - la->low;
  return BoundedSum(Merged(terms), {}).Find(target);
}

Overlap InternalOverlap(const ConstTensorView& view) {
  const std::optional<Layout> layout = LayoutOf(view);
  if (!layout) return Overlap::kNone;
  std::vector<Term> axes = layout->axes;
  for (const Term& t : axes) {
    if (t.weight == 0) return Overlap::kShared;  // one element at every index of the axis
  }
  // Each stride past the whole extent of the smaller ones: no two elements
  // meet (every dense or sliced layout).
  std::sort(axes.begin(), axes.end(), [](const Term& x, const Term& y) { return x.weight < y.weight; });
  std::uint64_t extent = layout->item;
  bool nested = true;
  for (const Term& t : axes) {
    nested = nested && t.weight >= extent;
    extent += t.weight * t.bound;
  }
  if (nested) return Overlap::kNone;
  // Otherwise: index differences c_d in [-bound, bound], not all 0, with
  // sum c_d weight_d = t in [0, item) (a byte of one element inside
  // another; -c gives the negative side). With x_d = c_d + bound_d and
  // e = item - 1 - t, every unknown is >= 0: sum x_d weight_d + e =
  // sum bound_d weight_d + item - 1, and c = 0 (x_d = bound_d, e = item - 1)
  // is the one solution excluded.
  std::vector<Term> terms;
  std::vector<std::uint64_t> center;
  std::uint64_t target = layout->item - 1;
  for (const Term& t : axes) {
    terms.push_back({t.weight, 2 * t.bound});
    center.push_back(t.bound);
    target += t.weight * t.bound;
  }
  terms.push_back({1, layout->item - 1});
  center.push_back(layout->item - 1);
  return BoundedSum(std::move(terms), std::move(center)).Find(target);
}

void RequireSeparateOutput(std::string_view op, std::string_view out_name, const ConstTensorView& in,
                           const ConstTensorView& out) {
  const Overlap self = InternalOverlap(out);
  if (self != Overlap::kNone) {
    ThrowError(op, out_name, LayoutText(out),
               self == Overlap::kShared
                   ? "has elements in the same memory (an expanded or overlapping view), each of which would be "
                     "written more than once; write into a copy"
                   : "could not be shown to keep each element in its own memory (the search gave up); write into a "
                     "contiguous copy");
  }
  if (in.data == out.data && in.shape == out.shape && in.strides == out.strides) return;  // in place
  const Overlap shared = SharedMemory(in, out);
  Require(shared == Overlap::kNone, op, out_name,
          Verbatim{shared == Overlap::kShared ? "overlaps its input" : "may overlap its input"},
          "an output is either the input itself (in place) or separate memory");
}

}  // namespace posenc
