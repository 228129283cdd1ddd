// Per-target tiled attention (compiled once per SIMD target).
//
// Keys are packed per (batch, kv head) into chunks of NR = 2 vectors:
// [chunk][head_dim][NR], so a tile of 6 query rows x NR keys is 12 vector
// accumulators fed by one broadcast per row and two loads per dimension.
// Values are packed [key][v_dim padded to NR]. A work item is 6 rows of
// (token, head in GQA group) against the keys its mask lets it see, in
// blocks of 4 chunks with an online softmax; masked-out blocks are never
// touched. Each output row is reduced by exactly one thread in a fixed
// order, so the result does not depend on the thread count.
#if defined(POSENC_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ATTENTION_INL_H_
#undef POSENC_ATTENTION_INL_H_
#else
#define POSENC_ATTENTION_INL_H_
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "attention/attention_plan.h"
#include "attention/attention_rules.h"
#include "hwy/aligned_allocator.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "posenc/parallel.h"
#include "kernels/simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::int64_t kTileRows = 6;        // query rows per work item
constexpr std::int64_t kChunksPerBlock = 4;  // key chunks per softmax update
constexpr int kSubTiles = 4;                 // tiles per work item sharing each key block

using AlignedFloats = hwy::AlignedFreeUniquePtr<float[]>;

// Broadcast one q value per row and FMA it with the two key vectors.
#define POSENC_TILE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// s[r][0..NR) = sum_d q[r][d] * keys[d][0..NR) for the 6 rows of q (stride dim).
template <class D>
HWY_INLINE void ScoreChunk(D df, const float* HWY_RESTRICT q, std::int64_t dim, const float* HWY_RESTRICT keys,
                           float* HWY_RESTRICT s, std::int64_t s_stride) {
  const size_t n = hn::Lanes(df);
#define POSENC_DECLARE(r) auto lo##r = hn::Zero(df), hi##r = hn::Zero(df);
  POSENC_TILE_ROWS(POSENC_DECLARE)
#undef POSENC_DECLARE
  for (std::int64_t d = 0; d < dim; ++d) {
    const auto k0 = hn::Load(df, keys + d * 2 * n);
    const auto k1 = hn::Load(df, keys + d * 2 * n + n);
#define POSENC_FMA(r)                            \
  {                                              \
    const auto qv = hn::Set(df, q[(r)*dim + d]); \
    lo##r = hn::MulAdd(qv, k0, lo##r);           \
    hi##r = hn::MulAdd(qv, k1, hi##r);           \
  }
    POSENC_TILE_ROWS(POSENC_FMA)
#undef POSENC_FMA
  }
#define POSENC_STORE(r)                   \
  hn::Store(lo##r, df, s + (r)*s_stride); \
  hn::Store(hi##r, df, s + (r)*s_stride + n);
  POSENC_TILE_ROWS(POSENC_STORE)
#undef POSENC_STORE
}

// o[r][c] += sum_j p[r][j] * values[j][c] over `keys` keys, all padded columns.
template <class D>
HWY_INLINE void AccumulateValues(D df, const float* HWY_RESTRICT p, std::int64_t p_stride,
                                 const float* HWY_RESTRICT values, std::int64_t keys, std::int64_t columns,
                                 float* HWY_RESTRICT o) {
  const size_t n = hn::Lanes(df);
  for (std::int64_t c = 0; c < columns; c += 2 * static_cast<std::int64_t>(n)) {
#define POSENC_LOAD(r)                            \
  auto lo##r = hn::Load(df, o + (r)*columns + c); \
  auto hi##r = hn::Load(df, o + (r)*columns + c + n);
    POSENC_TILE_ROWS(POSENC_LOAD)
#undef POSENC_LOAD
    for (std::int64_t j = 0; j < keys; ++j) {
      const auto v0 = hn::Load(df, values + j * columns + c);
      const auto v1 = hn::Load(df, values + j * columns + c + n);
#define POSENC_FMA(r)                                 \
  {                                                   \
    const auto pv = hn::Set(df, p[(r)*p_stride + j]); \
    lo##r = hn::MulAdd(pv, v0, lo##r);                \
    hi##r = hn::MulAdd(pv, v1, hi##r);                \
  }
      POSENC_TILE_ROWS(POSENC_FMA)
#undef POSENC_FMA
    }
#define POSENC_STORE(r)                      \
  hn::Store(lo##r, df, o + (r)*columns + c); \
  hn::Store(hi##r, df, o + (r)*columns + c + n);
    POSENC_TILE_ROWS(POSENC_STORE)
#undef POSENC_STORE
  }
}
#undef POSENC_TILE_ROWS

struct PackedKv {
  std::int64_t chunk = 0;       // NR keys per chunk
  std::int64_t chunks = 0;      // per (batch, kv head)
  std::int64_t value_cols = 0;  // v_dim rounded up to NR
  float* keys1 = nullptr;
  float* keys2 = nullptr;  // ReRoPE's far keys, or null
  float* values = nullptr;

  std::int64_t KeyBlockSize(const detail::AttentionPlan& plan) const { return chunks * chunk * plan.head_dim; }
  std::int64_t ValueBlockSize() const { return chunks * chunk * value_cols; }
};

// Packing buffers kept per thread and reused by later calls of the same or
// smaller size: fresh pages cost more to fault in than the packing itself.
struct PackStorage {
  AlignedFloats buffers[3];
  std::int64_t capacity[3] = {0, 0, 0};
  float* Get(int which, std::int64_t size) {
    if (size > capacity[which]) {
      buffers[which] = hwy::AllocateAligned<float>(static_cast<size_t>(size));
      capacity[which] = size;
    }
    return buffers[which].get();
  }
};

// Packs k [b][s][kv_head][dim] into [b][kv_head][chunk][dim][NR] and v into
// [b][kv_head][key][value_cols], writing zeros into the padding (keys past
// kv_len in the last chunk, columns past v_dim).
inline PackedKv PackKv(const detail::AttentionPlan& plan) {
  const hn::ScalableTag<float> df;
  static thread_local PackStorage storage;
  PackedKv packed;
  packed.chunk = 2 * static_cast<std::int64_t>(hn::Lanes(df));
  packed.chunks = (plan.kv_len + packed.chunk - 1) / packed.chunk;
  packed.value_cols = (plan.v_dim + packed.chunk - 1) / packed.chunk * packed.chunk;
  const std::int64_t heads = plan.batch * plan.kv_heads;
  const std::int64_t padded_keys = packed.chunks * packed.chunk;
  packed.keys1 = storage.Get(0, std::max<std::int64_t>(1, heads * packed.KeyBlockSize(plan)));
  if (!plan.k2.empty()) packed.keys2 = storage.Get(1, std::max<std::int64_t>(1, heads * packed.KeyBlockSize(plan)));
  packed.values = storage.Get(2, std::max<std::int64_t>(1, heads * packed.ValueBlockSize()));
  ParallelFor(heads, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t b = bh / plan.kv_heads, h = bh % plan.kv_heads;
      for (std::int64_t s = 0; s < padded_keys; ++s) {
        const bool real = s < plan.kv_len;
        const std::int64_t source = ((b * plan.kv_len + s) * plan.kv_heads + h);
        const std::int64_t chunk = s / packed.chunk, lane = s % packed.chunk;
        for (int which = 0; which < 2; ++which) {
          const std::vector<float>& k = which == 0 ? plan.k1 : plan.k2;
          if (k.empty()) continue;
          float* dst = (which == 0 ? packed.keys1 : packed.keys2) + bh * packed.KeyBlockSize(plan) +
                       chunk * plan.head_dim * packed.chunk + lane;
          for (std::int64_t d = 0; d < plan.head_dim; ++d) {
            dst[d * packed.chunk] = real ? k[source * plan.head_dim + d] : 0.0f;
          }
        }
        float* value_row = packed.values + bh * packed.ValueBlockSize() + s * packed.value_cols;
        if (real) std::copy_n(plan.v.data() + source * plan.v_dim, plan.v_dim, value_row);
        std::fill(value_row + (real ? plan.v_dim : 0), value_row + packed.value_cols, 0.0f);
      }
    }
  });
  return packed;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One tile of 6 query rows: which (token, head) each row is, its position,
// its q rows, and its online-softmax state (running max, sum, output).
struct Tile {
  std::int64_t p[kTileRows], head[kTileRows], token[kTileRows];
  bool valid[kTileRows];
  bool all_valid = false, any_valid = false;
  std::int64_t pmin = 0, pmax = 0;
  float running_max[kTileRows], running_sum[kTileRows];
  // A visible score was NaN (NaN in q, k, a bias slope or weight): the row's
  // output is NaN. Max() and the "nothing visible" path would drop it.
  bool saw_nan[kTileRows];
  float factor[kTileRows];      // the scale folded into each row's q
  AlignedFloats q1, q2, out;    // [6][head_dim] x2, [6][value_cols]
  AlignedFloats value_buckets;  // Shaw value term: [6][2K+1] softmax mass per relative row
};

// Work buffers of one thread: the tiles of a work item and its score blocks.
struct ItemScratch {
  Tile tiles[kSubTiles];
  AlignedFloats scores, scores2;
  ItemScratch(const detail::AttentionPlan& plan, const PackedKv& packed) {
    const auto size = [](std::int64_t n) { return static_cast<size_t>(n); };
    for (Tile& t : tiles) {
      t.q1 = hwy::AllocateAligned<float>(size(kTileRows * plan.head_dim));
      t.q2 = hwy::AllocateAligned<float>(size(kTileRows * plan.head_dim));
      t.out = hwy::AllocateAligned<float>(size(kTileRows * packed.value_cols));
      t.value_buckets = hwy::AllocateAligned<float>(size(kTileRows * std::max<std::int64_t>(plan.shaw_rows, 1)));
    }
    scores = hwy::AllocateAligned<float>(size(kTileRows * kChunksPerBlock * packed.chunk));
    scores2 = hwy::AllocateAligned<float>(size(kTileRows * kChunksPerBlock * packed.chunk));
  }
};

// Fills a tile for rows [row0, row0 + 6) of (token, head in group).
inline void LoadTile(const detail::AttentionPlan& plan, const PackedKv& packed, std::int64_t b, std::int64_t kvh,
                     std::int64_t row0, Tile& t) {
  const std::int64_t rows_total = plan.q_len * plan.group, dim = plan.head_dim;
  t.pmin = std::numeric_limits<std::int64_t>::max();
  t.pmax = std::numeric_limits<std::int64_t>::min();
  t.any_valid = false;
  for (std::int64_t r = 0; r < kTileRows; ++r) {
    const std::int64_t row = row0 + r;
    t.valid[r] = row < rows_total;
    t.token[r] = t.valid[r] ? row / plan.group : 0;
    t.head[r] = kvh * plan.group + (t.valid[r] ? row % plan.group : 0);
    t.p[r] = plan.q_positions[b * plan.q_len + t.token[r]];
    t.factor[r] = plan.q_factor[b * plan.q_len + t.token[r]];
    for (int which = 0; which < 2; ++which) {
      const std::vector<float>& q = which == 0 ? plan.q1 : plan.q2;
      if (q.empty()) continue;
      float* dst = (which == 0 ? t.q1 : t.q2).get() + r * dim;
      if (t.valid[r]) {
        std::copy_n(q.data() + ((b * plan.q_len + t.token[r]) * plan.q_heads + t.head[r]) * dim, dim, dst);
      } else {
        std::fill_n(dst, dim, 0.0f);
      }
    }
    if (t.valid[r]) {
      t.any_valid = true;
      t.pmin = std::min(t.pmin, t.p[r]);
      t.pmax = std::max(t.pmax, t.p[r]);
    }
  }
  t.all_valid = row0 + kTileRows <= rows_total;
  std::fill_n(t.running_max, kTileRows, kNegInf);
  std::fill_n(t.running_sum, kTileRows, 0.0f);
  std::fill_n(t.saw_nan, kTileRows, false);
  std::fill_n(t.out.get(), kTileRows * packed.value_cols, 0.0f);
  std::fill_n(t.value_buckets.get(), kTileRows * std::max<std::int64_t>(plan.shaw_rows, 1), 0.0f);
}

// Calls run(begin, end, relative_row) over keys [0, width) of a block whose
// keys sit at key_pos[kb + j]: with consecutive keys, three runs (all keys
// at distance <= -K share one row, all at >= K another, the few between one
// each); otherwise one key at a time.
template <class Run>
HWY_INLINE void ForShawRuns(const detail::AttentionPlan& plan, const std::int64_t* key_pos, std::int64_t kb,
                            std::int64_t width, std::int64_t p, Run&& run) {
  const ShawRelativeSpec& spec = plan.shaw;
  const std::int64_t last = plan.kv_len - 1;
  if (!plan.keys_consecutive) {
    for (std::int64_t j = 0; j < width; ++j) run(j, j + 1, spec.Row(p, key_pos[std::min(kb + j, last)]));
    return;
  }
  const std::int64_t jmin = key_pos[std::min(kb, last)], k = spec.max_distance;
  const std::int64_t low_end = std::clamp(p - k - jmin + 1, std::int64_t{0}, width);
  const std::int64_t high_begin = std::max(low_end, std::clamp(p + k - jmin, std::int64_t{0}, width));
  if (low_end > 0) run(0, low_end, spec.Row(p, p - k));
  for (std::int64_t j = low_end; j < high_begin; ++j) run(j, j + 1, spec.Row(p, jmin + j));
  if (high_begin < width) run(high_begin, width, spec.Row(p, p + k));
}

// Key blocks [kb, ke) of one (batch, kv head) for one tile: scores, biases,
// mask, online softmax, and the value accumulation.
struct BlockRunner {
  const detail::AttentionPlan& plan;
  const PackedKv& packed;
  std::int64_t b;
  const float* keys1;
  const float* keys2;
  const float* values;
  float* s;
  float* s2;

  void operator()(Tile& t, std::int64_t kb, std::int64_t ke) const {
    const hn::ScalableTag<float> df;
    const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(df));
    const std::int64_t nr = packed.chunk, block = kChunksPerBlock * nr, dim = plan.head_dim;
    const std::int64_t kv_valid = plan.kv_valid[b];
    const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
    const AttentionMask& mask = plan.mask;
    const std::int64_t width = ke - kb;
    const std::int64_t jmin = key_pos[std::min(kb, plan.kv_len - 1)];
    const std::int64_t jmax = jmin + (width - 1);  // meaningful when keys are consecutive
    const bool consecutive = plan.keys_consecutive;
    if (consecutive && mask.causal && jmin > t.pmax) return;  // entirely in this tile's future
    const std::int64_t far_distance = mask.causal ? t.pmax - jmin : std::max(t.pmax - jmin, jmax - t.pmin);
    const bool window_ok = mask.window <= 0 || far_distance < mask.window || jmax < mask.sinks;
    const bool fully_visible =
        consecutive && t.all_valid && ke <= kv_valid && (!mask.causal || jmax <= t.pmin) && window_ok;

    // Scores, from one source or (ReRoPE across the window edge) two.
    const auto score_all = [&](const float* q, const float* keys, float* out) {
      for (std::int64_t c = 0; c < width; c += nr) ScoreChunk(df, q, dim, keys + (kb + c) * dim, out + c, block);
    };
    // NearStart is non-decreasing in p: the tile's last row decides "all
    // near", its first "all far".
    const detail::NearRule& near = plan.near;
    if (near.window <= 0 || (consecutive && jmin >= detail::NearStart(near, t.pmax))) {
      score_all(t.q1.get(), keys1, s);
    } else if (consecutive && jmax < detail::NearStart(near, t.pmin)) {
      score_all(t.q2.get(), keys2, s);
    } else {
      score_all(t.q1.get(), keys1, s);
      score_all(t.q2.get(), keys2, s2);
      for (std::int64_t r = 0; r < kTileRows; ++r) {
        const std::int64_t start = detail::NearStart(near, t.p[r]);
        for (std::int64_t j = 0; j < width; ++j) {
          const std::int64_t key = std::min(kb + j, plan.kv_len - 1);
          if (key_pos[key] < start) s[r * block + j] = s2[r * block + j];
        }
      }
    }
    AddBias(t, kb, width, jmin);
    if (plan.shaw_rows > 0) AddShawScores(t, kb, width);
    if (plan.softcap > 0) {
      const auto cap = hn::Set(df, plan.softcap), inv_cap = hn::Set(df, 1.0f / plan.softcap);
      for (std::int64_t i = 0; i < kTileRows * block; i += n) {
        hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, s + i), inv_cap))), df, s + i);
      }
    }
    if (!fully_visible) {
      for (std::int64_t r = 0; r < kTileRows; ++r) {
        for (std::int64_t j = 0; j < width; ++j) {
          const std::int64_t key = kb + j;
          const bool visible = t.valid[r] && key < kv_valid && detail::KeyVisible(mask, t.p[r], key_pos[key]);
          if (!visible) s[r * block + j] = kNegInf;
        }
      }
    }

    // Online softmax: rescale what came before when the running max grows.
    const auto neg_inf = hn::Set(df, kNegInf);
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      float* row = s + r * block;
      auto max_vec = neg_inf;
      auto nan = hn::IsNaN(neg_inf);  // all false
      for (std::int64_t j = 0; j < width; j += n) {
        const auto score = hn::Load(df, row + j);
        max_vec = hn::Max(max_vec, score);
        nan = hn::Or(nan, hn::IsNaN(score));
      }
      if (!hn::AllFalse(df, nan)) t.saw_nan[r] = true;
      const float new_max = std::max(t.running_max[r], hn::GetLane(hn::MaxOfLanes(df, max_vec)));
      if (new_max == kNegInf) {
        std::fill_n(row, width, 0.0f);
        continue;
      }
      const auto shift = hn::Set(df, new_max);
      auto sum = hn::Zero(df);
      for (std::int64_t j = 0; j < width; j += n) {
        const auto score = hn::Load(df, row + j);
        const auto weight = hn::IfThenZeroElse(hn::Eq(score, neg_inf), hn::Exp(df, hn::Sub(score, shift)));
        hn::Store(weight, df, row + j);
        sum = hn::Add(sum, weight);
      }
      const float rescale = t.running_max[r] == kNegInf ? 0.0f : std::exp(t.running_max[r] - new_max);
      t.running_sum[r] = t.running_sum[r] * rescale + hn::GetLane(hn::SumOfLanes(df, sum));
      if (rescale != 1.0f) {
        float* o = t.out.get() + r * packed.value_cols;
        const auto factor = hn::Set(df, rescale);
        for (std::int64_t c = 0; c < packed.value_cols; c += n)
          hn::Store(hn::Mul(hn::Load(df, o + c), factor), df, o + c);
        for (std::int64_t i = 0; i < plan.shaw_rows; ++i) t.value_buckets[r * plan.shaw_rows + i] *= rescale;
      }
      t.running_max[r] = new_max;
    }
    // The running sums above took the plain weights; URPE's Toeplitz weight
    // multiplies them on the value side only (no renormalization).
    if (!plan.probability_scale.empty()) ScaleProbabilities(t, kb, width, jmin);
    AccumulateValues(df, s, block, values + kb * packed.value_cols, width, packed.value_cols, t.out.get());
    if (plan.shaw_rows > 0 && plan.shaw.value_term) AccumulateShawValueMass(t, kb, width);
  }

  // Head h's entry of a [q_heads][relative_span] table (T5's bias, URPE's
  // weights) at relative position key - query, clamped to the span.
  float RelativeAt(const std::vector<float>& table, std::int64_t h, std::int64_t relative) const {
    return table[h * plan.relative_span +
                 std::clamp<std::int64_t>(relative - plan.relative_min, 0, plan.relative_span - 1)];
  }
  // The entries consecutive keys from position jmin read from a query at p
  // (the table runs past the last key by its padding).
  const float* RelativeRun(const std::vector<float>& table, std::int64_t h, std::int64_t jmin, std::int64_t p) const {
    return table.data() + h * plan.relative_span + (jmin - p - plan.relative_min);
  }

  // weights *= C_h(key - query), read from the table by relative position
  // as the T5 bias is (consecutive keys: a contiguous run of the table).
  void ScaleProbabilities(const Tile& t, std::int64_t kb, std::int64_t width, std::int64_t jmin) const {
    const hn::ScalableTag<float> df;
    const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(df));
    const std::int64_t block = kChunksPerBlock * packed.chunk;
    const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      float* row = s + r * block;
      if (!plan.keys_consecutive) {
        for (std::int64_t j = 0; j < width; ++j) {
          const std::int64_t key = key_pos[std::min(kb + j, plan.kv_len - 1)];
          row[j] *= RelativeAt(plan.probability_scale, t.head[r], key - t.p[r]);
        }
        continue;
      }
      const float* run = RelativeRun(plan.probability_scale, t.head[r], jmin, t.p[r]);
      for (std::int64_t j = 0; j < width; j += n) {
        hn::Store(hn::Mul(hn::Load(df, row + j), hn::LoadU(df, run + j)), df, row + j);
      }
    }
  }

  // Shaw's key term (scaled q . a^K) and query term (k . a^K times the row's
  // scale), by clipped relative distance.
  void AddShawScores(const Tile& t, std::int64_t kb, std::int64_t width) const {
    const std::int64_t block = kChunksPerBlock * packed.chunk, rows = plan.shaw_rows;
    const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
    const std::int64_t kvh = t.head[0] / plan.group;
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      float* row = s + r * block;
      const float* qr = plan.shaw_qr.empty()
                            ? nullptr
                            : plan.shaw_qr.data() + ((b * plan.q_len + t.token[r]) * plan.q_heads + t.head[r]) * rows;
      ForShawRuns(plan, key_pos, kb, width, t.p[r], [&](std::int64_t begin, std::int64_t end, std::int64_t rel) {
        if (qr) {
          for (std::int64_t j = begin; j < end; ++j) row[j] += qr[rel];
        }
        if (!plan.shaw_kr.empty()) {
          const float* kr = plan.shaw_kr.data() + ((b * plan.kv_heads + kvh) * rows + rel) * plan.kv_len;
          const std::int64_t last = plan.kv_len - 1;
          for (std::int64_t j = begin; j < end; ++j) row[j] += t.factor[r] * kr[std::min(kb + j, last)];
        }
      });
    }
  }

  // Shaw's value term: the softmax mass of each relative row, so that the
  // output gains sum_rel mass[rel] * a^V[rel] at the end.
  void AccumulateShawValueMass(Tile& t, std::int64_t kb, std::int64_t width) const {
    const std::int64_t block = kChunksPerBlock * packed.chunk;
    const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      const float* weights = s + r * block;
      float* mass = t.value_buckets.get() + r * plan.shaw_rows;
      ForShawRuns(plan, key_pos, kb, width, t.p[r], [&](std::int64_t begin, std::int64_t end, std::int64_t rel) {
        float sum = 0;
        for (std::int64_t j = begin; j < end; ++j) sum += weights[j];
        mass[rel] += sum;
      });
    }
  }

  // ALiBi or T5 biases by position, vectorized when keys are consecutive.
  void AddBias(const Tile& t, std::int64_t kb, std::int64_t width, std::int64_t jmin) const {
    if (plan.bias == detail::BiasKind::kNone) return;
    const hn::ScalableTag<float> df;
    const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(df));
    const std::int64_t block = kChunksPerBlock * packed.chunk;
    const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
    for (std::int64_t r = 0; r < kTileRows; ++r) {
      float* row = s + r * block;
      const std::int64_t h = t.head[r];
      if (!plan.keys_consecutive) {
        for (std::int64_t j = 0; j < width; ++j) {
          const std::int64_t key = key_pos[std::min(kb + j, plan.kv_len - 1)];
          switch (plan.bias) {
            case detail::BiasKind::kAlibiDistance:
              row[j] -= plan.slopes[h] * static_cast<float>(std::abs(t.p[r] - key));
              break;
            case detail::BiasKind::kAlibiKeyPosition:
              row[j] += plan.slopes[h] * static_cast<float>(key - t.p[r]);
              break;
            case detail::BiasKind::kRelativeTable: row[j] += RelativeAt(plan.relative_table, h, key - t.p[r]); break;
            case detail::BiasKind::kNone: break;
          }
        }
      } else if (plan.bias == detail::BiasKind::kRelativeTable) {
        // Consecutive keys read consecutive relative positions (the table
        // extends past the last key by a padding margin).
        const float* table = RelativeRun(plan.relative_table, h, jmin, t.p[r]);
        for (std::int64_t j = 0; j < width; j += n) {
          hn::Store(hn::Add(hn::Load(df, row + j), hn::LoadU(df, table + j)), df, row + j);
        }
      } else {
        const auto slope = hn::Set(df, plan.slopes[h]);
        const auto query = hn::Set(df, static_cast<float>(t.p[r]));
        for (std::int64_t j = 0; j < width; j += n) {
          const auto key = hn::Iota(df, static_cast<float>(jmin + j));
          // BLOOM's slope * j is applied as slope * (j - p): the same softmax
          // (a per-row constant), without float32 losing the large j.
          const auto bias = plan.bias == detail::BiasKind::kAlibiDistance
                                ? hn::Neg(hn::Mul(slope, hn::Abs(hn::Sub(query, key))))
                                : hn::Mul(slope, hn::Sub(key, query));
          hn::Store(hn::Add(hn::Load(df, row + j), bias), df, row + j);
        }
      }
    }
  }
};

// Normalizes a tile's rows (with the per-head sink logit in the
// denominator) and stores them in the output dtype.
inline void StoreTile(const detail::AttentionPlan& plan, const PackedKv& packed, std::int64_t b, Tile& t) {
  const hn::ScalableTag<float> df;
  const std::int64_t n = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t r = 0; r < kTileRows; ++r) {
    if (!t.valid[r]) continue;
    if (plan.shaw_rows > 0 && plan.shaw.value_term) {  // sum_rel mass[rel] a^V[rel]
      float* o = t.out.get() + r * packed.value_cols;
      for (std::int64_t rel = 0; rel < plan.shaw_rows; ++rel) {
        const float mass = t.value_buckets[r * plan.shaw_rows + rel];
        if (mass == 0) continue;
        const float* a = plan.shaw_rel_v.data() + rel * plan.v_dim;
        for (std::int64_t c = 0; c < plan.v_dim; ++c) o[c] += mass * a[c];
      }
    }
    float factor = t.running_sum[r] > 0 ? 1.0f / t.running_sum[r] : 0.0f;
    if (t.saw_nan[r]) {
      factor = std::numeric_limits<float>::quiet_NaN();
    } else if (!plan.sink_logits.empty()) {
      const float sink = plan.sink_logits[t.head[r]];
      const float top = std::max(t.running_max[r], sink);
      const float kept = t.running_max[r] == kNegInf ? 0.0f : std::exp(t.running_max[r] - top);
      factor = kept / (t.running_sum[r] * kept + std::exp(sink - top));
    }
    const float* o = t.out.get() + r * packed.value_cols;
    const auto scale = hn::Set(df, factor);
    const std::int64_t at = plan.out.Offset(b, t.token[r], t.head[r]);
    const auto store = [&](auto* out) {
      std::int64_t c = 0;
      for (; c + n <= plan.v_dim; c += n) StoreF32(df, hn::Mul(hn::Load(df, o + c), scale), out + at + c);
      if (c < plan.v_dim) StorePartialF32(df, hn::Mul(hn::Load(df, o + c), scale), out + at + c, plan.v_dim - c);
    };
    switch (plan.out.dtype) {
      case DType::kF32: store(static_cast<float*>(plan.out.data)); break;
      case DType::kF16: store(static_cast<hwy::float16_t*>(plan.out.data)); break;
      case DType::kBF16: store(static_cast<hwy::bfloat16_t*>(plan.out.data)); break;
    }
  }
}

// One work item: 4 tiles (24 rows of (token, head in group)) of batch b and
// kv head kvh share every key block while it is in cache.
inline void RunItem(const detail::AttentionPlan& plan, const PackedKv& packed, std::int64_t b, std::int64_t kvh,
                    std::int64_t row0, ItemScratch& scratch) {
  const std::int64_t nr = packed.chunk, block = kChunksPerBlock * nr;
  const std::int64_t kv_valid = plan.kv_valid[b];
  const std::int64_t* key_pos = plan.k_positions.data() + b * plan.kv_len;
  const AttentionMask& mask = plan.mask;
  std::int64_t pmin = std::numeric_limits<std::int64_t>::max(), pmax = std::numeric_limits<std::int64_t>::min();
  int tiles = 0;
  for (; tiles < kSubTiles; ++tiles) {
    Tile& t = scratch.tiles[tiles];
    LoadTile(plan, packed, b, kvh, row0 + tiles * kTileRows, t);
    if (!t.any_valid) break;
    pmin = std::min(pmin, t.pmin);
    pmax = std::max(pmax, t.pmax);
  }

  // The key index ranges the mask can reach, chunk-aligned and disjoint.
  std::int64_t ranges[2][2];
  int range_count = 0;
  const auto round_up = [nr](std::int64_t x) { return (x + nr - 1) / nr * nr; };
  if (plan.keys_consecutive && kv_valid > 0) {
    const std::int64_t koff = key_pos[0];
    std::int64_t lo = 0, hi = kv_valid;
    if (mask.causal) hi = std::min(hi, pmax - koff + 1);
    if (mask.window > 0) {
      lo = std::max<std::int64_t>(0, pmin - mask.window + 1 - koff);
      if (!mask.causal) hi = std::min(hi, pmax + mask.window - koff);
    }
    const std::int64_t sink_hi = mask.window > 0 ? std::clamp(mask.sinks - koff, std::int64_t{0}, hi) : 0;
    const std::int64_t main_lo = lo / nr * nr, main_hi = round_up(std::max(hi, std::int64_t{0}));
    if (sink_hi > 0 && round_up(sink_hi) < main_lo) {
      ranges[range_count][0] = 0;
      ranges[range_count++][1] = round_up(sink_hi);
      if (main_lo < main_hi) {
        ranges[range_count][0] = main_lo;
        ranges[range_count++][1] = main_hi;
      }
    } else if (sink_hi > 0 || main_lo < main_hi) {
      ranges[range_count][0] = sink_hi > 0 ? 0 : main_lo;
      ranges[range_count++][1] = main_hi;
    }
  } else if (kv_valid > 0) {
    ranges[0][0] = 0;
    ranges[0][1] = round_up(kv_valid);
    range_count = 1;
  }

  const std::int64_t head_block = b * plan.kv_heads + kvh;
  const BlockRunner run{plan,
                        packed,
                        b,
                        packed.keys1 + head_block * packed.KeyBlockSize(plan),
                        packed.keys2 ? packed.keys2 + head_block * packed.KeyBlockSize(plan) : nullptr,
                        packed.values + head_block * packed.ValueBlockSize(),
                        scratch.scores.get(),
                        scratch.scores2.get()};
  for (int range = 0; range < range_count; ++range) {
    for (std::int64_t kb = ranges[range][0]; kb < ranges[range][1]; kb += block) {
      const std::int64_t ke = std::min(kb + block, ranges[range][1]);
      for (int i = 0; i < tiles; ++i) run(scratch.tiles[i], kb, ke);
    }
  }
  for (int i = 0; i < tiles; ++i) StoreTile(plan, packed, b, scratch.tiles[i]);
}

inline void RunAttentionPlanImpl(const detail::AttentionPlan& plan) {
  const PackedKv packed = PackKv(plan);
  const std::int64_t item_rows = kTileRows * kSubTiles;
  const std::int64_t row_blocks = (plan.q_len * plan.group + item_rows - 1) / item_rows;
  const std::int64_t items = plan.batch * plan.kv_heads * row_blocks;
  // Threads claim items (later row blocks first: under a causal mask they
  // see the most keys); each item is computed whole by one thread.
  std::atomic<std::int64_t> next{0};
  ParallelFor(NumThreads(), 1, [&](std::int64_t, std::int64_t) {
    ItemScratch scratch(plan, packed);
    for (std::int64_t item; (item = next.fetch_add(1)) < items;) {
      const std::int64_t block_index = row_blocks - 1 - item % row_blocks;
      const std::int64_t bh = item / row_blocks;
      RunItem(plan, packed, bh / plan.kv_heads, bh % plan.kv_heads, block_index * item_rows, scratch);
    }
  });
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // POSENC_ATTENTION_INL_H_
