// The zoo grid kind: one cell is one scheme trained with one seed
// (TrainTinyLm on the grid's corpus) and then evaluated on the held-out text
// at every length: as trained, a learned table also past its rows by Su's
// hierarchical decomposition, a RoPE model also under every training-free
// method. The merge is zoo_report's tables, JSON and picture.
//
// Cell parameters: the scheme, seed, model config and optimizer settings,
// the lengths, the methods (RoPE only), the eval budget and bucket width,
// the corpus's and the text's SHA-256 (grid.h). A method that is the
// model's own RoPE at a length (SameAsModelRope) reuses the as-trained
// numbers instead of evaluating again.
#include <chrono>
#include <cstdio>
#include <span>

#include "grid_kind.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "zoo_grid.h"
#include "zoo_report.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;
constexpr const char* kOp = "zoo";
constexpr std::uint64_t kMaxTextBytes = std::uint64_t{4} << 30;

std::span<const std::uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

// Every length predicts the same bytes, text[1..eval_bytes], in windows of
// the length side by side (TinyLmTiledOffsets; the planner made eval_bytes a
// multiple of every length): the loss at a length is over the same bytes
// whatever other lengths the grid asks for, so a loss that falls with
// length is more context, not other text.
ZooLength Evaluate(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> text,
                   std::int64_t length, const Json& p, const std::optional<ContextExtension>& method) {
  const std::vector<std::int64_t> offsets =
      TinyLmTiledOffsets(static_cast<std::int64_t>(text.size()), length, p.at("eval_bytes").get<std::int64_t>());
  ZooLength out{.length = length};
  try {
    const TinyLmEvalResult r = EvaluateTinyLmAt(config, params, text, length, offsets, method);
    out.loss = r.loss;
    out.windows = r.windows;
    out.position_loss = BucketPositionLoss(r.position_loss, p.at("bucket").get<std::int64_t>());
    out.seconds = r.seconds;
  } catch (const Error& e) {
    // Only a learned table evaluated past its rows may fail: that is the
    // claim "no extrapolation" measured. Anything else is a real error.
    if (config.scheme != PositionScheme::kLearned || length <= config.train_length) throw;
    out.error = e.what();
  }
  return out;
}

Json ComputeModel(const Grid& grid, const GridCell& cell) {
  const Json& p = cell.params;
  const auto start = std::chrono::steady_clock::now();
  TinyLmConfig config = ZooConfigFromJson(p.at("model"));
  const TinyLmTrainOptions train = ZooTrainFromJson(p.at("train"));
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
  ZooModel model{.scheme = p.at("scheme").get<std::string>(),
                 .seed = train.seed,
                 .params = TinyLmParameterCount(config),
                 .steps = trained.steps,
                 .tokens = trained.tokens,
                 .final_loss = trained.final_loss,
                 .train_seconds = trained.seconds,
                 .tokens_per_s = trained.tokens_per_s};

  const auto lengths = p.at("lengths").get<std::vector<std::int64_t>>();
  // The bytes every length reads (Evaluate): byte 0 as context, 1..eval_bytes predicted.
  const auto eval_bytes = p.at("eval_bytes").get<std::int64_t>();
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
  // Every other variant: the as-trained numbers where it changes nothing.
  const auto variant = [&](const std::string& name, const auto& same_as_model, const auto& evaluate) {
    ZooEvaluation e{.variant = name};
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      auto [same, resolved] = same_as_model(lengths[i]);
      ZooLength l = same ? as_trained.lengths[i] : evaluate(lengths[i]);
      l.same_as_model = same;
      l.resolved = resolved;
      e.lengths.push_back(std::move(l));
    }
    model.evaluations.push_back(std::move(e));
  };
  if (config.scheme == PositionScheme::kLearned) {
    TinyLmConfig hierarchical = config;
    hierarchical.learned_past_table = LearnedPastTable::kHierarchical;
    variant(
        model.scheme + "+hierarchical",
        [&](std::int64_t length) {
          return std::pair{length <= config.train_length, std::string("hierarchical")};
        },
        [&](std::int64_t length) {
          return Evaluate(hierarchical, trained.params, Bytes(text), length, p, std::nullopt);
        });
  }
  if (config.scheme == PositionScheme::kRope) {
    for (const std::string& name : p.at("methods").get<std::vector<std::string>>()) {
      const ContextExtension method = ParseContextExtension(name);
      variant(
          model.scheme + "+" + name,
          [&](std::int64_t length) {
            const ExtensionPlan plan = PlanTinyLmExtension(config, method, length);
            return std::pair{SameAsModelRope(plan, TinyLmRopeSpec(config), length),
                             FormatContextExtension(plan.resolved)};
          },
          [&](std::int64_t length) { return Evaluate(config, trained.params, Bytes(text), length, p, method); });
    }
  }
  model.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json result = ZooModelJson(model);
  // Over the predicted bytes, as the models' losses.
  result["unigram"] = {{"corpus_frequencies", ByteUnigramLoss(CountBytes(Bytes(corpus)), predicted)},
                       {"text_frequencies", ByteUnigramLoss(CountBytes(predicted), predicted)}};
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

GridReport Merge(const Grid& grid, const std::map<std::string, Json>& results, const std::string& dir) {
  const Json& s = grid.settings;
  const Json& model = s.at("model");
  ZooReport report{.seeds = s.at("seeds").get<std::vector<std::int64_t>>(),
                   .lengths = s.at("lengths").get<std::vector<std::int64_t>>(),
                   .train_length = model.at("train_length").get<std::int64_t>(),
                   .tokens = s.at("train").at("tokens").get<std::int64_t>(),
                   .batch = s.at("train").at("batch").get<std::int64_t>(),
                   .d_model = model.at("d_model").get<std::int64_t>(),
                   .layers = model.at("layers").get<std::int64_t>(),
                   .heads = model.at("heads").get<std::int64_t>(),
                   .ffn_hidden = model.at("ffn_hidden").get<std::int64_t>(),
                   .lr = s.at("train").at("lr").get<double>(),
                   .corpus = s.at("corpus").get<std::string>(),
                   .text = s.at("text").get<std::string>(),
                   .eval_bytes = s.at("eval_bytes").get<std::int64_t>(),
                   .bucket = s.at("bucket").get<std::int64_t>()};
  for (const GridEntry& entry : grid.entries) {
    const Json& r = results.at(entry.key);
    report.models.push_back(ZooModelFromJson(r));
    report.unigram_corpus = r.at("unigram").at("corpus_frequencies").get<double>();
    report.unigram_text = r.at("unigram").at("text_frequencies").get<double>();
  }
  for (const std::string& scheme : s.at("schemes").get<std::vector<std::string>>()) {
    report.variants.push_back(scheme);
    if (scheme == "learned") report.variants.emplace_back("learned+hierarchical");
    if (scheme != "rope") continue;
    for (const std::string& method : s.at("methods").get<std::vector<std::string>>()) {
      report.variants.push_back("rope+" + method);
    }
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "zoo", "models", ZooMarkdown(report), ZooJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawZooPlot(report, png, files); });
}

}  // namespace

Json ZooConfigJson(const TinyLmConfig& c) {
  return {{"scheme", PositionSchemeName(c.scheme)},
          {"train_length", c.train_length},
          {"d_model", c.d_model},
          {"layers", c.layers},
          {"heads", c.heads},
          {"ffn_hidden", c.ffn_hidden},
          {"shaw_clip", c.shaw_clip},
          {"t5_buckets", c.t5_buckets},
          {"t5_max_distance", c.t5_max_distance},
          {"rope_theta", c.rope_theta},
          {"norm_eps", c.norm_eps}};
}

TinyLmConfig ZooConfigFromJson(const Json& j) {
  TinyLmConfig c;
  c.scheme = ParsePositionScheme(j.at("scheme").get<std::string>());
  c.train_length = j.at("train_length").get<std::int64_t>();
  c.d_model = j.at("d_model").get<std::int64_t>();
  c.layers = j.at("layers").get<std::int64_t>();
  c.heads = j.at("heads").get<std::int64_t>();
  c.ffn_hidden = j.at("ffn_hidden").get<std::int64_t>();
  c.shaw_clip = j.at("shaw_clip").get<std::int64_t>();
  c.t5_buckets = j.at("t5_buckets").get<std::int64_t>();
  c.t5_max_distance = j.at("t5_max_distance").get<std::int64_t>();
  c.rope_theta = j.at("rope_theta").get<double>();
  c.norm_eps = j.at("norm_eps").get<double>();
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

TinyLmTrainOptions ZooTrainFromJson(const Json& j) {
  TinyLmTrainOptions t;
  t.tokens = j.at("tokens").get<std::int64_t>();
  t.batch = j.at("batch").get<std::int64_t>();
  t.seed = j.at("seed").get<std::int64_t>();
  t.lr = j.at("lr").get<double>();
  t.min_lr = j.at("min_lr").get<double>();
  t.warmup = j.at("warmup").get<double>();
  t.weight_decay = j.at("weight_decay").get<double>();
  t.grad_clip = j.at("grad_clip").get<double>();
  t.beta1 = j.at("beta1").get<double>();
  t.beta2 = j.at("beta2").get<double>();
  t.log_every = kZooLogEvery;
  return t;
}

const GridKind& ZooGridKind() {
  static const GridKind kind{.name = "zoo", .compute = ComputeModel, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
