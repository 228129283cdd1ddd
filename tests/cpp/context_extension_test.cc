// Context-extension methods: the text form, the defaults taken from the
// training and target lengths, the attention options they become, errors.
#include "posenc/context_extension.h"

#include <cmath>

#include "posenc/rope_frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

RopeSpec SmolLmRope() {
  RopeSpec spec;
  spec.theta = 100000;
  spec.head_dim = 64;
  spec.layout = RopeLayout::kInterleaved;
  return spec;
}

ExtensionPlan Plan(const char* text, std::int64_t target) {
  return PlanContextExtension(ParseContextExtension(text), SmolLmRope(), 8192, target);
}

// The resolved method of a plan, as the method it is.
template <class Method>
Method Resolved(const ExtensionPlan& plan) {
  return std::get<Method>(plan.resolved.method);
}

TEST(ContextExtension, ParsesAndFormatsTheTextForm) {
  for (const char* text :
       {"none", "linear", "linear:factor=4", "ntk:factor=2.5,logn", "dynamic-ntk", "yarn:logn", "rerope:window=512",
        "leaky-rerope:window=512,k=16", "window:window=100", "lambda:window=4096,sinks=8", "lambda:logn", "self-extend",
        "self-extend:window=1024,group=8", "self-extend:group=4,logn", "self-extend-kv",
        "self-extend-kv:window=1024,group=8"}) {
    EXPECT_EQ(FormatContextExtension(ParseContextExtension(text)), text);
  }
  EXPECT_EQ(FormatContextExtension(ParseContextExtension("ntk+logn")), "ntk:logn");
  EXPECT_EQ(std::get<LeakyReRopeMethod>(ParseContextExtension("leaky-rerope:k=16").method).k, 16.0);
  EXPECT_EQ(AllExtensionMethods().size(), 11u);
  for (const ExtensionMethod& method : AllExtensionMethods()) {
    EXPECT_EQ(ParseExtensionMethod(ExtensionMethodName(method)), method);
  }
}

TEST(ContextExtension, RejectsBadTextWithTheRule) {
  ExpectError([] { ParseContextExtension("ntk-by-parts"); }, {"method = \"ntk-by-parts\"", "must be one of none"});
  ExpectError([] { ParseContextExtension("linear:factor=0"); }, {"factor = 0", ">= 1"});
  ExpectError([] { ParseContextExtension("linear:factor=-2"); }, {"factor = -2", ">= 1"});
  ExpectError([] { ParseContextExtension("yarn:factor=abc"); }, {"factor = \"abc\"", "number"});
  ExpectError([] { ParseContextExtension("rerope:factor=2"); }, {"factor = 2", "not rerope"});
  ExpectError([] { ParseContextExtension("linear:window=8"); }, {"window = 8", "not linear"});
  ExpectError([] { ParseContextExtension("leaky-rerope:k=0.5"); }, {"k = 0.5", ">= 1"});
  ExpectError([] { ParseContextExtension("self-extend:group=0"); }, {"group = 0", ">= 1"});
  ExpectError([] { ParseContextExtension("rerope:group=2"); },
              {"group = 2", "parameter of self-extend and self-extend-kv, not rerope"});
  ExpectError([] { ParseContextExtension("window:window=0"); }, {"window = 0", ">= 1"});
  ExpectError([] { ParseContextExtension("lambda:sinks=-1"); }, {"sinks = -1", ">= 0"});
  ExpectError([] { ParseContextExtension("lambda:window=1"); }, {"window = 1", ">= 2"});
  // A factor below 1 shrinks the context; a key given twice is a mistake.
  ExpectError([] { ParseContextExtension("yarn:factor=1e-300"); }, {"factor = 1e-300", ">= 1"});
  ExpectError([] { ParseContextExtension("linear:factor=0.5"); }, {"factor = 0.5", ">= 1"});
  ExpectError([] { ParseContextExtension("yarn:factor=2,factor=3"); }, {"yarn:factor=2,factor=3", "factor twice"});
  ExpectError([] { ParseContextExtension("ntk:logn+logn"); }, {"logn twice"});
  ExpectError([] { ParseContextExtension("yarn:beta=3"); }, {"\"beta\"", "factor, window, k, sinks"});
  ExpectError([] { ParseContextExtension("yarn:factor"); }, {"key=value"});
  ExpectError([] { ParseContextExtension("yarn:logn,"); }, {"separator"});
}

// A parameter of either type (whole numbers or not) set to `value`.
template <class T>
void Set(std::optional<T>& member, double value) {
  member = static_cast<T>(value);
}

// The text form is made from each method's field list: every parameter of
// every method formats, parses back and keeps its rule, and the keys come
// in the one order that the grids' cell keys (hashes of these texts) use.
TEST(ContextExtension, EveryParameterOfEveryMethodRoundTripsWithItsRule) {
  EXPECT_EQ(ExtensionMethodsSynopsis(),
            "none | linear | ntk | dynamic-ntk | yarn | rerope | leaky-rerope | window | lambda | self-extend | "
            "self-extend-kv, with optional :factor=F,window=W,k=K,sinks=S,group=G and ,logn");
  for (const ExtensionMethod& method : AllExtensionMethods()) {
    ContextExtension full{.method = method, .logn = true};
    std::size_t fields = 0;
    VisitMethodFields(full.method, [&](const ConfigField& field, auto& member) {
      Set(member, field.minimum + 3);  // inside every rule
      ++fields;
    });
    const std::string text = FormatContextExtension(full);
    EXPECT_EQ(FormatContextExtension(ParseContextExtension(text)), text);
    for (std::size_t i = 0; i < fields; ++i) {
      ContextExtension bad = full;
      std::string key, rule;
      std::size_t at = 0;
      VisitMethodFields(bad.method, [&](const ConfigField& field, auto& member) {
        if (at++ != i) return;
        Set(member, field.minimum - 1);
        key = field.key;
        rule = field.rule;
      });
      ExpectError([&] { bad.Validate(); }, {(key + " = ").c_str(), rule.c_str()});
      ExpectError([&] { ParseContextExtension(FormatContextExtension(bad)); }, {(key + " = ").c_str(), rule.c_str()});
    }
  }
  // Lambda's window has lambda's rule below 1 too (it said "must be >= 1").
  ExpectError([] { ParseContextExtension("lambda:window=0"); }, {"window = 0", "must be >= 2 for lambda"});
}

TEST(ContextExtension, ParsesAListSeparatedBySemicolons) {
  const auto list = ParseContextExtensionList("none; yarn:factor=2,logn ;rerope:window=512");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(FormatContextExtension(list[0]), "none");
  EXPECT_EQ(FormatContextExtension(list[1]), "yarn:factor=2,logn");
  EXPECT_EQ(FormatContextExtension(list[2]), "rerope:window=512");
  ExpectError([] { ParseContextExtensionList("none;;yarn"); }, {"methods = \"none;;yarn\"", "none of them empty"});
  ExpectError([] { ParseContextExtensionList("none;"); }, {"none of them empty"});
  ExpectError([] { ParseContextExtensionList("none;ntk+logn;ntk:logn"); }, {"lists ntk:logn twice"});
  ExpectError([] { ParseContextExtensionList("none;yarn2"); }, {"method = \"yarn2\""});
}

TEST(ContextExtension, DefaultsFollowTrainingAndTargetLengths) {
  // s = 16384 / 8192 = 2.
  const auto linear = Plan("linear", 16384);
  EXPECT_EQ(Resolved<LinearMethod>(linear).factor, 2.0);
  const auto& rope = std::get<RopeEncoding>(linear.attention.encoding);
  EXPECT_DOUBLE_EQ(rope.frequencies.inv_freq[0], 0.5);                  // theta^0 / 2
  EXPECT_EQ(Resolved<LinearMethod>(Plan("linear", 4096)).factor, 1.0);  // never compresses below the training length
  EXPECT_EQ(Resolved<NtkMethod>(Plan("ntk", 12288)).factor, 1.5);
  EXPECT_EQ(Resolved<YarnMethod>(Plan("yarn", 12288)).factor, 1.5);
  EXPECT_NEAR(std::get<RopeEncoding>(Plan("yarn", 12288).attention.encoding).frequencies.attention_factor,
              0.1 * std::log(1.5) + 1, 1e-12);
  EXPECT_EQ(Resolved<DynamicNtkMethod>(Plan("dynamic-ntk", 12288)).factor, 2.0);

  const auto rerope = Plan("rerope", 16384);
  EXPECT_EQ(Resolved<ReRopeMethod>(rerope).window, 4096);
  EXPECT_EQ(std::get<ReRopeEncoding>(rerope.attention.encoding).window, 4096);
  EXPECT_FALSE(std::get<ReRopeEncoding>(rerope.attention.encoding).leak.has_value());
  EXPECT_EQ(rerope.attention.mask.window, 0);

  // Leaky: the longest distance 16383 reads as 4096 + (16383 - 4096) / k = 8191.
  const auto leaky = Plan("leaky-rerope", 16384);
  const double k = *std::get<ReRopeEncoding>(leaky.attention.encoding).leak;
  EXPECT_DOUBLE_EQ(*Resolved<LeakyReRopeMethod>(leaky).k, k);
  EXPECT_NEAR(4096 + (16383 - 4096) / k, 8191, 1e-9);
  // Within the training length Leaky ReRoPE is plain RoPE (k = 1).
  const auto short_leaky = Plan("leaky-rerope", 8192);
  EXPECT_EQ(Resolved<LeakyReRopeMethod>(short_leaky).k, 1.0);
  EXPECT_TRUE(std::holds_alternative<RopeEncoding>(short_leaky.attention.encoding));

  const auto window = Plan("window", 16384);
  EXPECT_EQ(window.attention.mask.window, 8192);
  EXPECT_TRUE(std::holds_alternative<RopeEncoding>(window.attention.encoding));

  const auto lambda = Plan("lambda", 16384);
  EXPECT_EQ(lambda.attention.mask.window, 8192);
  EXPECT_EQ(lambda.attention.mask.sinks, 4);
  EXPECT_EQ(std::get<ReRopeEncoding>(lambda.attention.encoding).window, 8191);

  // Self-Extend, W = 4096 at 16384 tokens: G = 3 would read the longest
  // distance as 5461 + 4096 - 1365 = 8192 > 8191, so G = 4 (7167).
  const auto grouped = Plan("self-extend", 16384);
  EXPECT_EQ(Resolved<SelfExtendMethod>(grouped).window, 4096);
  EXPECT_EQ(Resolved<SelfExtendMethod>(grouped).group, 4);
  const auto& self_extend = std::get<SelfExtendEncoding>(grouped.attention.encoding);
  EXPECT_EQ(self_extend.group, 4);
  EXPECT_EQ(self_extend.window, 4096);
  EXPECT_EQ(grouped.attention.mask.window, 0);
  EXPECT_EQ(Resolved<SelfExtendMethod>(Plan("self-extend", 8192)).group, 1);
  EXPECT_EQ(Resolved<SelfExtendMethod>(Plan("self-extend", 12288)).group, 2);  // 6143 + 4096 - 2048 = 8191
  EXPECT_EQ(Resolved<SelfExtendMethod>(Plan("self-extend:group=16,window=512", 16384)).group, 16);

  // llama.cpp's form, W = 4096 at 16384 tokens: a query at p sits c = p /
  // 4096 blocks of 4096 - 4096 / G positions back; G = 2 would read the
  // longest distance (p = 16383 to key 0) as 16383 - 3 * 2048 = 10239 >
  // 8191, G = 4 as 16383 - 3 * 3072 = 7167 (3 does not divide 4096).
  const auto kv_shift = Plan("self-extend-kv", 16384);
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(kv_shift).window, 4096);
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(kv_shift).group, 4);
  const auto& kv_encoding = std::get<SelfExtendEncoding>(kv_shift.attention.encoding);
  EXPECT_EQ(kv_encoding.form, SelfExtendForm::kKvShift);
  EXPECT_EQ(kv_encoding.group, 4);
  EXPECT_EQ(kv_encoding.window, 4096);
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(Plan("self-extend-kv", 8192)).group, 1);
  // p = 12287: 12287 - 2 * 2048 = 8191.
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(Plan("self-extend-kv", 12288)).group, 2);
  // p = 14335: 14335 - 3 * 2048 = 8191; p = 14336 needs G = 4.
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(Plan("self-extend-kv", 14336)).group, 2);
  EXPECT_EQ(Resolved<SelfExtendKvShiftMethod>(Plan("self-extend-kv", 14337)).group, 4);

  EXPECT_EQ(Plan("ntk:logn", 16384).attention.logn_train_length, 8192);
  EXPECT_EQ(Plan("ntk", 16384).attention.logn_train_length, 0);
  EXPECT_EQ(FormatContextExtension(Plan("leaky-rerope:window=512,k=16", 16384).resolved),
            "leaky-rerope:window=512,k=16");
}

TEST(ContextExtension, KnowsWhenAPlanIsTheModelItself) {
  const auto same = [](const char* text, std::int64_t length) {
    return SameAsModelRope(Plan(text, length), SmolLmRope(), length);
  };
  for (const char* text : {"none", "linear", "ntk", "dynamic-ntk", "yarn", "leaky-rerope", "window", "lambda",
                           "ntk:logn", "self-extend", "self-extend-kv"}) {
    EXPECT_TRUE(same(text, 8192)) << text;
    EXPECT_TRUE(same(text, 100)) << text;
    EXPECT_FALSE(same(text, 8193) && std::string(text) != "none") << text;
  }
  EXPECT_TRUE(same("none", 100000));
  EXPECT_TRUE(same("rerope", 4097));  // distances up to 4096 = window read as themselves
  EXPECT_FALSE(same("rerope", 4098));
  EXPECT_TRUE(same("self-extend:group=4", 4097));
  EXPECT_FALSE(same("self-extend:group=4", 4098));
  // llama.cpp's form groups the first block once a query reaches p = 4096.
  EXPECT_TRUE(same("self-extend-kv:group=4", 4096));
  EXPECT_FALSE(same("self-extend-kv:group=4", 4097));
  EXPECT_FALSE(same("linear:factor=2", 100));
  EXPECT_FALSE(same("window:window=50", 100));

  // Gemma 3's global layers (head_dim 256, base 1e6, 32,768 tokens): YaRN at
  // factor 1 blends x / 1 and x into x (1 - w) + x w, an ulp off x for some
  // pairs, and is still the model itself.
  const RopeSpec gemma{.theta = 1e6, .head_dim = 256, .rotary_dim = 256, .layout = RopeLayout::kHalfSplit};
  const ExtensionPlan yarn = PlanContextExtension(ParseContextExtension("yarn"), gemma, 32768, 16384);
  EXPECT_NE(std::get<RopeEncoding>(yarn.attention.encoding).frequencies.inv_freq,
            ComputeRopeFrequencies(gemma).inv_freq);
  EXPECT_TRUE(SameAsModelRope(yarn, gemma, 16384));
}

TEST(ContextExtension, RejectsPlansThatCannotWork) {
  ExpectError([] { Plan("rerope:window=8192", 16384); }, {"window = 8192", "< the training length 8192"});
  ExpectError([] { Plan("self-extend:window=9000", 16384); }, {"window = 9000", "< the training length 8192"});
  ExpectError([] { Plan("self-extend-kv:group=3", 16384); },
              {"group = 3", "must divide the window 4096", "grp_attn_w % grp_attn_n"});
  ExpectError([] { Plan("self-extend-kv:window=8", 1000000); }, {"target_length = 1000000", "self-extend-kv"});
  // A model that scales its RoPE is extended on top of it, except where the
  // pair does not compose (scaled_extension_test.cc).
  RopeSpec scaled = SmolLmRope();
  scaled.scaling = DynamicNtkScaling{2, 8192};
  ExpectError([&] { PlanContextExtension(ParseContextExtension("yarn"), scaled, 8192, 16384); },
              {"method = \"yarn\"", "does not compose with the model's rope scaling \"dynamic\""});
  EXPECT_NO_THROW(PlanContextExtension(ParseContextExtension("none"), scaled, 8192, 16384));
  ExpectError([] { PlanContextExtension({}, SmolLmRope(), 1, 10); }, {"train_length = 1"});
  ExpectError([] { PlanContextExtension({}, SmolLmRope(), 8192, 0); }, {"target_length = 0"});
}

}  // namespace
}  // namespace posenc
