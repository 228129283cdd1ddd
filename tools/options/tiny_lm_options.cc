#include "options/tiny_lm_options.h"

#include <algorithm>

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

std::vector<PositionScheme> SchemeListOption(const char* op, const char* flag, const std::vector<std::string>& lists) {
  std::string text;
  for (const std::string& list : lists) text += (text.empty() ? "" : ",") + list;
  std::vector<PositionScheme> schemes;
  if (lists.empty()) return schemes;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = text.find(',', begin);
    const std::string name = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    Require(!name.empty(), op, flag, text, "must be scheme names separated by ',', none of them empty");
    const PositionScheme scheme = SchemeOption(op, flag, name);
    Require(std::find(schemes.begin(), schemes.end(), scheme) == schemes.end(), op, flag, text,
            "lists " + name + " twice");
    schemes.push_back(scheme);
    if (comma == std::string::npos) return schemes;
    begin = comma + 1;
  }
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
