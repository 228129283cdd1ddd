// Checkpoints of the tiny model: they round-trip bit for bit for every
// scheme, hold their tensors in list order with GGUF's reversed shapes, and
// refuse every kind of bad file (non-finite weights, a key or tensor left
// out, replaced or added, truncated and missing files) by name.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "posenc/gguf.h"
#include "posenc/gguf_writer.h"
#include "posenc/tiny_lm_checkpoint.h"
#include "posenc/tiny_lm_train.h"
#include "temp_dir.h"
#include "test_util.h"
#include "tiny_lm_train_test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::Noise;
using testing::SameBits;
using testing::SmallConfig;
namespace fs = std::filesystem;

// A fresh directory for each test.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("tiny-lm-train") {}
};

// -------------------------------------------------------------- checkpoints

TinyLmTrainingInfo SomeInfo() {
  TinyLmTrainingInfo info;
  info.seed = 42;
  info.tokens = 123456;
  info.steps = 61;
  info.batch = 16;
  info.lr = 2e-3;
  info.final_loss = 1.2345678901234567;
  info.corpus = "train-corpus.txt";
  for (std::size_t b = 0; b < info.corpus_byte_counts.size(); ++b) {
    info.corpus_byte_counts[b] = static_cast<std::int64_t>(b * b);
  }
  return info;
}

TEST(TinyLmCheckpoint, RoundTripBitExactForEveryScheme) {
  const TempDir dir;
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    SCOPED_TRACE(PositionSchemeName(scheme));
    TinyLmConfig config = SmallConfig(scheme);
    if (auto* rope = std::get_if<RopeScheme>(&config.scheme)) rope->theta = 500000.0;
    if (auto* fire = std::get_if<FireScheme>(&config.scheme)) fire->c = 0.375;
    config.norm_eps = 1e-6;
    // Values with every bit pattern class: init plus noise, a subnormal, -0.
    TinyLmParams params = InitTinyLm(config, 9);
    params.token_embd.values[0] = std::numeric_limits<float>::denorm_min();
    params.token_embd.values[1] = -0.0f;
    const std::string path = dir / (std::string(PositionSchemeName(scheme)) + ".gguf");
    SaveTinyLmCheckpoint(path, config, params, SomeInfo());
    const TinyLmCheckpoint loaded = LoadTinyLmCheckpoint(path);
    EXPECT_EQ(loaded.config.scheme, config.scheme);  // every field of the scheme (shaw clip 3, theta 500000, ...)
    EXPECT_EQ(loaded.config.d_model, 16);
    EXPECT_EQ(loaded.config.heads, 2);
    EXPECT_EQ(loaded.config.layers, 2);
    EXPECT_EQ(loaded.config.ffn_hidden, 24);
    EXPECT_EQ(loaded.config.train_length, 16);
    EXPECT_EQ(loaded.config.norm_eps, 1e-6);
    std::string where;
    EXPECT_TRUE(SameBits(config, params, loaded.params, &where)) << where;
    const TinyLmTrainingInfo expected = SomeInfo();
    EXPECT_EQ(loaded.info.name, "tiny-lm-" + std::string(PositionSchemeName(scheme)) + "-L16");
    EXPECT_EQ(loaded.info.seed, 42);
    EXPECT_EQ(loaded.info.tokens, 123456);
    EXPECT_EQ(loaded.info.steps, 61);
    EXPECT_EQ(loaded.info.batch, 16);
    EXPECT_EQ(loaded.info.lr, 2e-3);
    EXPECT_EQ(loaded.info.final_loss, expected.final_loss);
    EXPECT_EQ(loaded.info.corpus, "train-corpus.txt");
    EXPECT_EQ(loaded.info.corpus_byte_counts, expected.corpus_byte_counts);
    EXPECT_EQ(loaded.info.posenc_version, PosencVersion());
    // The same loss from the loaded model.
    const std::vector<std::uint8_t> tokens = Noise(17, 8);
    EXPECT_EQ(TinyLmLoss(config, params, tokens, 1, 16).loss,
              TinyLmLoss(loaded.config, loaded.params, tokens, 1, 16).loss);
  }
}

TEST(TinyLmCheckpoint, NonFiniteWeightsAreRefusedAtLoad) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(RopeScheme{});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& [bad, text] : {std::pair{nan, "nan"}, std::pair{inf, "inf"}, std::pair{-inf, "-inf"}}) {
    TinyLmParams params = InitTinyLm(config, 1);
    params.blocks[1].ffn_up.values[17] = bad;
    params.blocks[1].ffn_up.values[20] = nan;  // only the first is named
    SaveTinyLmCheckpoint(dir / "bad.gguf", config, params, SomeInfo());
    const std::string expected = std::string("bad.gguf: [checkpoint] blk.1.ffn_up.weight[17] = ") + text +
                                 ": must be finite (the first NaN or infinite weight of the tensor)";
    ExpectError([&] { LoadTinyLmCheckpoint(dir / "bad.gguf"); }, {expected.c_str()});
  }
}

TEST(TinyLmCheckpoint, TensorsInListOrderWithReversedShapes) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(ShawScheme{});
  const TinyLmParams params = InitTinyLm(config, 1);
  TinyLmTrainingInfo info = SomeInfo();
  info.name = "my model";
  SaveTinyLmCheckpoint(dir / "m.gguf", config, params, info);
  const GgufFile file = GgufFile::Open(dir / "m.gguf");
  const auto list = TinyLmTensorList(config, params);
  ASSERT_EQ(file.tensors().size(), list.size());
  for (std::size_t t = 0; t < list.size(); ++t) {
    EXPECT_EQ(file.tensors()[t].name, list[t]->name);
    EXPECT_EQ(file.tensors()[t].shape, std::vector<std::int64_t>(list[t]->shape.rbegin(), list[t]->shape.rend()));
  }
  EXPECT_EQ(*GgufString(file.metadata(), "general.architecture", "test"), "posenc-tiny-lm");
  EXPECT_EQ(*GgufString(file.metadata(), "general.name", "test"), "my model");
  EXPECT_EQ(*GgufString(file.metadata(), "posenc-tiny-lm.scheme", "test"), "shaw");
  EXPECT_EQ(*GgufCount(file.metadata(), "posenc-tiny-lm.train_length", "test"), 16);
}

// Writes a checkpoint the way SaveTinyLmCheckpoint does, with one change:
// a key left out or replaced, a tensor's shape changed, a tensor left out
// or added.
struct BadCheckpoint {
  TinyLmConfig config = SmallConfig(RopeScheme{});
  std::string drop_key, drop_tensor;
  std::map<std::string, std::string> string_keys;  // replacements of string keys
  std::map<std::string, std::int64_t> int_keys;    // replacements of integer keys
  std::string reshape_tensor;                      // written as [1, size] instead
  bool extra_tensor = false;

  void Write(const std::string& path) const {
    const TinyLmParams params = InitTinyLm(config, 1);
    const std::string good = path + ".good";
    SaveTinyLmCheckpoint(good, config, params, SomeInfo());
    const GgufFile file = GgufFile::Open(good);
    GgufWriter writer;
    for (const auto& [key, value] : file.metadata()) {
      if (key == drop_key) continue;
      if (const auto it = string_keys.find(key); it != string_keys.end()) {
        writer.AddString(key, it->second);
      } else if (const auto at = int_keys.find(key); at != int_keys.end()) {
        writer.AddInt64(key, at->second);
      } else if (const auto* s = std::get_if<std::string>(&value)) {
        writer.AddString(key, *s);
      } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
        writer.AddInt64(key, *i);
      } else if (const auto* d = std::get_if<double>(&value)) {
        writer.AddFloat64(key, *d);
      } else if (const auto* a = std::get_if<std::vector<std::int64_t>>(&value)) {
        writer.AddInt64Array(key, *a);
      }
    }
    for (const TinyLmTensor* t : TinyLmTensorList(config, params)) {
      if (t->name == drop_tensor) continue;
      std::vector<std::int64_t> ne(t->shape.rbegin(), t->shape.rend());
      if (t->name == reshape_tensor) ne = {static_cast<std::int64_t>(t->values.size()), 1};
      writer.AddTensor(t->name, ne, t->values);
    }
    if (extra_tensor) writer.AddTensor("blk.9.attn_qkv.weight", {2}, std::vector<float>{1, 2});
    writer.Write(path);
    fs::remove(good);
  }
};

TEST(TinyLmCheckpoint, LoadErrorsNameTheFileAndTheProblem) {
  const TempDir dir;
  const std::string path = dir / "bad.gguf";
  const auto load_error = [&](const BadCheckpoint& bad, std::initializer_list<const char*> fragments) {
    bad.Write(path);
    ExpectError([&] { LoadTinyLmCheckpoint(path); }, fragments);
  };
  BadCheckpoint bad;
  bad.string_keys["general.architecture"] = "llama";
  load_error(bad, {"bad.gguf: [checkpoint] general.architecture = \"llama\": must be \"posenc-tiny-lm\""});
  bad = {};
  bad.string_keys["posenc-tiny-lm.scheme"] = "xpos";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.scheme = \"xpos\": must be one of nope, sinusoidal"});
  bad = {};
  bad.drop_key = "posenc-tiny-lm.heads";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.heads = missing"});
  bad = {};
  bad.drop_key = "posenc-tiny-lm.training.corpus_byte_counts";
  load_error(bad, {"[checkpoint] posenc-tiny-lm.training.corpus_byte_counts = missing"});
  bad = {};
  bad.string_keys["posenc-tiny-lm.d_model"] = "16";  // a string where a number belongs
  load_error(bad, {"[checkpoint] posenc-tiny-lm.d_model = non-numeric: must be a number"});
  bad = {};
  bad.reshape_tensor = "blk.1.ffn_up.weight";
  load_error(bad, {"bad.gguf: [checkpoint] blk.1.ffn_up.weight shape = [1, 384]: must be [24, 16] for this config"});
  bad = {};
  bad.drop_tensor = "output_norm.weight";
  load_error(bad, {"bad.gguf: [checkpoint] output_norm.weight = missing: a rope model of this config has this tensor"});
  bad = {};
  bad.extra_tensor = true;
  load_error(bad, {"[checkpoint] tensor = \"blk.9.attn_qkv.weight\": is not part of a rope model"});
  // A checkpoint of another scheme's tensors: the first missing one is named.
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.string_keys["posenc-tiny-lm.scheme"] = "kerple";
  load_error(bad, {"bad.gguf: [checkpoint] blk.0.attn_kerple_r1.weight = missing: a kerple model of this config"});
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.int_keys["posenc-tiny-lm.fire_mlp_width"] = 0;
  load_error(bad, {"bad.gguf: [tiny_lm] fire_mlp_width = 0: must be in [1, "});
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.drop_key = "posenc-tiny-lm.fire_c";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.fire_c = missing"});
  // A config that breaks its own rules: heads not dividing d_model.
  bad = {};
  bad.int_keys["posenc-tiny-lm.heads"] = 3;
  load_error(bad, {"bad.gguf: [tiny_lm] heads = 3: must divide d_model = 16"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.layers"] = -1;
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.layers = -1: must be a whole number >= 0"});
  // int64 edges, exact in the message (read through a double, 2^63 - 1 was
  // reported as 9223372036854775808).
  bad = {};
  bad.int_keys["posenc-tiny-lm.layers"] = std::numeric_limits<std::int64_t>::max();
  load_error(bad, {"bad.gguf: [tiny_lm] layers = 9223372036854775807: must be in [1, 1024]"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.training.tokens"] = std::numeric_limits<std::int64_t>::min();
  load_error(bad, {"[checkpoint] posenc-tiny-lm.training.tokens = -9223372036854775808: must be a whole number >= 0"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.training.tokens"] = std::numeric_limits<std::int64_t>::max();
  bad.Write(path);
  EXPECT_EQ(LoadTinyLmCheckpoint(path).info.tokens, std::numeric_limits<std::int64_t>::max());
}

TEST(TinyLmCheckpoint, TruncatedAndMissingFiles) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(KerpleScheme{});
  SaveTinyLmCheckpoint(dir / "good.gguf", config, InitTinyLm(config, 1), SomeInfo());
  const auto size = static_cast<std::int64_t>(fs::file_size(dir / "good.gguf"));
  for (const std::int64_t keep : {std::int64_t{10}, size / 2, size - 1}) {
    SCOPED_TRACE(keep);
    fs::copy_file(dir / "good.gguf", dir / "cut.gguf", fs::copy_options::overwrite_existing);
    fs::resize_file(dir / "cut.gguf", static_cast<std::uintmax_t>(keep));
    ExpectError([&] { LoadTinyLmCheckpoint(dir / "cut.gguf"); }, {"cut.gguf"});
  }
  ExpectError([&] { LoadTinyLmCheckpoint(dir / "none.gguf"); }, {"none.gguf"});
  // Saving into a missing directory names the path and leaves nothing.
  ExpectError([&] { SaveTinyLmCheckpoint(dir / "no/such.gguf", config, InitTinyLm(config, 1), SomeInfo()); },
              {"no/such.gguf"});
}

}  // namespace
}  // namespace posenc
