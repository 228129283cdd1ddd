// What `posenc zoo` measured and its three views: Markdown tables (held-out
// loss of every scheme, and of RoPE under every training-free method, at
// 1x..16x the training length, mean over seeds with their spread; the loss
// on the bytes predicted past L beside RoPE + window, which never looks
// past L; the byte n-grams as rows of each), the JSON of every number, and
// the picture (loss against length with the n-grams as reference lines;
// loss against position at the longest length minus the reference
// n-gram's on the same bytes, where the break at L shows).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "options/output_files.h"
#include "posenc/mean_interval.h"

namespace posenc::cli {

// One model evaluated one way at one length.
struct ZooLength {
  std::int64_t length = 0;
  std::string resolved;        // the method with its parameters at this length; "" as trained
  bool same_as_model = false;  // the method is the model's own RoPE here: the as-trained numbers
  std::optional<double> loss;  // nats per byte; none: the model cannot run at this length
  // Over the scored bytes predicted at positions >= the training length
  // (with more context than training showed); none: no such byte.
  std::optional<double> loss_past_train;
  std::string error;  // why not (a learned table's last row), when loss is none
  std::int64_t windows = 0;
  std::vector<double> position_loss;  // mean loss per bucket of positions (ZooReport::bucket wide)
  double seconds = 0;
};

// One way of running a trained model: as trained ("rope"), under a method
// ("rope+yarn"), or a learned table past its rows ("learned+hierarchical").
struct ZooEvaluation {
  std::string variant;
  std::vector<ZooLength> lengths;
};

// A point of a learning curve: the mean training loss (nats per byte) of
// the steps since the previous point, after `tokens` training bytes.
struct ZooCurvePoint {
  std::int64_t tokens = 0;
  double loss = 0;
};

// One cell: a scheme trained with a seed, and its evaluations.
struct ZooModel {
  std::string scheme;
  std::int64_t seed = 0;
  std::int64_t params = 0, steps = 0, tokens = 0;
  double final_loss = 0, train_seconds = 0, tokens_per_s = 0, seconds = 0;
  std::vector<ZooEvaluation> evaluations;
  std::vector<ZooCurvePoint> curve;  // kZooCurvePoints points; empty in cells written before curves
};

nlohmann::json ZooModelJson(const ZooModel& model);
// Throws posenc::Error naming the missing or mistyped field.
ZooModel ZooModelFromJson(const nlohmann::json& json);
// A byte n-gram evaluated as the models are ("5-gram": the same scored
// bytes at every length; the position curves over the same windows), as a
// cell writes it.
nlohmann::json ZooEvaluationJson(const ZooEvaluation& evaluation);
ZooEvaluation ZooEvaluationFromJson(const nlohmann::json& json);

// The byte n-gram orders of every zoo (Witten-Bell, fitted on the corpus);
// the last is the reference that a model must beat within L and that the
// position curves are drawn against.
inline constexpr int kZooNgramOrders[] = {2, 3, 4, 5};
std::string ZooNgramVariant(int order);  // "5-gram"

// The byte n-grams of kZooNgramOrders fitted on the bytes one seed's models
// trained on (TinyLmTrainingBytes: every scheme of a seed reads the same
// batches) instead of the whole corpus, scored as the corpus's n-grams are:
// the floor at the data a model had. A cell writes it under
// kZooSeenNgramKey.
struct ZooSeenNgram {
  std::int64_t seed = 0;
  std::int64_t bytes = 0;  // the training bytes it was counted on
  std::vector<ZooEvaluation> evaluations;
};
inline constexpr const char* kZooSeenNgramKey = "ngram_seen";
// Throws posenc::Error naming the missing or mistyped field.
ZooSeenNgram ZooSeenNgramFromJson(std::int64_t seed, const nlohmann::json& json);

// The model and optimizer settings a tiny-model report states (posenc zoo,
// posenc tasks), read from a grid's settings (ReadTinyLmRunSettings).
struct TinyLmRunSettings {
  std::int64_t train_length = 0, tokens = 0, batch = 0;
  std::int64_t d_model = 0, layers = 0, heads = 0, ffn_hidden = 0;
  std::int64_t position_range = 0;  // > 0: randomized positions from [0, position_range)
  double lr = 0;
};

// The model's sizes and position range, as the reports' JSON gives them.
nlohmann::json TinyLmModelJson(const TinyLmRunSettings& run);

// "" for plain positions, else a sentence saying the models ran at
// randomized positions (the reports' settings line).
std::string RandomizedPositionsSentence(const TinyLmRunSettings& run);

struct ZooReport {
  std::vector<std::string> variants;  // table rows, in order
  std::vector<std::int64_t> seeds;
  std::vector<std::int64_t> lengths;  // ascending
  TinyLmRunSettings run;
  std::string corpus, text;
  std::int64_t eval_bytes = 0;      // predicted bytes, the same text[1..eval_bytes] at every length
  std::int64_t stride_divisor = 0;  // sliding windows of stride length / stride_divisor
  std::int64_t bucket = 0;          // positions per point of the loss curves
  double unigram_corpus = 0, unigram_text = 0;
  std::vector<ZooEvaluation> ngrams;  // kZooNgramOrders, in order (the same in every cell)
  double seconds = 0;                 // the cells' compute, added up
  std::vector<ZooModel> models;
  // The convergence check (--half-budget): each model trained again with
  // half the budget, evaluated at L only. Doubling the budget from these
  // to `models` must move the loss at L by less than the seeds' standard
  // deviation (ZooConverged).
  std::vector<ZooModel> half_budget;
  std::vector<ZooSeenNgram> seen_ngrams;  // one a seed, in seed order; empty in cells written before them
};

// The convergence rule of a scheme: the paired difference (over seeds) of
// its loss at L between the full and the half budget, and the seeds' sd at
// the full budget; converged when |mean difference| < sd. None without
// half-budget models, L among the lengths, or two seeds of both.
struct ZooConvergence {
  double half = 0, full = 0;                 // mean loss at L
  double difference = 0, low = 0, high = 0;  // full - half, 95% paired interval
  double sd = 0;                             // of the full budget's losses over the seeds
  bool converged = false;
};
std::optional<ZooConvergence> ZooConverged(const ZooReport& report, const std::string& scheme);

// A scheme's loss at L minus the reference n-gram's fitted on the same
// seed's training bytes, paired over the seeds; none without both.
std::optional<MeanInterval> ZooSeenMargin(const ZooReport& report, const std::string& scheme);

// The verdict rule: why a scheme's extrapolation verdicts (its rows past L
// read as "extrapolates", "best", a place in a ranking) are withheld, its
// tables early training; empty when none is. A scheme must pass the
// convergence check (ZooConverged) and be below the reference n-gram on its
// own training bytes beyond noise (ZooSeenMargin's interval below 0).
std::vector<std::string> ZooEarlyTraining(const ZooReport& report, const std::string& scheme);

std::string ZooMarkdown(const ZooReport& report);
std::string ZooJson(const ZooReport& report);
// Four panels: loss against length for (a) every scheme and (b) RoPE under
// each method, the n-grams as reference lines, and loss against position at
// the longest length minus the reference n-gram's for (c) and (d), the
// training length dashed; then, when the cells have them, (e) the learning
// curves and (f) the convergence check. The PNG joins `outputs`.
void DrawZooPlot(const ZooReport& report, const std::string& png_path, OutputFiles& outputs);

}  // namespace posenc::cli
