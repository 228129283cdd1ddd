#include "options/tiny_lm_options.h"

#include "posenc/error.h"

namespace posenc::cli {

std::string SchemeList() {
  std::string list;
  for (const PositionScheme scheme : AllPositionSchemes()) {
    list += (list.empty() ? "" : ", ") + std::string(PositionSchemeName(scheme));
  }
  return list;
}

PositionScheme SchemeOption(const char* op, const char* flag, const std::string& name) {
  for (const PositionScheme scheme : AllPositionSchemes()) {
    if (name == PositionSchemeName(scheme)) return scheme;
  }
  ThrowError(op, flag, FormatValue(name), "must be one of " + SchemeList());
}

void AddTinyLmOptions(CLI::App& command, TinyLmConfig& config, TinyLmTrainOptions& train) {
  command.add_option("--d-model", config.d_model, "Model width")->capture_default_str();
  command.add_option("--layers", config.layers, "Blocks")->capture_default_str();
  command.add_option("--heads", config.heads, "Attention heads")->capture_default_str();
  command.add_option("--ffn", config.ffn_hidden, "MLP hidden width")->capture_default_str();
  command.add_option("--batch", train.batch, "Sequences a step")->capture_default_str();
  command.add_option("--lr", train.lr, "Peak learning rate")->capture_default_str();
  command.add_option("--min-lr", train.min_lr, "Learning rate at the end of the cosine")->capture_default_str();
  command.add_option("--warmup", train.warmup, "Share of the steps with a linear warmup")->capture_default_str();
  command.add_option("--weight-decay", train.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str();
  command.add_option("--grad-clip", train.grad_clip, "Global gradient-norm clip (inf: none)")->capture_default_str();
  command.add_option("--shaw-clip", config.shaw_clip, "shaw: distances clip to [-K, K]")->capture_default_str();
  command.add_option("--t5-buckets", config.t5_buckets, "t5: buckets")->capture_default_str();
  command.add_option("--t5-max-distance", config.t5_max_distance, "t5: distance of the last bucket")
      ->capture_default_str();
  command.add_option("--rope-theta", config.rope_theta, "rope: base")->capture_default_str();
}

}  // namespace posenc::cli
