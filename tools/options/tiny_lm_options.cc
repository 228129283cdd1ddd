#include "options/tiny_lm_options.h"

#include <algorithm>
#include <string>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

// Registers each field of `visit_fields` that has a flag.
template <class Fields>
void AddFieldFlags(CLI::App& command, Fields&& visit_fields) {
  visit_fields([&](const ConfigField& field, auto& value) {
    if (field.flag.empty()) return;
    command.add_option(std::string(field.flag), value, std::string(field.help))->capture_default_str();
  });
}

}  // namespace

std::vector<PositionScheme> SchemeListOption(const char* op, const char* flag, const std::vector<std::string>& lists) {
  std::string text;
  for (const std::string& list : lists) text += (text.empty() ? "" : ",") + list;
  std::vector<PositionScheme> schemes;
  if (lists.empty()) return schemes;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = text.find(',', begin);
    const std::string name = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    Require(!name.empty(), op, flag, text, "must be scheme names separated by ',', none of them empty");
    const PositionScheme scheme = ParsePositionScheme(name, op, flag);
    Require(std::find(schemes.begin(), schemes.end(), scheme) == schemes.end(), op, flag, text,
            "lists " + name + " twice");
    schemes.push_back(scheme);
    if (comma == std::string::npos) return schemes;
    begin = comma + 1;
  }
}

std::vector<PositionScheme> SchemesOption(const char* op, const char* flag, const std::vector<std::string>& lists,
                                          const char* default_list) {
  if (lists == std::vector<std::string>{"all"}) return {AllPositionSchemes().begin(), AllPositionSchemes().end()};
  return SchemeListOption(op, flag, lists.empty() ? std::vector<std::string>{default_list} : lists);
}

std::vector<std::int64_t> SeedsOption(const char* op, const std::vector<std::int64_t>& seeds) {
  Require(!seeds.empty(), op, "--seeds", Verbatim{"(none)"}, "must list at least one seed");
  for (const std::int64_t seed : seeds) Require(seed >= 0, op, "--seeds", seed, "must be >= 0");
  std::vector<std::int64_t> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return sorted;
}

std::vector<std::int64_t> TestLengthsOption(const std::vector<std::int64_t>& lengths, std::int64_t train_length) {
  std::vector<std::int64_t> out = lengths;
  if (out.empty()) {
    for (const std::int64_t factor : {1, 2, 4, 8, 16}) out.push_back(factor * train_length);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void TinyLmFlags::Add(CLI::App& command) {
  AddFieldFlags(command, [&](auto&& visit) { TinyLmConfig::VisitModelFields(model_, visit); });
  for (PositionScheme& scheme : schemes_) {
    AddFieldFlags(command, [&](auto&& visit) { VisitSchemeFields(scheme, visit); });
  }
}

TinyLmConfig TinyLmFlags::Config(const PositionScheme& scheme) const {
  TinyLmConfig config = model_;
  config.scheme = schemes_[scheme.index()];
  return config;
}

void AddTinyLmTrainOptions(CLI::App& command, TinyLmTrainOptions& train) {
  command.add_option("--batch", train.batch, "Sequences a step")->capture_default_str();
  command.add_option("--lr", train.lr, "Peak learning rate")->capture_default_str();
  command.add_option("--min-lr", train.min_lr, "Learning rate at the end of the cosine")->capture_default_str();
  command.add_option("--warmup", train.warmup, "Share of the steps with a linear warmup")->capture_default_str();
  command.add_option("--weight-decay", train.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str();
  command.add_option("--grad-clip", train.grad_clip, "Global gradient-norm clip (inf: none)")->capture_default_str();
}

}  // namespace posenc::cli
