// Context-extension methods as attention options (the defaults are stated in
// include/posenc/context_extension.h).
#include "posenc/context_extension.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <variant>

#include "posenc/error.h"
#include "posenc/rope_frequencies.h"

namespace posenc {
namespace {

constexpr const char* kOp = "context extension";

// The methods and what each takes (the defaults are in PlanContextExtension).
const std::vector<ExtensionMethodInfo> kMethods = {
    {ExtensionMethod::kNone, "none", {}, "direct extrapolation: the model's own RoPE at every position"},
    {ExtensionMethod::kLinear, "linear", {ExtensionParameter::kFactor}, "position interpolation: inv_freq / factor"},
    {ExtensionMethod::kNtk, "ntk", {ExtensionParameter::kFactor}, "NTK-aware base: theta * factor^(d/(d-2))"},
    {ExtensionMethod::kDynamicNtk,
     "dynamic-ntk",
     {ExtensionParameter::kFactor},
     "NTK base recomputed from the current length (Hugging Face's dynamic)"},
    {ExtensionMethod::kYarn,
     "yarn",
     {ExtensionParameter::kFactor},
     "YaRN: interpolate slow pairs, keep fast ones, attention factor 0.1 ln(factor) + 1"},
    {ExtensionMethod::kReRope,
     "rerope",
     {ExtensionParameter::kWindow},
     "ReRoPE: distances past the window read as the window"},
    {ExtensionMethod::kLeakyReRope,
     "leaky-rerope",
     {ExtensionParameter::kWindow, ExtensionParameter::kK},
     "Leaky ReRoPE: distances past the window grow by 1/k"},
    {ExtensionMethod::kWindow,
     "window",
     {ExtensionParameter::kWindow},
     "sliding window: each query sees the last `window` keys"},
    {ExtensionMethod::kLambda,
     "lambda",
     {ExtensionParameter::kWindow, ExtensionParameter::kSinks},
     "the Λ mask: the first `sinks` keys and the last `window` keys, sinks at distance window - 1"},
    {ExtensionMethod::kSelfExtend,
     "self-extend",
     {ExtensionParameter::kGroup, ExtensionParameter::kWindow},
     "Self-Extend: exact distances inside the window, positions floor(p / group) beyond it"},
};

const ExtensionMethodInfo& InfoOf(ExtensionMethod method) {
  for (const auto& info : kMethods) {
    if (info.method == method) return info;
  }
  ThrowError(kOp, "method", std::to_string(static_cast<int>(method)), "is not a known method");
}

bool Takes(ExtensionMethod method, ExtensionParameter parameter) {
  const auto& parameters = InfoOf(method).parameters;
  return std::find(parameters.begin(), parameters.end(), parameter) != parameters.end();
}

// "linear, ntk, dynamic-ntk and yarn": the methods that take `parameter`.
std::string MethodsTaking(ExtensionParameter parameter) {
  std::vector<std::string_view> names;
  for (const auto& info : kMethods) {
    if (Takes(info.method, parameter)) names.push_back(info.name);
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  }
  return text;
}

// Throws unless `method` takes `parameter`.
void RequireTakes(ExtensionMethod method, ExtensionParameter parameter, const std::string& value) {
  Require(Takes(method, parameter), kOp, ExtensionParameterName(parameter), Verbatim{value},
          "is a parameter of " + MethodsTaking(parameter) + ", not " + std::string(ExtensionMethodName(method)));
}

double ParseNumber(std::string_view key, std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  Require(error == std::errc() && end == text.data() + text.size(), kOp, std::string(key), std::string(text),
          "must be a number");
  return value;
}

std::int64_t ParseCount(std::string_view key, std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  Require(error == std::errc() && end == text.data() + text.size(), kOp, std::string(key), std::string(text),
          "must be a whole number");
  return value;
}

void SetParameter(ContextExtension& ext, std::string_view item) {
  if (item == "logn") {
    ext.logn = true;
    return;
  }
  const auto eq = item.find('=');
  Require(eq != std::string_view::npos, kOp, "parameter", std::string(item),
          "must be key=value (keys: factor, window, k, sinks, group) or logn");
  const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
  if (key == "factor") {
    ext.factor = ParseNumber(key, value);
  } else if (key == "window") {
    ext.window = ParseCount(key, value);
  } else if (key == "k") {
    ext.k = ParseNumber(key, value);
  } else if (key == "sinks") {
    ext.sinks = ParseCount(key, value);
  } else if (key == "group") {
    ext.group = ParseCount(key, value);
  } else {
    ThrowError(kOp, "parameter", FormatValue(std::string(key)), "is not one of factor, window, k, sinks, group, logn");
  }
}

std::string FormatNumber(double value) { return FormatValue(value); }

}  // namespace

std::string_view ExtensionParameterName(ExtensionParameter parameter) {
  switch (parameter) {
    case ExtensionParameter::kFactor: return "factor";
    case ExtensionParameter::kWindow: return "window";
    case ExtensionParameter::kK: return "k";
    case ExtensionParameter::kSinks: return "sinks";
    case ExtensionParameter::kGroup: return "group";
  }
  return "?";
}

const std::vector<ExtensionMethodInfo>& ExtensionMethodTable() { return kMethods; }

std::string_view ExtensionMethodName(ExtensionMethod method) { return InfoOf(method).name; }

ExtensionMethod ParseExtensionMethod(std::string_view name) {
  std::string known;
  for (const auto& info : kMethods) {
    if (info.name == name) return info.method;
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  }
  ThrowError(kOp, "method", FormatValue(std::string(name)), "must be one of " + known);
}

const std::vector<ExtensionMethod>& AllExtensionMethods() {
  static const std::vector<ExtensionMethod> all = [] {
    std::vector<ExtensionMethod> methods;
    methods.reserve(kMethods.size());
    for (const auto& info : kMethods) methods.push_back(info.method);
    return methods;
  }();
  return all;
}

std::string ExtensionMethodsSynopsis() {
  std::string text;
  for (const auto& info : kMethods) text += (text.empty() ? "" : " | ") + std::string(info.name);
  return text + ", with optional :factor=F,window=W,k=K,sinks=S,group=G and ,logn";
}

void ContextExtension::Validate() const {
  if (factor) {
    RequireTakes(method, ExtensionParameter::kFactor, FormatValue(*factor));
    Require(std::isfinite(*factor) && *factor >= 1, kOp, "factor", *factor,
            "must be a finite number >= 1 (the ratio of the target length to the trained one)");
  }
  if (window) {
    RequireTakes(method, ExtensionParameter::kWindow, FormatValue(*window));
    Require(*window >= 1, kOp, "window", *window, "must be >= 1");
    Require(method != ExtensionMethod::kLambda || *window >= 2, kOp, "window", *window,
            "must be >= 2 for lambda (the sinks read as distance window - 1)");
  }
  if (k) {
    RequireTakes(method, ExtensionParameter::kK, FormatValue(*k));
    Require(std::isfinite(*k) && *k >= 1, kOp, "k", *k, "must be >= 1 (1: plain RoPE, larger: slower growth)");
  }
  if (sinks) {
    RequireTakes(method, ExtensionParameter::kSinks, FormatValue(*sinks));
    Require(*sinks >= 0, kOp, "sinks", *sinks, "must be >= 0");
  }
  if (group) {
    RequireTakes(method, ExtensionParameter::kGroup, FormatValue(*group));
    Require(*group >= 1, kOp, "group", *group, "must be >= 1 (1: plain RoPE)");
  }
}

ContextExtension ParseContextExtension(std::string_view text) {
  ContextExtension ext;
  std::string_view rest;
  const auto split = text.find_first_of(":+,");
  ext.method = ParseExtensionMethod(text.substr(0, split));
  if (split != std::string_view::npos) rest = text.substr(split + 1);
  std::vector<std::string_view> keys;  // each given once: "factor=2,factor=3" is a mistake, not "3"
  while (!rest.empty()) {
    const auto comma = rest.find_first_of(",+");
    const std::string_view item = rest.substr(0, comma);
    const std::string_view key = item.substr(0, item.find('='));
    Require(std::find(keys.begin(), keys.end(), key) == keys.end(), kOp, "method", std::string(text),
            "gives " + std::string(key) + " twice");
    keys.push_back(key);
    SetParameter(ext, item);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    Require(comma == std::string_view::npos || !rest.empty(), kOp, "method", std::string(text),
            "must not end with a separator");
  }
  ext.Validate();
  return ext;
}

std::vector<ContextExtension> ParseContextExtensionList(std::string_view text) {
  std::vector<ContextExtension> list;
  std::vector<std::string> forms;
  std::string_view rest = text;
  for (;;) {
    const auto semicolon = rest.find(';');
    std::string_view item = rest.substr(0, semicolon);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    Require(!item.empty(), kOp, "methods", std::string(text),
            "must be method texts separated by ';', none of them empty");
    list.push_back(ParseContextExtension(item));
    const std::string form = FormatContextExtension(list.back());
    Require(std::find(forms.begin(), forms.end(), form) == forms.end(), kOp, "methods", std::string(text),
            "lists " + form + " twice");
    forms.push_back(form);
    if (semicolon == std::string_view::npos) return list;
    rest = rest.substr(semicolon + 1);
  }
}

std::string FormatContextExtension(const ContextExtension& ext) {
  std::string params;
  const auto add = [&](const std::string& item) { params += (params.empty() ? "" : ",") + item; };
  if (ext.factor) add("factor=" + FormatNumber(*ext.factor));
  if (ext.window) add("window=" + std::to_string(*ext.window));
  if (ext.k) add("k=" + FormatNumber(*ext.k));
  if (ext.sinks) add("sinks=" + std::to_string(*ext.sinks));
  if (ext.group) add("group=" + std::to_string(*ext.group));
  if (ext.logn) add("logn");
  const std::string name(ExtensionMethodName(ext.method));
  return params.empty() ? name : name + ":" + params;
}

ExtensionPlan PlanContextExtension(const ContextExtension& extension, const RopeSpec& model_rope,
                                   std::int64_t train_length, std::int64_t target_length) {
  extension.Validate();
  model_rope.Validate();
  Require(train_length >= 2, kOp, "train_length", train_length, "must be >= 2");
  Require(target_length >= 1, kOp, "target_length", target_length, "must be >= 1");
  const bool model_scales = !std::holds_alternative<NoScaling>(model_rope.scaling);
  Require(extension.method == ExtensionMethod::kNone || !model_scales, kOp, "model rope scaling",
          std::string(RopeScalingName(model_rope.scaling)),
          "must be none for an extension method (the model already scales its RoPE)");

  ExtensionPlan plan;
  ContextExtension& r = plan.resolved;
  r = extension;
  const double s = std::max(1.0, static_cast<double>(target_length) / static_cast<double>(train_length));
  RopeSpec spec = model_rope;
  std::optional<ReRopeEncoding> rerope;
  std::optional<SelfExtendEncoding> self_extend;
  switch (extension.method) {
    case ExtensionMethod::kNone:
    case ExtensionMethod::kWindow: break;
    case ExtensionMethod::kLinear:
      r.factor = extension.factor.value_or(s);
      spec.scaling = LinearScaling{*r.factor};
      break;
    case ExtensionMethod::kNtk:
      r.factor = extension.factor.value_or(s);
      spec.scaling = NtkAwareScaling{*r.factor};
      break;
    case ExtensionMethod::kDynamicNtk:
      r.factor = extension.factor.value_or(2.0);
      spec.scaling = DynamicNtkScaling{*r.factor, train_length};
      break;
    case ExtensionMethod::kYarn: {
      r.factor = extension.factor.value_or(s);
      YarnScaling yarn;
      yarn.factor = *r.factor;
      yarn.original_max_position = train_length;
      spec.scaling = yarn;
      break;
    }
    case ExtensionMethod::kReRope:
    case ExtensionMethod::kLeakyReRope: {
      r.window = extension.window.value_or(train_length / 2);
      Require(*r.window < train_length, kOp, "window", *r.window,
              "must be < the training length " + std::to_string(train_length) + " (distances inside it stay exact)");
      rerope = ReRopeEncoding{spec, {}, *r.window, std::nullopt};
      if (extension.method == ExtensionMethod::kLeakyReRope) {
        // k maps the longest distance L - 1 to L_train - 1.
        const double fit =
            static_cast<double>(target_length - 1 - *r.window) / static_cast<double>(train_length - 1 - *r.window);
        r.k = extension.k.value_or(std::max(1.0, fit));
        if (*r.k > 1) {
          rerope->leak = *r.k;
        } else {
          rerope.reset();  // k = 1: distances grow as trained, plain RoPE
        }
      }
      break;
    }
    case ExtensionMethod::kLambda:
      r.sinks = extension.sinks.value_or(4);
      r.window = extension.window.value_or(train_length);
      // LM-Infinite's distance cap: keys outside the window (the sinks) read
      // as distance window - 1, the largest one inside it.
      rerope = ReRopeEncoding{spec, {}, *r.window - 1, std::nullopt};
      break;
    case ExtensionMethod::kSelfExtend: {
      r.window = extension.window.value_or(train_length / 2);
      Require(*r.window < train_length, kOp, "window", *r.window,
              "must be < the training length " + std::to_string(train_length) + " (distances inside it stay exact)");
      // The smallest group whose longest grouped distance stays trained.
      const auto longest = [&](std::int64_t g) { return (target_length - 1) / g + *r.window - *r.window / g; };
      std::int64_t g = 1;
      while (longest(g) > train_length - 1) ++g;
      r.group = extension.group.value_or(g);
      self_extend = SelfExtendEncoding{spec, {}, *r.group, *r.window};
      break;
    }
  }
  if (extension.method == ExtensionMethod::kWindow) r.window = extension.window.value_or(train_length);

  const RopeFrequencies frequencies = ComputeRopeFrequencies(spec, target_length);
  if (rerope) {
    rerope->frequencies = frequencies;
    plan.attention.encoding = *rerope;
  } else if (self_extend) {
    self_extend->frequencies = frequencies;
    plan.attention.encoding = *self_extend;
  } else {
    plan.attention.encoding = RopeEncoding{spec, frequencies};
  }
  // The window of the distance maps is theirs; of window and lambda, a mask's.
  if (r.window && (extension.method == ExtensionMethod::kWindow || extension.method == ExtensionMethod::kLambda)) {
    plan.attention.mask.window = *r.window;
  }
  if (r.sinks) plan.attention.mask.sinks = *r.sinks;
  if (r.logn) plan.attention.logn_train_length = train_length;
  return plan;
}

bool SameAsModelRope(const ExtensionPlan& plan, const RopeSpec& model_rope, std::int64_t length) {
  const AttentionOptions& a = plan.attention;
  if (a.mask.window != 0 && a.mask.window < length) return false;
  if (a.logn_train_length != 0 && length > a.logn_train_length) return false;
  // Every encoding answers explicitly: a new one does not compile until it says.
  struct SameTable {
    std::int64_t length;
    RopeFrequencies plain;
    // Within rounding: YaRN at factor 1 blends x / 1 and x as Hugging Face
    // does, x (1 - w) + x w, which can miss x by an ulp (head_dim 256).
    static bool Near(double a, double b) { return std::abs(a - b) <= 1e-15 * std::abs(b); }
    bool Same(const RopeFrequencies& f) const {
      return f.inv_freq.size() == plain.inv_freq.size() &&
             std::equal(f.inv_freq.begin(), f.inv_freq.end(), plain.inv_freq.begin(), Near) &&
             Near(f.attention_factor, plain.attention_factor);
    }
    bool operator()(const NoPositionEncoding&) const { return false; }
    bool operator()(const AlibiEncoding&) const { return false; }
    bool operator()(const T5BiasEncoding&) const { return false; }
    bool operator()(const ShawEncoding&) const { return false; }
    bool operator()(const UrpeEncoding&) const { return false; }
    bool operator()(const RopeEncoding& e) const { return Same(e.frequencies); }
    // Distances d >= window read differently; the longest is length - 1.
    bool operator()(const ReRopeEncoding& e) const { return e.window >= length - 1 && Same(e.frequencies); }
    bool operator()(const SelfExtendEncoding& e) const {
      return (e.group == 1 || e.window >= length - 1) && Same(e.frequencies);
    }
  };
  return std::visit(SameTable{length, ComputeRopeFrequencies(model_rope, length)}, a.encoding);
}

}  // namespace posenc
