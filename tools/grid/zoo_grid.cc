// The zoo grid kind: one cell is one scheme trained with one seed
// (TrainTinyLm on the grid's corpus) and then evaluated on the held-out text
// at every length: as trained, a learned table also past its rows by Su's
// hierarchical decomposition, a RoPE model also under every training-free
// method. The merge is zoo_report's tables, JSON and picture.
//
// Cell parameters: the scheme, seed, model config and optimizer settings,
// the lengths, the methods (RoPE only), the eval budget, the windows' rule
// and stride, the bucket width, the corpus's and the text's SHA-256
// (grid.h). A method that is the model's own RoPE at a length
// (SameAsModelRope) reuses the as-trained numbers instead of evaluating
// again. Each cell also fits the byte n-grams on the corpus and scores them
// on the same bytes (they have no seed: every cell finds the same numbers,
// a few seconds of its time, so that a cell stays the whole of its work),
// and again fitted on the bytes its model trained on (TinyLmTrainingBytes:
// its seed's batches), the floor at the data the model had.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <type_traits>

#include "grid/grid_kind.h"
#include "posenc/byte_ngram.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "grid/zoo_grid.h"
#include "reports/zoo_report.h"
#include "options/tiny_lm_options.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;
constexpr const char* kOp = "zoo";
constexpr std::uint64_t kMaxTextBytes = std::uint64_t{4} << 30;

std::span<const std::uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

// What a cell is computed from, each value checked as its flag is.
struct ZooCellParams {
  std::string scheme;
  TinyLmConfig config;
  TinyLmTrainOptions train;
  std::vector<std::int64_t> lengths;  // ascending
  std::vector<std::string> methods;   // RoPE only
  std::int64_t eval_bytes = 0;
  std::int64_t stride_divisor = 0;
  std::int64_t bucket = 0;
};

ZooCellParams ReadCellParams(const GridField& at, const Json& p) {
  ZooCellParams c{.scheme = at.String(p, "scheme"),
                  .config = ZooConfigFromJson(at.Child("model"), at.Object(p, "model")),
                  .train = ZooTrainFromJson(at.Child("train"), at.Object(p, "train")),
                  .lengths = at.Ints(p, "lengths"),
                  .methods = at.Strings(p, "methods"),
                  .eval_bytes = at.Int(p, "eval_bytes"),
                  .stride_divisor = at.Int(p, "stride_divisor"),
                  .bucket = at.Int(p, "bucket")};
  at.Child("scheme").Check([&] {
    Require(c.scheme == PositionSchemeName(c.config.scheme), kOp, "scheme", c.scheme,
            "must be the model's scheme " + std::string(PositionSchemeName(c.config.scheme)));
  });
  at.Child("train").Check([&] { c.train.Validate(c.config); });
  at.Child("lengths").Check([&] { CheckZooLengths(c.config, c.lengths); });
  at.Child("eval_bytes").Check([&] { CheckZooEvalBytes(c.eval_bytes, c.lengths); });
  at.Child("stride_divisor").Check([&] { CheckZooStrideDivisor(c.stride_divisor); });
  at.Child("windows").Check([&] {
    const std::string windows = at.String(p, "windows");
    Require(windows == kZooWindows, kOp, "windows", windows,
            std::string("must be \"") + kZooWindows + "\" (a cell scored by another rule is another posenc's)");
  });
  at.Child("bucket").Check([&] { CheckZooBucket(c.bucket); });
  for (std::size_t i = 0; i < c.methods.size(); ++i) {
    at.Child("methods").Child(std::to_string(i)).Check([&] {
      const ContextExtension method = ParseContextExtension(c.methods[i]);
      for (const std::int64_t length : c.lengths) PlanTinyLmExtension(c.config, method, length);
    });
  }
  return c;
}

// The windows of a length: sliding, every byte of text[1..eval_bytes]
// scored once in the text's order, so the loss at a length is over the same
// bytes whatever other lengths the grid asks for and each byte sees close
// to `length` bytes before it (TinyLmSlidingWindows).
TinyLmWindows Windows(std::span<const std::uint8_t> text, std::int64_t length, const ZooCellParams& p) {
  return TinyLmSlidingWindows(static_cast<std::int64_t>(text.size()), length, ZooStride(length, p.stride_divisor),
                              p.eval_bytes);
}

// The mean of the losses predicted at positions >= the training length.
std::optional<double> LossPastTrain(std::span<const double> losses, std::span<const std::int64_t> positions,
                                    std::int64_t train_length) {
  double sum = 0;
  std::int64_t count = 0;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    if (positions[i] < train_length) continue;
    sum += losses[i];
    ++count;
  }
  return count > 0 ? std::optional<double>(sum / static_cast<double>(count)) : std::nullopt;
}

ZooLength Evaluate(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> text,
                   std::int64_t length, const ZooCellParams& p, const std::optional<ContextExtension>& method) {
  ZooLength out{.length = length};
  out.error = MeasuredFailure(config, length, [&] {
    const TinyLmEvalResult r = EvaluateTinyLmAt(config, params, text, Windows(text, length, p), method);
    out.loss = r.loss;
    out.loss_past_train = LossPastTrain(r.scored_loss, r.scored_position, config.train_length);
    out.windows = r.windows;
    out.position_loss = BucketPositionLoss(r.position_loss, p.bucket);
    out.seconds = r.seconds;
  });
  return out;
}

// The byte n-grams of kZooNgramOrders, fitted on the corpus and scored as
// the models are: the same bytes text[1..eval_bytes] at every length (each
// given its order - 1 bytes before it in the text), the loss past L over
// the bytes a model predicts at positions >= L, and the position curves
// over the same windows (the context cut at the window's start).
std::vector<ZooEvaluation> EvaluateNgrams(std::span<const std::uint8_t> corpus, std::span<const std::uint8_t> text,
                                          std::int64_t train_length, const ZooCellParams& p) {
  const auto start = std::chrono::steady_clock::now();
  const ByteNgram ngram(corpus, std::end(kZooNgramOrders)[-1]);
  std::printf("byte n-grams fitted on %zu bytes in %.1f s\n", corpus.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::vector<ZooEvaluation> evaluations;
  for (const int order : kZooNgramOrders) {
    const auto begin = std::chrono::steady_clock::now();
    // losses[i - 1]: text[i]'s loss given the text before it.
    const std::vector<double> losses = ngram.Losses(text, 1, order);
    double mean = 0;
    for (const double l : losses) mean += l;
    mean /= static_cast<double>(losses.size());
    ZooEvaluation e{.variant = ZooNgramVariant(order)};
    for (const std::int64_t length : p.lengths) {
      const TinyLmWindows windows = Windows(text, length, p);
      std::vector<std::int64_t> positions;  // the scored bytes', in the text's order
      std::vector<double> position_loss(static_cast<std::size_t>(length), 0.0);
      for (std::size_t w = 0; w < windows.offsets.size(); ++w) {
        const std::int64_t offset = windows.offsets[w];
        for (std::int64_t t = 0; t < length; ++t) {
          if (t >= windows.first_scored[w]) positions.push_back(t);
          // Past its first order - 1 positions a window cuts no context the n-gram reads.
          position_loss[t] +=
              t + 1 >= order - 1
                  ? losses[offset + t]
                  : -std::log(ngram.Probability(text.subspan(offset, t + 1), text[offset + t + 1], order));
        }
      }
      for (double& l : position_loss) l /= static_cast<double>(windows.offsets.size());
      e.lengths.push_back({.length = length,
                           .loss = mean,
                           .loss_past_train = LossPastTrain(losses, positions, train_length),
                           .windows = static_cast<std::int64_t>(windows.offsets.size()),
                           .position_loss = BucketPositionLoss(position_loss, p.bucket)});
    }
    e.lengths.front().seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    evaluations.push_back(std::move(e));
  }
  return evaluations;
}

Json ComputeModel(const Grid& grid, const GridCell& cell) {
  // ReadGrid checked the parameters (Check): read again, they cannot fail.
  const ZooCellParams p = ReadCellParams({.file = "grid.json", .path = "params"}, cell.params);
  const auto start = std::chrono::steady_clock::now();
  const TinyLmConfig& config = p.config;
  TinyLmTrainOptions train = p.train;
  // The learning curve: kZooCurvePoints entries, each the mean loss of its steps.
  train.log_every = std::max<std::int64_t>(1, train.Steps(config) / kZooCurvePoints);
  const std::string corpus = ReadRegularFile(kOp, "--corpus", CheckedGridInput(grid, "corpus"), kMaxTextBytes,
                                             "the corpus is read into memory");
  const std::string text_path = CheckedGridInput(grid, "text");
  std::string text = ReadRegularFile(kOp, "--text", text_path, kMaxTextBytes, "the text is read into memory");
  std::printf("training %s, seed %lld, on %zu bytes\n", cell.label.c_str(), static_cast<long long>(train.seed),
              corpus.size());
  std::int64_t next_report = 0;
  const TinyLmTrainResult trained = TrainTinyLm(config, train, Bytes(corpus), [&](const TinyLmTrainProgress& s) {
    if (s.step < next_report && s.step != s.steps) return;
    next_report = s.step + std::max<std::int64_t>(1, s.steps / 10);
    std::printf("step %lld/%lld: loss %.4f, %.0f tokens/s\n", static_cast<long long>(s.step),
                static_cast<long long>(s.steps), s.loss, s.tokens_per_s);
    std::fflush(stdout);
  });
  ZooModel model{.scheme = p.scheme,
                 .seed = train.seed,
                 .params = TinyLmParameterCount(config),
                 .steps = trained.steps,
                 .tokens = trained.tokens,
                 .final_loss = trained.final_loss,
                 .train_seconds = trained.seconds,
                 .tokens_per_s = trained.tokens_per_s};
  for (const TinyLmTrainLogEntry& e : trained.log) model.curve.push_back({.tokens = e.tokens, .loss = e.mean_loss});

  const std::vector<std::int64_t>& lengths = p.lengths;
  // The bytes every length reads (Evaluate): byte 0 as context, 1..eval_bytes predicted.
  const std::int64_t eval_bytes = p.eval_bytes;
  Require(static_cast<std::int64_t>(text.size()) > eval_bytes, kOp, "--text", text_path,
          "has " + std::to_string(text.size()) +
              " bytes, fewer than --eval-bytes + 1 = " + std::to_string(static_cast<std::uint64_t>(eval_bytes) + 1));
  text.resize(static_cast<std::size_t>(eval_bytes + 1));
  const std::span<const std::uint8_t> predicted = Bytes(text).subspan(1);
  ZooEvaluation as_trained{.variant = model.scheme};
  for (const std::int64_t length : lengths) {
    as_trained.lengths.push_back(Evaluate(config, trained.params, Bytes(text), length, p, std::nullopt));
  }
  model.evaluations.push_back(as_trained);
  for (auto& [name, entries] : EvaluateTinyLmVariants<ZooLength>(
           config, p.methods, lengths, as_trained.lengths,
           [&](const TinyLmConfig&c, const std::optional<ContextExtension>&method, std::int64_t length) {
             return Evaluate(c, trained.params, Bytes(text), length, p, method);
           })) {
    model.evaluations.push_back({.variant = std::move(name), .lengths = std::move(entries)});
  }
  model.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json result = ZooModelJson(model);
  // Over the predicted bytes, as the models' losses.
  result["unigram"] = {{"corpus_frequencies", ByteUnigramLoss(CountBytes(Bytes(corpus)), predicted)},
                       {"text_frequencies", ByteUnigramLoss(CountBytes(predicted), predicted)}};
  result["ngram"] = Json::array();
  for (const ZooEvaluation& e : EvaluateNgrams(Bytes(corpus), Bytes(text), config.train_length, p)) {
    result["ngram"].push_back(ZooEvaluationJson(e));
  }
  // The same n-grams fitted on the bytes this model trained on (its seed's
  // batches: the windows concatenated), the floor at the model's own data.
  const std::vector<std::uint8_t> seen = TinyLmTrainingBytes(config, train, Bytes(corpus));
  Json seen_ngrams = Json::array();
  for (const ZooEvaluation& e : EvaluateNgrams(seen, Bytes(text), config.train_length, p)) {
    seen_ngrams.push_back(ZooEvaluationJson(e));
  }
  result[kZooSeenNgramKey] = {{"bytes", seen.size()}, {"evaluations", std::move(seen_ngrams)}};
  return result;
}

std::string Summary(const Json& r) {
  const ZooModel m = ZooModelFromJson(r);
  std::string line = "train loss " + std::to_string(m.final_loss).substr(0, 5) + ";";
  for (const ZooLength& l : m.evaluations.front().lengths) {
    line += " " + std::to_string(l.length) + ": " + (l.loss ? std::to_string(*l.loss).substr(0, 5) : "no rows");
  }
  return line;
}

// The report's settings, each value checked as its flag is; the models
// come from the finished cells.
ZooReport ReadSettings(const GridField& at, const Json& s) {
  ZooReport report{.seeds = at.Ints(s, "seeds"),
                   .lengths = at.Ints(s, "lengths"),
                   .run = ReadTinyLmRunSettings(at, s),
                   .corpus = at.String(s, "corpus"),
                   .text = at.String(s, "text"),
                   .eval_bytes = at.Int(s, "eval_bytes"),
                   .stride_divisor = at.Int(s, "stride_divisor"),
                   .bucket = at.Int(s, "bucket")};
  for (std::size_t i = 0; i < report.seeds.size(); ++i) {
    at.Child("seeds").Child(std::to_string(i)).Check([&] {
      Require(report.seeds[i] >= 0, kOp, "--seeds", report.seeds[i], "must be >= 0");
    });
  }
  at.Child("eval_bytes").Check([&] { CheckZooEvalBytes(report.eval_bytes, report.lengths); });
  at.Child("stride_divisor").Check([&] { CheckZooStrideDivisor(report.stride_divisor); });
  at.Child("bucket").Check([&] { CheckZooBucket(report.bucket); });
  report.variants = TinyLmReportVariants(at, s, kOp);
  return report;
}

void Check(const Grid& grid, const GridField& file) {
  ReadSettings(file.Child("settings"), grid.settings);
  for (const auto& [key, cell] : grid.cells)
    ReadCellParams(file.Child("cells").Child(key).Child("params"), cell.params);
  for (std::size_t i = 0; i < grid.entries.size(); ++i) {
    const GridField at = file.Child("entries").Child(std::to_string(i));
    at.String(grid.entries[i].row, "scheme");
    at.Int(grid.entries[i].row, "seed");
    if (grid.entries[i].row.contains("budget")) {
      const std::string budget = at.String(grid.entries[i].row, "budget");
      if (budget != kZooHalfBudget) at.Child("budget").Fail(FormatValue(budget), "must be \"half\" (or absent)");
    }
  }
}

GridReport Merge(const Grid& grid, const std::map<std::string, Json>& results, const std::string& dir) {
  // ReadGrid checked the settings (Check): read again, they cannot fail.
  ZooReport report = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  for (const GridEntry& entry : grid.entries) {
    const Json& r = results.at(entry.key);
    if (entry.row.contains("budget")) {  // a convergence twin: scored at L only
      report.half_budget.push_back(ZooModelFromJson(r));
      continue;
    }
    report.models.push_back(ZooModelFromJson(r));
    // Cells written before the n-grams on the models' bytes have none.
    const std::int64_t seed = entry.row.at("seed").get<std::int64_t>();
    const bool counted = std::any_of(report.seen_ngrams.begin(), report.seen_ngrams.end(),
                                     [&](const ZooSeenNgram& n) { return n.seed == seed; });
    if (r.contains(kZooSeenNgramKey) && !counted) {
      report.seen_ngrams.push_back(ZooSeenNgramFromJson(seed, r.at(kZooSeenNgramKey)));
    }
    report.unigram_corpus = r.at("unigram").at("corpus_frequencies").get<double>();
    report.unigram_text = r.at("unigram").at("text_frequencies").get<double>();
    report.ngrams.clear();
    for (const Json& e : r.at("ngram")) report.ngrams.push_back(ZooEvaluationFromJson(e));
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "zoo", "models", ZooMarkdown(report), ZooJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawZooPlot(report, png, files); });
}

}  // namespace

TinyLmRunSettings ReadTinyLmRunSettings(const GridField& at, const Json& settings) {
  const GridField model_at = at.Child("model"), train_at = at.Child("train");
  const Json &model = at.Object(settings, "model"), &train = at.Object(settings, "train");
  return {.train_length = model_at.Int(model, "train_length"),
          .tokens = train_at.Int(train, "tokens"),
          .batch = train_at.Int(train, "batch"),
          .d_model = model_at.Int(model, "d_model"),
          .layers = model_at.Int(model, "layers"),
          .heads = model_at.Int(model, "heads"),
          .ffn_hidden = model_at.Int(model, "ffn_hidden"),
          // Absent from grids written before randomized positions.
          .position_range = model.contains("position_range") ? model_at.Int(model, "position_range") : 0,
          .lr = train_at.Number(train, "lr")};
}

std::vector<std::string> TinyLmReportVariants(const GridField& at, const Json& settings, const char* op) {
  const std::vector<std::string> schemes = at.Strings(settings, "schemes");
  std::vector<SchemeCapabilities> capabilities(schemes.size());
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    at.Child("schemes").Child(std::to_string(i)).Check([&] {
      capabilities[i] = PositionSchemeCapabilities(ParsePositionScheme(schemes[i], op, "--schemes"));
    });
  }
  const std::vector<std::string> methods = at.Strings(settings, "methods");
  for (std::size_t i = 0; i < methods.size(); ++i) {
    at.Child("methods").Child(std::to_string(i)).Check([&] { ParseContextExtension(methods[i]); });
  }
  std::vector<std::string> variants;
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    variants.push_back(schemes[i]);
    if (capabilities[i].position_rows) variants.push_back(schemes[i] + "+hierarchical");
    if (!capabilities[i].context_extension) continue;
    for (const std::string& method : methods) variants.push_back(schemes[i] + "+" + method);
  }
  return variants;
}

TinyLmGridScheme PlanTinyLmGridScheme(const TinyLmConfig& config, const TinyLmTrainOptions& train,
                                      const std::vector<ContextExtension>& methods,
                                      const std::vector<std::int64_t>& lengths) {
  train.Validate(config);
  TinyLmGridScheme planned{.config = config};
  if (!PositionSchemeCapabilities(config.scheme).context_extension) return planned;
  for (const ContextExtension& method : methods) {
    for (const std::int64_t length : lengths) PlanTinyLmExtension(config, method, length);
    planned.methods.push_back(FormatContextExtension(method));
  }
  planned.evaluations = 1.0 + static_cast<double>(methods.size());
  return planned;
}

std::string MeasuredFailure(const TinyLmConfig& config, std::int64_t length, const std::function<void()>& evaluate) {
  try {
    evaluate();
  } catch (const Error& e) {
    if (!PositionSchemeCapabilities(config.scheme).position_rows || length <= config.train_length) throw;
    return e.what();
  }
  return {};
}

namespace {

// The fields `visit_fields` visits of c, as JSON members, leaving out an
// optional field (ConfigField::optional) that holds its default: the cells
// and settings of grids written before that field existed keep their keys,
// and so stay finished.
template <class VisitFields>
void PutConfigFields(Json& j, const TinyLmConfig& c, VisitFields visit_fields) {
  TinyLmConfig defaults;
  defaults.scheme = c.scheme;  // the same fields are visited
  std::map<std::string, double> default_of;
  visit_fields(defaults, [&](const ConfigField& field, const auto& value) {
    default_of[std::string(field.key)] = static_cast<double>(value);
  });
  visit_fields(c, [&](const ConfigField& field, const auto& value) {
    if (field.optional && static_cast<double>(value) == default_of[std::string(field.key)]) return;
    j[std::string(field.key)] = value;
  });
}

}  // namespace

Json ZooConfigJson(const TinyLmConfig& c) {
  Json j{{"scheme", PositionSchemeName(c.scheme)}};
  PutConfigFields(j, c, [](const TinyLmConfig& x, const auto& visit) { TinyLmConfig::VisitFields(x, visit); });
  return j;
}

Json ZooModelJson(const TinyLmConfig& c) {
  Json j = Json::object();
  PutConfigFields(j, c, [](const TinyLmConfig& x, const auto& visit) { TinyLmConfig::VisitModelFields(x, visit); });
  return j;
}

TinyLmConfig ZooConfigFromJson(const GridField& at, const Json& j) {
  TinyLmConfig c;
  const std::string scheme = at.String(j, "scheme");
  at.Child("scheme").Check([&] { c.scheme = ParsePositionScheme(scheme, kOp, "--schemes"); });
  // The scheme decides which of its fields the list visits.
  TinyLmConfig::VisitFields(c, [&](const ConfigField& field, auto& value) {
    if (field.optional && !j.contains(field.key)) return;  // its default
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(value)>, double>) {
      value = at.Number(j, field.key);
    } else {
      value = at.Int(j, field.key);
    }
  });
  at.Check([&] { ValidateTinyLmConfig(c); });
  return c;
}

Json ZooTrainJson(const TinyLmTrainOptions& t) {
  return {{"tokens", t.tokens},
          {"batch", t.batch},
          {"seed", t.seed},
          {"lr", t.lr},
          {"min_lr", t.min_lr},
          {"warmup", t.warmup},
          {"weight_decay", t.weight_decay},
          {"grad_clip", t.grad_clip},
          {"beta1", t.beta1},
          {"beta2", t.beta2}};
}

TinyLmTrainOptions ZooTrainFromJson(const GridField& at, const Json& j) {
  TinyLmTrainOptions t;
  t.tokens = at.Int(j, "tokens");
  t.batch = at.Int(j, "batch");
  t.seed = at.Int(j, "seed");
  t.lr = at.Number(j, "lr");
  t.min_lr = at.Number(j, "min_lr");
  t.warmup = at.Number(j, "warmup");
  t.weight_decay = at.Number(j, "weight_decay");
  // JSON has no infinity: --grad-clip inf (never clip) is written as null.
  t.grad_clip = j.contains("grad_clip") && j.at("grad_clip").is_null() ? HUGE_VAL : at.Number(j, "grad_clip");
  t.beta1 = at.Number(j, "beta1");
  t.beta2 = at.Number(j, "beta2");
  t.log_every = kZooLogEvery;
  return t;
}

void CheckZooLengths(const TinyLmConfig& config, const std::vector<std::int64_t>& lengths) {
  Require(!lengths.empty(), kOp, "--lengths", Verbatim{"(none)"}, "must list at least one length");
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    Require(lengths[i] >= 2 && lengths[i] <= (std::int64_t{1} << 32), kOp, "--lengths", lengths[i],
            "must be >= 2 and <= 2^32 (bytes a sliding window reads, overlapping the one before, of a text of at "
            "most 4 GiB)");
    Require(i == 0 || lengths[i] > lengths[i - 1], kOp, "--lengths", lengths[i],
            "must come after a shorter length (ascending, each once)");
  }
  CheckTinyLmReach(config, lengths.back(), kOp);
}

void CheckTinyLmReach(const TinyLmConfig& config, std::int64_t longest, const char* op) {
  if (config.position_range > 0) {
    Require(longest <= config.position_range, op, "--position-range", config.position_range,
            "must be >= the longest length, " + std::to_string(longest) +
                " (a model trained at randomized positions runs every length at positions from [0, "
                "position_range))");
  }
  if (PositionSchemeCapabilities(config.scheme).position_rows) {
    const std::int64_t rows = config.PositionExtent();
    Require(longest <= rows * rows, op, "--lengths", longest,
            "must be <= " + std::to_string(rows * rows) + ", the square of the learned table's " +
                std::to_string(rows) + " rows (the most its hierarchical decomposition reaches)");
  }
}

void CheckZooEvalBytes(std::int64_t eval_bytes, const std::vector<std::int64_t>& lengths) {
  Require(eval_bytes >= 1 && eval_bytes <= (std::int64_t{1} << 32), kOp, "--eval-bytes", eval_bytes,
          "must be in [1, 2^32] (predicted bytes a length, of a text of at most 4 GiB)");
  for (const std::int64_t length : lengths) {
    Require(eval_bytes >= length, kOp, "--eval-bytes", eval_bytes,
            "must be >= every length (" + std::to_string(length) +
                " is longer): the first window of a length scores bytes 1..length");
  }
}

void CheckZooStrideDivisor(std::int64_t stride_divisor) {
  Require(stride_divisor >= 2 && stride_divisor <= 64, kOp, "--stride-divisor", stride_divisor,
          "must be in [2, 64] (the windows slide by length / divisor: every byte sees at least length - stride + 1 "
          "bytes before it, and each byte costs about divisor forward passes)");
}

std::int64_t ZooStride(std::int64_t length, std::int64_t stride_divisor) {
  return std::max<std::int64_t>(1, length / stride_divisor);
}

void CheckZooBucket(std::int64_t bucket) {
  Require(bucket >= 1 && bucket <= (std::int64_t{1} << 32), kOp, "--bucket", bucket,
          "must be in [1, 2^32] once 0 is resolved to L / 8 (positions per point of the loss curves)");
}

const GridKind& ZooGridKind() {
  static const GridKind kind{
      .name = "zoo", .check = Check, .compute = ComputeModel, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
