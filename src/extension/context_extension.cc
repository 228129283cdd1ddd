// Context-extension methods: the text form, made from the methods' field
// lists, and each method's plan as attention options (the defaults are
// stated at each method in include/posenc/context_extension.h).
#include "posenc/context_extension.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "posenc/error.h"
#include "posenc/rope_frequencies.h"
#include "extension/scaled_composition.h"

namespace posenc {
namespace {

constexpr const char* kOp = "context extension";

// A key of the text form and whether its values are whole numbers.
struct Parameter {
  std::string_view key;
  bool whole = false;
};

template <class Member>
constexpr bool kWhole = std::is_integral_v<typename std::remove_reference_t<Member>::value_type>;

// Every key some method takes, in the order the methods first name them
// (factor, window, k, sinks, group): the text form's order.
const std::vector<Parameter>& Parameters() {
  static const std::vector<Parameter> parameters = [] {
    std::vector<Parameter> list;
    for (const ExtensionMethod& method : AllExtensionMethods()) {
      VisitMethodFields(method, [&](const ConfigField& field, const auto& member) {
        const auto same = [&](const Parameter& p) { return p.key == field.key; };
        if (std::none_of(list.begin(), list.end(), same)) list.push_back({field.key, kWhole<decltype(member)>});
      });
    }
    return list;
  }();
  return parameters;
}

// "factor, window, k, sinks, group".
std::string ParameterKeys() {
  std::string text;
  for (const Parameter& p : Parameters()) text += (text.empty() ? "" : ", ") + std::string(p.key);
  return text;
}

bool Takes(const ExtensionMethod& method, std::string_view key) {
  bool takes = false;
  VisitMethodFields(method,
                    [&](const ConfigField& field, const auto& /*member*/) { takes = takes || field.key == key; });
  return takes;
}

// "linear, ntk, dynamic-ntk and yarn": the methods that take `key`.
std::string MethodsTaking(std::string_view key) {
  std::vector<std::string_view> names;
  for (const ExtensionMethod& method : AllExtensionMethods()) {
    if (Takes(method, key)) names.push_back(ExtensionMethodName(method));
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  }
  return text;
}

// A parameter as the text gives it, parsed as its key's type says.
struct GivenValue {
  std::string_view key;
  std::int64_t count = 0;  // a whole-number key's
  double number = 0;       // the others'
  std::string Formatted(bool whole) const { return whole ? FormatValue(count) : FormatValue(number); }
};

GivenValue ParseValue(const Parameter& parameter, std::string_view text) {
  GivenValue given{.key = parameter.key};
  const char* end = text.data() + text.size();
  if (parameter.whole) {
    const auto [stop, error] = std::from_chars(text.data(), end, given.count);
    Require(error == std::errc() && stop == end, kOp, std::string(parameter.key), std::string(text),
            "must be a whole number");
  } else {
    const auto [stop, error] = std::from_chars(text.data(), end, given.number);
    Require(error == std::errc() && stop == end, kOp, std::string(parameter.key), std::string(text),
            "must be a number");
  }
  return given;
}

// `value` as the text form writes it.
std::string FormatNumber(std::int64_t value) { return std::to_string(value); }
std::string FormatNumber(double value) { return FormatValue(value); }

// What a method changes in the model's attention.
struct Lowering {
  RopeSpec spec;  // the model's, with the method's scaling
  // A frequency method over a model that scales its RoPE: the composed
  // table (spec keeps the model's scaling).
  std::optional<RopeFrequencies> frequencies;
  std::optional<ReRopeEncoding> rerope;
  std::optional<SelfExtendEncoding> self_extend;
  std::int64_t mask_window = 0;  // the mask's (window and lambda; the distance maps' windows are theirs)
  std::int64_t sinks = 0;
};

// Each method's plan: it fills in the defaults of its parameters (in place:
// the plan's `resolved`) and says what changes. One overload a method: a
// method without one does not compile.
struct Planner {
  const RopeSpec& model;
  std::int64_t train_length;
  std::int64_t target_length;
  double s;  // max(1, L / L_train)

  // A frequency method: the model's table rescaled. Over an unscaled model
  // the method's own scaling (Hugging Face's formulas exactly); over a
  // scaled one, the composition of scaled_composition.cc.
  Lowering Scaled(const RopeScaling& scaling, std::string_view name) const {
    Lowering l{model};
    if (std::holds_alternative<NoScaling>(model.scaling)) {
      l.spec.scaling = scaling;
    } else {
      l.frequencies = detail::ComposeOverModelScaling(model, scaling, name, target_length);
    }
    return l;
  }
  // The window of a distance map: inside it distances stay exact.
  std::int64_t ExactWindow(const std::optional<std::int64_t>& window) const {
    const std::int64_t w = window.value_or(train_length / 2);
    Require(w < train_length, kOp, "window", w,
            "must be < the training length " + std::to_string(train_length) + " (distances inside it stay exact)");
    return w;
  }

  Lowering operator()(NoneMethod& /*m*/) const { return {model}; }
  Lowering operator()(LinearMethod& m) const {
    m.factor = m.factor.value_or(s);
    return Scaled(LinearScaling{*m.factor}, LinearMethod::kName);
  }
  Lowering operator()(NtkMethod& m) const {
    m.factor = m.factor.value_or(s);
    return Scaled(NtkAwareScaling{*m.factor}, NtkMethod::kName);
  }
  Lowering operator()(DynamicNtkMethod& m) const {
    m.factor = m.factor.value_or(2.0);
    return Scaled(DynamicNtkScaling{*m.factor, train_length}, DynamicNtkMethod::kName);
  }
  Lowering operator()(YarnMethod& m) const {
    m.factor = m.factor.value_or(s);
    YarnScaling yarn;
    yarn.factor = *m.factor;
    yarn.original_max_position = train_length;
    return Scaled(yarn, YarnMethod::kName);
  }
  Lowering operator()(ReRopeMethod& m) const {
    m.window = ExactWindow(m.window);
    Lowering l{model};
    l.rerope = ReRopeEncoding{model, {}, *m.window, std::nullopt};
    return l;
  }
  Lowering operator()(LeakyReRopeMethod& m) const {
    m.window = ExactWindow(m.window);
    // k maps the longest distance L - 1 to L_train - 1.
    const double fit =
        static_cast<double>(target_length - 1 - *m.window) / static_cast<double>(train_length - 1 - *m.window);
    m.k = m.k.value_or(std::max(1.0, fit));
    Lowering l{model};
    // k = 1: distances grow as trained, plain RoPE.
    if (*m.k > 1) l.rerope = ReRopeEncoding{model, {}, *m.window, *m.k};
    return l;
  }
  Lowering operator()(WindowMethod& m) const {
    m.window = m.window.value_or(train_length);
    Lowering l{model};
    l.mask_window = *m.window;
    return l;
  }
  Lowering operator()(LambdaMethod& m) const {
    m.sinks = m.sinks.value_or(4);
    m.window = m.window.value_or(train_length);
    Lowering l{model};
    // LM-Infinite's distance cap: keys outside the window (the sinks) read
    // as distance window - 1, the largest one inside it.
    l.rerope = ReRopeEncoding{model, {}, *m.window - 1, std::nullopt};
    l.mask_window = *m.window;
    l.sinks = *m.sinks;
    return l;
  }
  Lowering operator()(SelfExtendMethod& m) const {
    m.window = ExactWindow(m.window);
    // The smallest group whose longest grouped distance stays trained.
    const std::int64_t w = *m.window;
    const auto longest = [&](std::int64_t g) { return (target_length - 1) / g + w - w / g; };
    std::int64_t g = 1;
    while (longest(g) > train_length - 1) ++g;
    m.group = m.group.value_or(g);
    Lowering l{model};
    l.self_extend = SelfExtendEncoding{model, {}, *m.group, w};
    return l;
  }
  Lowering operator()(SelfExtendKvShiftMethod& m) const {
    m.window = ExactWindow(m.window);
    const std::int64_t w = *m.window;
    // The grouped distance of a query at p (c = p / w >= 1 compressions)
    // to the first key: p - c (w - w / g). It grows inside a block and
    // drops at the next, so its largest value below L is at L - 1 or at
    // the end of the block before L - 1's.
    const auto longest = [&](std::int64_t g) {
      const auto far = [&](std::int64_t p) { return p / w >= 1 ? p - p / w * (w - w / g) : 0; };
      const std::int64_t c = (target_length - 1) / w;
      return std::max({w - 1, far(target_length - 1), c >= 2 ? far(c * w - 1) : 0});
    };
    if (!m.group) {
      for (std::int64_t g = 1; g <= w && !m.group; ++g) {
        if (w % g == 0 && longest(g) <= train_length - 1) m.group = g;
      }
      Require(m.group.has_value(), kOp, "target_length", target_length,
              "is too long for self-extend-kv with window " + std::to_string(w) +
                  ": no divisor of the window keeps every grouped distance below the training length " +
                  std::to_string(train_length) + " (give group=)");
    }
    Require(w % *m.group == 0, kOp, "group", *m.group,
            "must divide the window " + std::to_string(w) +
                " for self-extend-kv (llama.cpp asserts grp_attn_w % grp_attn_n == 0)");
    Lowering l{model};
    l.self_extend = SelfExtendEncoding{model, {}, *m.group, w, SelfExtendForm::kKvShift};
    return l;
  }
};

}  // namespace

std::string_view ExtensionMethodName(const ExtensionMethod& method) {
  return std::visit([](const auto& m) { return m.kName; }, method);
}

ExtensionKind ExtensionMethodKind(const ExtensionMethod& method) {
  return std::visit([](const auto& m) { return m.kKind; }, method);
}

ExtensionMethod ParseExtensionMethod(std::string_view name) {
  std::string known;
  for (const ExtensionMethod& method : AllExtensionMethods()) {
    if (ExtensionMethodName(method) == name) return method;
    known += (known.empty() ? "" : ", ") + std::string(ExtensionMethodName(method));
  }
  ThrowError(kOp, "method", FormatValue(std::string(name)), "must be one of " + known);
}

const std::vector<ExtensionMethod>& AllExtensionMethods() {
  static const std::vector<ExtensionMethod> all = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::vector<ExtensionMethod>{ExtensionMethod(std::in_place_index<I>)...};
  }
  (std::make_index_sequence<std::variant_size_v<ExtensionMethod>>{});
  return all;
}

const std::vector<ExtensionMethodInfo>& ExtensionMethodTable() {
  static const std::vector<ExtensionMethodInfo> table = [] {
    std::vector<ExtensionMethodInfo> rows;
    for (const ExtensionMethod& method : AllExtensionMethods()) {
      ExtensionMethodInfo& row = rows.emplace_back();
      row.name = ExtensionMethodName(method);
      row.summary = std::visit([](const auto& m) { return m.kSummary; }, method);
      VisitMethodFields(method,
                        [&](const ConfigField& field, const auto& /*member*/) { row.parameters.push_back(field.key); });
    }
    return rows;
  }();
  return table;
}

std::string ExtensionMethodsSynopsis() {
  std::string names, keys;
  for (const ExtensionMethod& method : AllExtensionMethods()) {
    names += (names.empty() ? "" : " | ") + std::string(ExtensionMethodName(method));
  }
  for (const Parameter& p : Parameters()) {
    keys += (keys.empty() ? "" : ",") + std::string(p.key) + "=" +
            static_cast<char>(std::toupper(static_cast<unsigned char>(p.key.front())));
  }
  return names + ", with optional :" + keys + " and ,logn";
}

void ContextExtension::Validate() const {
  VisitMethodFields(method, [](const ConfigField& field, const auto& member) {
    if (member) RequireFieldRule(kOp, field, *member);
  });
}

bool IsModelAsTrained(const ContextExtension& extension) {
  return std::holds_alternative<NoneMethod>(extension.method) && !extension.logn;
}

ContextExtension ParseContextExtension(std::string_view text) {
  ContextExtension ext;
  std::string_view rest;
  const auto split = text.find_first_of(":+,");
  ext.method = ParseExtensionMethod(text.substr(0, split));
  if (split != std::string_view::npos) rest = text.substr(split + 1);
  std::vector<std::string_view> keys;  // each given once: "factor=2,factor=3" is a mistake, not "3"
  std::vector<GivenValue> given;
  while (!rest.empty()) {
    const auto comma = rest.find_first_of(",+");
    const std::string_view item = rest.substr(0, comma);
    const std::string_view key = item.substr(0, item.find('='));
    Require(std::find(keys.begin(), keys.end(), key) == keys.end(), kOp, "method", std::string(text),
            "gives " + std::string(key) + " twice");
    keys.push_back(key);
    if (item == "logn") {
      ext.logn = true;
    } else {
      Require(key.size() < item.size(), kOp, "parameter", std::string(item),
              "must be key=value (keys: " + ParameterKeys() + ") or logn");
      const auto parameter =
          std::find_if(Parameters().begin(), Parameters().end(), [&](const Parameter& p) { return p.key == key; });
      if (parameter == Parameters().end()) {
        ThrowError(kOp, "parameter", FormatValue(std::string(key)), "is not one of " + ParameterKeys() + ", logn");
      }
      given.push_back(ParseValue(*parameter, item.substr(key.size() + 1)));
    }
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    Require(comma == std::string_view::npos || !rest.empty(), kOp, "method", std::string(text),
            "must not end with a separator");
  }
  // In the text form's order, each taken and then in range, as Validate
  // checks them.
  for (const Parameter& parameter : Parameters()) {
    const auto value =
        std::find_if(given.begin(), given.end(), [&](const GivenValue& g) { return g.key == parameter.key; });
    if (value == given.end()) continue;
    Require(
        Takes(ext.method, parameter.key), kOp, parameter.key, Verbatim{value->Formatted(parameter.whole)},
        "is a parameter of " + MethodsTaking(parameter.key) + ", not " + std::string(ExtensionMethodName(ext.method)));
    VisitMethodFields(ext.method, [&](const ConfigField& field, auto& member) {
      if (field.key != parameter.key) return;
      if constexpr (kWhole<decltype(member)>) {
        member = value->count;
      } else {
        member = value->number;
      }
      RequireFieldRule(kOp, field, *member);
    });
  }
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
  VisitMethodFields(ext.method, [&](const ConfigField& field, const auto& member) {
    if (member) add(std::string(field.key) + "=" + FormatNumber(*member));
  });
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
  // A model that scales its RoPE was trained (or validated) for the length
  // its scaling states: the extension counts from there.
  if (const std::int64_t effective = EffectiveContextLength(model_rope); effective > 0) train_length = effective;
  Require(train_length >= 2, kOp, "train_length", train_length, "must be >= 2");

  ExtensionPlan plan;
  plan.resolved = extension;
  plan.train_length = train_length;
  const double s = std::max(1.0, static_cast<double>(target_length) / static_cast<double>(train_length));
  Lowering l = std::visit(Planner{model_rope, train_length, target_length, s}, plan.resolved.method);

  const RopeFrequencies frequencies = l.frequencies ? *l.frequencies : ComputeRopeFrequencies(l.spec, target_length);
  if (l.rerope) {
    l.rerope->frequencies = frequencies;
    plan.attention.encoding = *l.rerope;
  } else if (l.self_extend) {
    l.self_extend->frequencies = frequencies;
    plan.attention.encoding = *l.self_extend;
  } else {
    plan.attention.encoding = RopeEncoding{l.spec, frequencies};
  }
  plan.attention.mask.window = l.mask_window;
  plan.attention.mask.sinks = l.sinks;
  if (plan.resolved.logn) plan.attention.logn_train_length = train_length;
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
    // Published: distances past the window read as grouped ones, which join
    // the true ones at d = window. KV-shift: a query at p >= window has
    // grouped keys behind it.
    bool operator()(const SelfExtendEncoding& e) const {
      const std::int64_t exact_below = e.form == SelfExtendForm::kKvShift ? length : length - 1;
      return (e.group == 1 || e.window >= exact_below) && Same(e.frequencies);
    }
  };
  return std::visit(SameTable{length, ComputeRopeFrequencies(model_rope, length)}, a.encoding);
}

}  // namespace posenc
