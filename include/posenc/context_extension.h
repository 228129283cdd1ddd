// Training-free context extension (reviewed in Su Jianlin's "Transformer升级之路：16",
// kexue.fm/archives/9948): each method is a way to run a
// RoPE model past its training length L_train, expressed as the attention
// options of every layer (a frequency table, a ReRoPE distance map, a mask,
// log-n query scaling).
//
// One struct per method: its name (kName), a line on what it changes
// (kSummary), its parameters as a field list (VisitFields, config_field.h:
// the text form's keys and their rules) and, in context_extension.cc, its
// plan. ExtensionMethod is the variant of them all: parsing, formatting,
// validation, the help texts and the Python docstrings are loops over the
// field lists, and the plan visits every alternative by name, so a method
// added here does not compile until it has one.
//
// A parameter not given defaults from L_train and the target length L (the
// longest sequence the model will see), with s = max(1, L / L_train); each
// struct says how. `logn` adds log-n query scaling with L_train to any
// method.
//
// Text form (CLI, Python): NAME[:key=value,...][,logn], e.g. "yarn",
// "yarn:factor=4", "leaky-rerope:window=512,k=16", "lambda:sinks=8,logn",
// "ntk:logn", "self-extend:group=8,window=1024",
// "self-extend-kv:group=4,window=1024". Formatted, the parameters
// that are set come in the order factor, window, k, sinks, group, then logn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "posenc/attention.h"
#include "posenc/config_field.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"

namespace posenc {

// The parameters of the text form, with their rules: factor (linear, ntk,
// dynamic-ntk, yarn), window (rerope, leaky-rerope, window, lambda,
// self-extend: distances or keys kept as trained), k (leaky-rerope: how
// slowly distances past the window grow), sinks (lambda: the first keys
// every query sees), group (self-extend: positions that share one past the
// window).
inline constexpr ConfigField kExtensionFactor{
    .key = "factor",
    .minimum = 1,
    .rule = "must be a finite number >= 1 (the ratio of the target length to the trained one)"};
inline constexpr ConfigField kExtensionWindow{.key = "window", .minimum = 1, .rule = "must be >= 1"};
inline constexpr ConfigField kLambdaWindow{
    .key = "window", .minimum = 2, .rule = "must be >= 2 for lambda (the sinks read as distance window - 1)"};
inline constexpr ConfigField kExtensionK{
    .key = "k", .minimum = 1, .rule = "must be >= 1 (1: plain RoPE, larger: slower growth)"};
inline constexpr ConfigField kExtensionSinks{.key = "sinks", .minimum = 0, .rule = "must be >= 0"};
inline constexpr ConfigField kExtensionGroup{.key = "group", .minimum = 1, .rule = "must be >= 1 (1: plain RoPE)"};

// What a method changes, which decides what it composes with when the
// model already scales its RoPE (docs/composition.md): a frequency method
// rescales the model's inv_freq table, a position method remaps distances
// or masks keys and keeps whatever table the model has.
enum class ExtensionKind { kModel, kFrequencies, kPositions };

// The parameter of the frequency methods (linear, ntk, dynamic-ntk, yarn):
// the scale factor s. A method's parameters are one list shared by the
// methods that take them, so each key has one rule and one spelling.
struct FactorParameter {
  std::optional<double> factor;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(kExtensionFactor, self.factor);
  }
  bool operator==(const FactorParameter&) const = default;
};

// The parameter of the methods that keep a window of near keys at true
// distances (rerope, leaky-rerope, window, both Self-Extends).
struct WindowParameter {
  std::optional<std::int64_t> window;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(kExtensionWindow, self.window);
  }
  bool operator==(const WindowParameter&) const = default;
};

// The model as trained (direct extrapolation past L_train).
struct NoneMethod {
  static constexpr std::string_view kName = "none";
  static constexpr ExtensionKind kKind = ExtensionKind::kModel;
  static constexpr std::string_view kSummary = "direct extrapolation: the model's own RoPE at every position";
  template <class Self, class Visitor>
  static void VisitFields(Self& /*self*/, Visitor&& /*visit*/) {}
  bool operator==(const NoneMethod&) const = default;
};

// Position interpolation; factor = s.
struct LinearMethod : FactorParameter {
  static constexpr std::string_view kName = "linear";
  static constexpr ExtensionKind kKind = ExtensionKind::kFrequencies;
  static constexpr std::string_view kSummary = "position interpolation: inv_freq / factor";
  bool operator==(const LinearMethod&) const = default;
};

// NTK-aware base change; alpha = factor = s (the lowest frequency is
// interpolated by exactly s).
struct NtkMethod : FactorParameter {
  static constexpr std::string_view kName = "ntk";
  static constexpr ExtensionKind kKind = ExtensionKind::kFrequencies;
  static constexpr std::string_view kSummary = "NTK-aware base: theta * factor^(d/(d-2))";
  bool operator==(const NtkMethod&) const = default;
};

// Hugging Face's dynamic NTK at length L; factor = 2 (the value of its
// documentation; alpha = 2 L / L_train - 1).
struct DynamicNtkMethod : FactorParameter {
  static constexpr std::string_view kName = "dynamic-ntk";
  static constexpr ExtensionKind kKind = ExtensionKind::kFrequencies;
  static constexpr std::string_view kSummary = "NTK base recomputed from the current length (Hugging Face's dynamic)";
  bool operator==(const DynamicNtkMethod&) const = default;
};

// YaRN; factor = s, beta_fast 32, beta_slow 1, attention factor
// 0.1 ln s + 1.
struct YarnMethod : FactorParameter {
  static constexpr std::string_view kName = "yarn";
  static constexpr ExtensionKind kKind = ExtensionKind::kFrequencies;
  static constexpr std::string_view kSummary =
      "YaRN: interpolate slow pairs, keep fast ones, attention factor 0.1 ln(factor) + 1";
  bool operator==(const YarnMethod&) const = default;
};

// ReRoPE; window = L_train / 2 (Su's w = 256 for a model trained on 512
// tokens).
struct ReRopeMethod : WindowParameter {
  static constexpr std::string_view kName = "rerope";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary = "ReRoPE: distances past the window read as the window";
  bool operator==(const ReRopeMethod&) const = default;
};

// Leaky ReRoPE; window = L_train / 2, k such that the longest distance
// L - 1 reads as L_train - 1 (k = 1, plain RoPE, when L <= L_train).
struct LeakyReRopeMethod : WindowParameter {
  static constexpr std::string_view kName = "leaky-rerope";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary = "Leaky ReRoPE: distances past the window grow by 1/k";
  std::optional<double> k;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    WindowParameter::VisitFields(self, visit);
    visit(kExtensionK, self.k);
  }
  bool operator==(const LeakyReRopeMethod&) const = default;
};

// Sliding-window truncation; window = L_train keys.
struct WindowMethod : WindowParameter {
  static constexpr std::string_view kName = "window";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary = "sliding window: each query sees the last `window` keys";
  bool operator==(const WindowMethod&) const = default;
};

// The Λ mask; sinks = 4 first tokens + window = L_train keys; the sinks'
// distances read as window - 1 (LM-Infinite's distance cap, as a ReRoPE
// map).
struct LambdaMethod {
  static constexpr std::string_view kName = "lambda";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary =
      "the Λ mask: the first `sinks` keys and the last `window` keys, sinks at distance window - 1";
  std::optional<std::int64_t> window;
  std::optional<std::int64_t> sinks;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(kLambdaWindow, self.window);
    visit(kExtensionSinks, self.sinks);
  }
  bool operator==(const LambdaMethod&) const = default;
};

// The parameters of both Self-Extends: the neighbour window and the group.
struct SelfExtendParameters : WindowParameter {
  std::optional<std::int64_t> group;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    WindowParameter::VisitFields(self, visit);
    visit(kExtensionGroup, self.group);
  }
  bool operator==(const SelfExtendParameters&) const = default;
};

// Self-Extend (Jin et al. 2024); neighbour window = L_train / 2, group =
// the smallest G that keeps every grouped distance inside the training
// length: floor((L - 1) / G) + W - floor(W / G) <= L_train - 1 (G = 1,
// plain RoPE, when L <= L_train).
struct SelfExtendMethod : SelfExtendParameters {
  static constexpr std::string_view kName = "self-extend";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary =
      "Self-Extend: exact distances inside the window, positions floor(p / group) beyond it";
  bool operator==(const SelfExtendMethod&) const = default;
};

// Self-Extend as llama.cpp runs it (--grp-attn-n G --grp-attn-w W: shifts
// and divisions of the KV cache's positions every W tokens; attention.h's
// SelfExtendForm::kKvShift): the query's block of W keys at true
// distances, the earlier blocks grouped. Neighbour window = L_train / 2,
// group = the smallest divisor G of W that keeps every grouped distance
// inside the training length (G = 1, plain RoPE, when L <= W).
struct SelfExtendKvShiftMethod : SelfExtendParameters {
  static constexpr std::string_view kName = "self-extend-kv";
  static constexpr ExtensionKind kKind = ExtensionKind::kPositions;
  static constexpr std::string_view kSummary =
      "Self-Extend as llama.cpp runs it: the KV cache's positions divided by group every window tokens";
  bool operator==(const SelfExtendKvShiftMethod&) const = default;
};

using ExtensionMethod =
    std::variant<NoneMethod, LinearMethod, NtkMethod, DynamicNtkMethod, YarnMethod, ReRopeMethod, LeakyReRopeMethod,
                 WindowMethod, LambdaMethod, SelfExtendMethod, SelfExtendKvShiftMethod>;

// visitor(ConfigField, member&) for each parameter of the method that
// `method` holds (const or not); members are std::optional<std::int64_t>
// or std::optional<double>, unset for "the default".
template <class Method, class Visitor>
requires std::is_same_v<std::remove_const_t<Method>, ExtensionMethod>
void VisitMethodFields(Method& method, Visitor&& visit) {
  std::visit([&](auto& alternative) { alternative.VisitFields(alternative, visit); }, method);
}

std::string_view ExtensionMethodName(const ExtensionMethod& method);  // "leaky-rerope"
ExtensionKind ExtensionMethodKind(const ExtensionMethod& method);
// The method called `name`, every parameter unset. Throws posenc::Error
// listing the known names.
ExtensionMethod ParseExtensionMethod(std::string_view name);
// Every method, every parameter unset, in the variant's order.
const std::vector<ExtensionMethod>& AllExtensionMethods();

// The methods as a table, for the Python docstrings: the name, the keys
// of its parameters and its summary.
struct ExtensionMethodInfo {
  std::string_view name;                     // "leaky-rerope"
  std::vector<std::string_view> parameters;  // "window", "k": what NAME:key=value may set
  std::string_view summary;                  // what changes, one line
};
const std::vector<ExtensionMethodInfo>& ExtensionMethodTable();
// "none | linear | ... | self-extend-kv, with optional :factor=F,window=W,k=K,sinks=S,group=G
// and ,logn": the text form in one line, for help texts.
std::string ExtensionMethodsSynopsis();

struct ContextExtension {
  ExtensionMethod method;  // none
  bool logn = false;
  // Throws posenc::Error for a parameter out of its range (its field's rule).
  void Validate() const;
};

// Whether `extension` leaves the model as trained (none without logn): its
// own attention runs, whatever its RoPE scaling.
bool IsModelAsTrained(const ContextExtension& extension);

// Parses the text form; throws posenc::Error naming the bad part (a
// parameter the method does not take names the methods that do).
ContextExtension ParseContextExtension(std::string_view text);
// A list of methods separated by ';' ("none;yarn:factor=2,logn;lambda"): ','
// already separates a method's parameters. Spaces around items are ignored.
// Throws posenc::Error for an empty item or a method listed twice (same text
// form once parsed).
std::vector<ContextExtension> ParseContextExtensionList(std::string_view text);
// The text form, listing only the parameters that are set.
std::string FormatContextExtension(const ContextExtension& extension);

// The method with every default filled in, and the attention that runs it.
struct ExtensionPlan {
  ContextExtension resolved;  // every parameter of the method set
  AttentionOptions attention;
  // The L_train the plan used: the caller's, or for a model whose RoPE
  // already scales, the length its scaling states (EffectiveContextLength).
  std::int64_t train_length = 0;
};

// model_rope: the model's RoPE spec; train_length: L_train; target_length:
// L. A model whose RoPE already scales is extended on top of its scaling
// (docs/composition.md): L_train is then EffectiveContextLength(model_rope)
// where the scaling states one (llama3, yarn, longrope: original length x
// factor; `train_length` where it does not: linear, ntk, factors, dynamic),
// a frequency method rescales the model's scaled inv_freq by the new factor
// L / L_train, and a position method keeps the model's table. Throws
// posenc::Error naming the parameter (e.g. window >= L_train for rerope),
// and naming both scalings for a pair that does not compose (a frequency
// method over dynamic NTK, whose table follows the current length).
ExtensionPlan PlanContextExtension(const ContextExtension& extension, const RopeSpec& model_rope,
                                   std::int64_t train_length, std::int64_t target_length);

namespace reference {
// The frequency table and attention factor of a frequency method (`method`,
// resolved: its factor set) over a model's own scaling, in float64 from the
// formulas of docs/composition.md, computed from the model's table at L
// without the planner's code: the oracle of the compositions' tests.
RopeFrequencies ComposedFrequencies(const RopeSpec& model_rope, const ExtensionMethod& method,
                                    std::int64_t train_length, std::int64_t target_length);
}  // namespace reference

// Whether the plan computes what the model's own RoPE computes on sequences
// of at most `length` tokens: the same frequencies and attention factor, no
// distance below `length` remapped, no key masked, no log-n scale (which is 1
// up to the training length). Within the training length most methods are
// the model itself, and a study need not run them again.
bool SameAsModelRope(const ExtensionPlan& plan, const RopeSpec& model_rope, std::int64_t length);

}  // namespace posenc
