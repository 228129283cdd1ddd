// Checkpoints of the tiny model as GGUF (include/posenc/tiny_lm_checkpoint.h).
#include "posenc/tiny_lm_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/gguf_writer.h"

#ifndef POSENC_VERSION
#error "POSENC_VERSION is set by src/CMakeLists.txt"
#endif

namespace posenc {
namespace {

constexpr const char* kOp = "checkpoint";

std::string Key(std::string_view name) { return std::string(kTinyLmArchitecture) + "." + std::string(name); }
std::string TrainingKey(std::string_view name) { return Key("training." + std::string(name)); }

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::int64_t ReadInt(const GgufMetadata& metadata, const std::string& key, std::int64_t low) {
  return RequireGgufWholeNumber(metadata, key, kOp, low, "every posenc-tiny-lm checkpoint has it");
}

double ReadNumber(const GgufMetadata& metadata, const std::string& key) {
  const double value = RequireGgufNumber(metadata, key, kOp, "every posenc-tiny-lm checkpoint has it");
  Require(std::isfinite(value), kOp, key, value, "must be finite");
  return value;
}

const std::string& ReadString(const GgufMetadata& metadata, const std::string& key) {
  return RequireGgufValue<std::string>(metadata, key, kOp, "every posenc-tiny-lm checkpoint has it");
}

TinyLmConfig ReadConfig(const GgufMetadata& metadata) {
  const std::string& architecture =
      RequireGgufValue<std::string>(metadata, "general.architecture", kOp, "a GGUF file names its architecture");
  Require(architecture == kTinyLmArchitecture, kOp, "general.architecture", architecture,
          std::string("must be \"") + kTinyLmArchitecture + "\" (a checkpoint of posenc train)");
  TinyLmConfig config;
  const std::string scheme_key = Key("scheme");
  config.scheme = ParsePositionScheme(ReadString(metadata, scheme_key), kOp, scheme_key.c_str());
  // The scheme decides which of its fields the list visits.
  TinyLmConfig::VisitFields(config, [&](const ConfigField& field, auto& value) {
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(value)>, double>) {
      value = ReadNumber(metadata, Key(field.key));
    } else {
      value = ReadInt(metadata, Key(field.key), 0);
    }
  });
  ValidateTinyLmConfig(config);
  return config;
}

TinyLmTrainingInfo ReadInfo(const GgufMetadata& metadata) {
  TinyLmTrainingInfo info;
  info.name = GgufString(metadata, "general.name", kOp).value_or("");
  info.seed = ReadInt(metadata, TrainingKey("seed"), 0);
  info.tokens = ReadInt(metadata, TrainingKey("tokens"), 0);
  info.steps = ReadInt(metadata, TrainingKey("steps"), 0);
  info.batch = ReadInt(metadata, TrainingKey("batch"), 0);
  info.lr = ReadNumber(metadata, TrainingKey("lr"));
  info.final_loss =
      RequireGgufNumber(metadata, TrainingKey("final_loss"), kOp, "every posenc-tiny-lm checkpoint has it");
  info.corpus = ReadString(metadata, TrainingKey("corpus"));
  info.posenc_version = ReadString(metadata, TrainingKey("posenc_version"));
  const std::string counts_key = TrainingKey("corpus_byte_counts");
  const auto& counts =
      RequireGgufValue<std::vector<std::int64_t>>(metadata, counts_key, kOp, "every posenc-tiny-lm checkpoint has it");
  Require(counts.size() == info.corpus_byte_counts.size(), kOp, counts_key + ".size()", counts.size(),
          "must be 256 (one count a byte value)");
  for (std::size_t b = 0; b < counts.size(); ++b) {
    Require(counts[b] >= 0, kOp, counts_key + "[" + std::to_string(b) + "]", counts[b], "must be >= 0");
    info.corpus_byte_counts[b] = counts[b];
  }
  return info;
}

// The config's tensors filled from the file; the file may have no others.
TinyLmParams ReadParams(const GgufFile& file, const TinyLmConfig& config) {
  TinyLmParams params = ZeroTinyLmParams(config);
  std::set<std::string, std::less<>> expected;
  for (TinyLmTensor* t : TinyLmTensorList(config, params)) {
    expected.insert(t->name);
    const GgufTensorInfo* info = file.FindTensor(t->name);
    Require(info != nullptr, kOp, t->name, Verbatim{"missing"},
            "a " + std::string(PositionSchemeName(config.scheme)) + " model of this config has this tensor");
    std::vector<std::int64_t> shape(info->shape.rbegin(), info->shape.rend());  // ggml order reversed
    Require(shape == t->shape, kOp, t->name + " shape", Verbatim{ShapeText(shape)},
            "must be " + ShapeText(t->shape) + " for this config (outermost dimension first; GGUF ne reversed)");
    Require(info->type == GgmlType::kF32, kOp, t->name + " type", TraitsOf(info->type).name,
            "must be F32 (checkpoints are float32)");
    t->values = file.Dequantize(*info);
    // A NaN or infinite weight would make every loss nan, which reads like
    // a measurement: refused here, naming the tensor and the first element.
    const auto bad = std::find_if(t->values.begin(), t->values.end(), [](float v) { return !std::isfinite(v); });
    if (bad != t->values.end()) {
      ThrowError(kOp, t->name + "[" + std::to_string(bad - t->values.begin()) + "]", FormatValue(*bad),
                 "must be finite (the first NaN or infinite weight of the tensor)");
    }
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    Require(expected.contains(info.name), kOp, "tensor", info.name,
            "is not part of a " + std::string(PositionSchemeName(config.scheme)) + " model of this config");
  }
  ValidateTinyLmParams(config, params);
  return params;
}

}  // namespace

const char* PosencVersion() { return POSENC_VERSION; }

void SaveTinyLmCheckpoint(const std::string& path, const TinyLmConfig& config, const TinyLmParams& params,
                          const TinyLmTrainingInfo& info) {
  const std::vector<const TinyLmTensor*> tensors = TinyLmTensorList(config, params);  // validates
  GgufWriter writer;
  const std::string scheme(PositionSchemeName(config.scheme));
  writer.AddString("general.architecture", kTinyLmArchitecture)
      .AddString("general.name",
                 info.name.empty() ? "tiny-lm-" + scheme + "-L" + std::to_string(config.train_length) : info.name)
      .AddString(Key("scheme"), scheme);
  TinyLmConfig::VisitFields(config, [&](const ConfigField& field, const auto& value) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, double>) {
      writer.AddFloat64(Key(field.key), value);
    } else {
      writer.AddInt64(Key(field.key), value);
    }
  });
  writer.AddInt64(TrainingKey("seed"), info.seed)
      .AddInt64(TrainingKey("tokens"), info.tokens)
      .AddInt64(TrainingKey("steps"), info.steps)
      .AddInt64(TrainingKey("batch"), info.batch)
      .AddFloat64(TrainingKey("lr"), info.lr)
      .AddFloat64(TrainingKey("final_loss"), info.final_loss)
      .AddString(TrainingKey("corpus"), info.corpus)
      .AddInt64Array(TrainingKey("corpus_byte_counts"), info.corpus_byte_counts)
      .AddString(TrainingKey("posenc_version"), PosencVersion());
  for (const TinyLmTensor* t : tensors) {
    const std::vector<std::int64_t> ne(t->shape.rbegin(), t->shape.rend());
    writer.AddTensor(t->name, ne, t->values);
  }
  writer.Write(path);
}

TinyLmCheckpoint LoadTinyLmCheckpoint(const std::string& path) {
  const GgufFile file = GgufFile::Open(path);  // its errors name the path
  try {
    TinyLmCheckpoint checkpoint;
    checkpoint.config = ReadConfig(file.metadata());
    checkpoint.info = ReadInfo(file.metadata());
    checkpoint.params = ReadParams(file, checkpoint.config);
    return checkpoint;
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace posenc
