// posenc bias alibi --heads H [--max-bias B] [--json]
//   ALiBi slopes in head order: {"slopes": [...]}.
// posenc bias t5 --num-buckets B --max-distance M (--bidirectional|--causal)
//                --query-len Q --key-len K [--query-offset P] [--json]
//   T5 relative position buckets, one row per query: {"buckets": [[...], ...]}.
//   Queries sit at positions P + i (default P = K - Q: the last Q tokens, as in
//   self-attention and KV-cache decode), keys at 0..K-1.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/t5_bias.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct AlibiOptions {
  std::int64_t heads = 0;
  double max_bias = 8.0;
  bool json = false;
};

struct T5Options {
  std::int64_t num_buckets = 32;
  std::int64_t max_distance = 128;
  bool bidirectional = false;
  bool causal = false;
  std::int64_t query_len = 0;
  std::int64_t key_len = 0;
  std::optional<std::int64_t> query_offset;
  bool json = false;
};

void RunAlibi(const AlibiOptions& o) {
  const AlibiSpec spec{.heads = o.heads, .max_bias = o.max_bias};
  const std::vector<double> slopes = AlibiSlopes(spec);
  if (o.json) {
    std::cout << Json{{"slopes", slopes}}.dump() << "\n";
    return;
  }
  std::printf("ALiBi slopes for %lld heads (max_bias %g), in head order:\n", static_cast<long long>(o.heads),
              o.max_bias);
  std::printf("%6s  %-22s  %s\n", "head", "slope", "log2(slope)");
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    std::printf("%6zu  %-22.17g  %g\n", h, slopes[h], std::log2(slopes[h]));
  }
}

void RunT5(const T5Options& o) {
  constexpr const char* kOp = "bias t5";
  Require(o.bidirectional != o.causal, kOp, "direction", Verbatim{o.causal ? "both" : "missing"},
          "give exactly one of --bidirectional (encoder) or --causal (decoder)");
  Require(o.query_len >= 0, kOp, "--query-len", o.query_len, "must not be negative");
  Require(o.key_len >= 0, kOp, "--key-len", o.key_len, "must not be negative");
  const std::int64_t offset = o.query_offset.value_or(o.key_len - o.query_len);
  Require(offset >= 0, kOp, "--query-offset", offset,
          o.query_offset ? "must not be negative"
                         : "must not be negative (the default K - Q needs --query-len <= --key-len)");
  const T5BucketSpec spec{.num_buckets = o.num_buckets,
                          .max_distance = o.max_distance,
                          .direction = o.causal ? T5Direction::kCausal : T5Direction::kBidirectional};
  const std::vector<std::int32_t> flat = T5BucketMatrix(spec, o.query_len, o.key_len, offset);
  Json rows = Json::array();
  for (std::int64_t i = 0; i < o.query_len; ++i) {
    rows.push_back(std::vector<std::int32_t>(flat.begin() + i * o.key_len, flat.begin() + (i + 1) * o.key_len));
  }
  if (o.json) {
    std::cout << Json{{"buckets", rows}}.dump() << "\n";
    return;
  }
  std::printf("T5 buckets: %lld buckets, max_distance %lld, %s; queries at %lld..%lld, keys at 0..%lld\n",
              static_cast<long long>(o.num_buckets), static_cast<long long>(o.max_distance),
              std::string(T5DirectionName(spec.direction)).c_str(), static_cast<long long>(offset),
              static_cast<long long>(offset + o.query_len - 1), static_cast<long long>(o.key_len - 1));
  std::printf("(row = query position, column = key position, bucket of key - query)\n");
  std::printf("%8s", "q\\k");
  for (std::int64_t j = 0; j < o.key_len; ++j) std::printf(" %4lld", static_cast<long long>(j));
  std::printf("\n");
  for (std::int64_t i = 0; i < o.query_len; ++i) {
    std::printf("%8lld", static_cast<long long>(offset) + i);
    for (std::int64_t j = 0; j < o.key_len; ++j) std::printf(" %4d", flat[i * o.key_len + j]);
    std::printf("\n");
  }
}

}  // namespace

void AddBiasCommands(CLI::App& app) {
  CLI::App* bias = app.add_subcommand("bias", "Attention-logit position biases: ALiBi slopes, T5 buckets");
  bias->require_subcommand(1);

  auto alibi_options = std::make_shared<AlibiOptions>();
  CLI::App* alibi = bias->add_subcommand("alibi", "ALiBi slopes per head (Press et al.), in head order");
  alibi->add_option("--heads", alibi_options->heads, "Number of attention heads (the global count)")->required();
  alibi->add_option("--max-bias", alibi_options->max_bias, "Exponent scale: 2^(-max_bias*k/n) (default 8)");
  alibi->add_flag("--json", alibi_options->json, "Print {\"slopes\": [...]}");
  alibi->callback([alibi_options] { RunAlibi(*alibi_options); });

  auto t5_options = std::make_shared<T5Options>();
  CLI::App* t5 = bias->add_subcommand("t5", "T5 relative position buckets for a query x key grid");
  t5->add_option("--num-buckets", t5_options->num_buckets, "Buckets (default 32)");
  t5->add_option("--max-distance", t5_options->max_distance, "Distance where the last bucket starts (default 128)");
  auto* bi = t5->add_flag("--bidirectional", t5_options->bidirectional, "Encoder: buckets split by sign");
  auto* causal = t5->add_flag("--causal", t5_options->causal, "Decoder: future keys in bucket 0");
  bi->excludes(causal);
  t5->add_option("--query-len", t5_options->query_len, "Number of queries")->required();
  t5->add_option("--key-len", t5_options->key_len, "Number of keys")->required();
  t5->add_option_function<std::int64_t>(
      "--query-offset", [t5_options](const std::int64_t& p) { t5_options->query_offset = p; },
      "Position of the first query (default key-len - query-len)");
  t5->add_flag("--json", t5_options->json, "Print {\"buckets\": [[...] per query]}");
  t5->callback([t5_options] { RunT5(*t5_options); });
}

}  // namespace posenc::cli
