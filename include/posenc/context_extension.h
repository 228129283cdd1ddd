// Training-free context extension (reviewed in Su Jianlin's "Transformer升级之路：16",
// kexue.fm/archives/9948): each method is a way to run a
// RoPE model past its training length L_train, expressed as the attention
// options of every layer (a frequency table, a ReRoPE distance map, a mask,
// log-n query scaling).
//
// Parameters not given default from L_train and the target length L (the
// longest sequence the model will see), with s = max(1, L / L_train):
//   none          the model as trained (direct extrapolation past L_train)
//   linear        position interpolation, factor = s
//   ntk           NTK-aware base change, alpha = s (the lowest frequency is
//                 interpolated by exactly s)
//   dynamic-ntk   Hugging Face's dynamic NTK at length L, factor = 2 (the
//                 value of its documentation; alpha = 2 L / L_train - 1)
//   yarn          YaRN, factor = s, beta_fast 32, beta_slow 1,
//                 attention factor 0.1 ln s + 1
//   rerope        ReRoPE, window = L_train / 2 (Su's w = 256 for a model
//                 trained on 512 tokens)
//   leaky-rerope  Leaky ReRoPE, window = L_train / 2, k such that the longest
//                 distance L - 1 reads as L_train - 1 (k = 1, plain RoPE,
//                 when L <= L_train)
//   window        sliding-window truncation, window = L_train keys
//   lambda        the Λ mask: sinks = 4 first tokens + window = L_train keys;
//                 the sinks' distances read as L_train - 1 (LM-Infinite's
//                 distance cap, as a ReRoPE map)
//   self-extend   Self-Extend (Jin et al. 2024), neighbour window =
//                 L_train / 2, group = the smallest G that keeps every
//                 grouped distance inside the training length:
//                 floor((L - 1) / G) + W - floor(W / G) <= L_train - 1
//                 (G = 1, plain RoPE, when L <= L_train)
// and `logn` adds log-n query scaling with L_train to any of them.
//
// Text form (CLI, Python): NAME[:key=value,...][,logn], e.g. "yarn",
// "yarn:factor=4", "leaky-rerope:window=512,k=16", "lambda:sinks=8,logn",
// "ntk:logn", "self-extend:group=8,window=1024". Keys: factor (linear,
// ntk, dynamic-ntk, yarn), window (rerope, leaky-rerope, window, lambda,
// self-extend), k (leaky-rerope), sinks (lambda), group (self-extend).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_spec.h"

namespace posenc {

enum class ExtensionMethod {
  kNone,
  kLinear,
  kNtk,
  kDynamicNtk,
  kYarn,
  kReRope,
  kLeakyReRope,
  kWindow,
  kLambda,
  kSelfExtend,
};

// The parameters of the text form (NAME:factor=F,window=W,k=K,sinks=S,group=G).
enum class ExtensionParameter { kFactor, kWindow, kK, kSinks, kGroup };
std::string_view ExtensionParameterName(ExtensionParameter parameter);  // "factor"

// The one table of methods: their names, the parameters each takes and a
// line on what each changes. Parsing, validation messages, the CLI's help
// and the Python docstrings are all made from it.
struct ExtensionMethodInfo {
  ExtensionMethod method;
  std::string_view name;                       // "leaky-rerope"
  std::vector<ExtensionParameter> parameters;  // what NAME:key=value may set
  std::string_view summary;                    // what changes, one line
};
const std::vector<ExtensionMethodInfo>& ExtensionMethodTable();

std::string_view ExtensionMethodName(ExtensionMethod method);  // "leaky-rerope"
// Throws posenc::Error listing the known names.
ExtensionMethod ParseExtensionMethod(std::string_view name);
// Every method, in the order of the table.
const std::vector<ExtensionMethod>& AllExtensionMethods();
// "none | linear | ... | self-extend, with optional :factor=F,window=W,k=K,sinks=S,group=G
// and ,logn": the text form in one line, for help texts.
std::string ExtensionMethodsSynopsis();

struct ContextExtension {
  ExtensionMethod method = ExtensionMethod::kNone;
  std::optional<double> factor;
  std::optional<std::int64_t> window;
  std::optional<double> k;
  std::optional<std::int64_t> sinks;
  std::optional<std::int64_t> group;
  bool logn = false;
  // Throws posenc::Error for a parameter the method does not take or a value
  // out of range (factor < 1, window < 1, k < 1, sinks < 0, group < 1).
  void Validate() const;
};

// Parses the text form; throws posenc::Error naming the bad part.
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
};

// model_rope: the model's RoPE spec (its own scaling must be none);
// train_length: L_train; target_length: L. Throws posenc::Error naming the
// parameter (e.g. window >= L_train for rerope, a model spec that already
// scales).
ExtensionPlan PlanContextExtension(const ContextExtension& extension, const RopeSpec& model_rope,
                                   std::int64_t train_length, std::int64_t target_length);

// Whether the plan computes what the model's own RoPE computes on sequences
// of at most `length` tokens: the same frequencies and attention factor, no
// distance below `length` remapped, no key masked, no log-n scale (which is 1
// up to the training length). Within the training length most methods are
// the model itself, and a study need not run them again.
bool SameAsModelRope(const ExtensionPlan& plan, const RopeSpec& model_rope, std::int64_t length);

}  // namespace posenc
