// The vocabulary of trainable positional encodings: one struct per scheme,
// its hyperparameters as a field list, and the variant of them all.
//
// A PositionScheme is what a model is trained with. The trainer
// (tiny_lm.h) turns it into trainable tensors, a forward and a backward
// (src/train/schemes/, one file a scheme), lowers it to the attention
// kernel's PositionEncoding where the kernel has its math (attention.h),
// and the checkpoints (GGUF metadata), the zoo's grid files (JSON) and the
// command line (flags) all read and write its fields through VisitFields:
// one field list, three formats. Every std::visit over the variant names
// each alternative: a scheme added here does not compile until the
// trainer has its factory (src/train/scheme_trainer.h).
//
// The sources: Vaswani et al. 2017 (sinusoidal), GPT-2 (learned), Shaw et
// al. 2018, Raffel et al. 2020 (T5), Press et al. 2022 (ALiBi), Su et al.
// 2021 (RoPE; Su Jianlin's posts on kexue.fm), Dai et al. 2019 and Yang et
// al. 2019 (XLNet), He et al. 2021 (DeBERTa), Chi et al. 2022 (KERPLE), Li
// et al. 2024 (FIRE).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "posenc/config_field.h"

namespace posenc {

// Each scheme: kName (its name everywhere: CLI, checkpoints, zoo rows),
// kCapabilities (below) and VisitFields(self, visitor), which calls
// visitor(ConfigField, member&) for every hyperparameter, in a fixed order.
// Members are std::int64_t or double.

// What the tools ask of a scheme instead of asking which scheme it is: how
// its model may be run past the training length, and so which variants of
// it the zoo and the tasks evaluate.
struct SchemeCapabilities {
  // A trained row per position: as trained the model runs no position past
  // its table's rows (an evaluation there fails, and that failure is the
  // measurement), and Su's hierarchical decomposition
  // (LearnedPastTable::kHierarchical, the variant "<scheme>+hierarchical")
  // reaches the square of the rows.
  bool position_rows = false;
  // Rotary: the training-free context-extension methods
  // (context_extension.h) run on it, each the variant "<scheme>+<method>".
  bool context_extension = false;
};

// The field list of a scheme without hyperparameters.
struct NoFields {
  template <class Self, class Visitor>
  static void VisitFields(Self& /*self*/, Visitor&& /*visit*/) {}
  bool operator==(const NoFields&) const = default;
};

struct NopeScheme : NoFields {  // no positional information (Kazemnejad et al. 2023)
  static constexpr std::string_view kName = "nope";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const NopeScheme&) const = default;
};

struct SinusoidalScheme : NoFields {  // Vaswani et al.'s sinusoid added to the input, interleaved, base 10000
  static constexpr std::string_view kName = "sinusoidal";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const SinusoidalScheme&) const = default;
};

struct LearnedScheme : NoFields {  // a trained row per position added to the input (GPT-2)
  static constexpr std::string_view kName = "learned";
  static constexpr SchemeCapabilities kCapabilities{.position_rows = true};
  bool operator==(const LearnedScheme&) const = default;
};

struct ShawScheme {  // relative keys and values per clipped distance, a table per layer
  static constexpr std::string_view kName = "shaw";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t clip = 16;  // distances clip to [-clip, clip]
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"shaw_clip", "--shaw-clip", "shaw: distances clip to [-K, K]"}, self.clip);
  }
  bool operator==(const ShawScheme&) const = default;
};

struct T5Scheme {  // T5's causal log buckets, a bias per (bucket, head) shared by the layers
  static constexpr std::string_view kName = "t5";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t buckets = 32;        // all on the past side (causal)
  std::int64_t max_distance = 128;  // distances from here share the last bucket
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"t5_buckets", "--t5-buckets", "t5: buckets"}, self.buckets);
    visit(ConfigField{"t5_max_distance", "--t5-max-distance", "t5: distance of the last bucket"}, self.max_distance);
  }
  bool operator==(const T5Scheme&) const = default;
};

struct AlibiScheme : NoFields {  // -slope_h (i - j), the fixed geometric slopes
  static constexpr std::string_view kName = "alibi";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const AlibiScheme&) const = default;
};

struct RopeScheme {  // q and k rotated, half-split pairs (GPT-NeoX, HF Llama)
  static constexpr std::string_view kName = "rope";
  static constexpr SchemeCapabilities kCapabilities{.context_extension = true};
  double theta = 10000.0;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"rope_theta", "--rope-theta", "rope: base"}, self.theta);
  }
  bool operator==(const RopeScheme&) const = default;
};

struct KerpleScheme : NoFields {  // -r1_h log(1 + r2_h (i - j)), trained per layer and head
  static constexpr std::string_view kName = "kerple";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const KerpleScheme&) const = default;
};

// FIRE (Li et al., ICLR 2024, "Functional Interpolation for Relative
// Positions Improves Long Context Transformers"): per layer a bias
//   b_h(i, j) = MLP_h( psi(i - j) / psi(max(i, threshold)) ),  psi(x) = log(c x + 1)
// with the MLP 1 -> mlp_width (ReLU) -> heads, and c and the threshold
// trained (c starts at fire_c, the threshold at train_length). The input of
// the MLP stays in [0, 1] at any length: the interpolation that lets it
// extrapolate.
struct FireScheme {
  static constexpr std::string_view kName = "fire";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t mlp_width = 32;  // the paper's width
  double c = 0.1;               // psi's initial scale (the authors' init)
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"fire_mlp_width", "--fire-mlp-width", "fire: hidden units of the bias MLP"}, self.mlp_width);
    visit(ConfigField{"fire_c", "--fire-c", "fire: initial c of psi(x) = log(c x + 1)"}, self.c);
  }
  bool operator==(const FireScheme&) const = default;
};

// XLNet / Transformer-XL relative attention (Dai et al. 2019, Yang et al.
// 2019), per layer: s_ij = scale ((q_i + u).k_j + (q_i + v).W_R R(i - j)),
// R the sinusoid of the distance ([sin | cos], XLNet's), W_R, u and v
// trained per layer (XLNet's r, r_w_bias, r_r_bias). Causal, one segment.
struct XlnetScheme : NoFields {
  static constexpr std::string_view kName = "xlnet";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const XlnetScheme&) const = default;
};

// DeBERTa's disentangled attention (He et al. 2021): s_ij = (q_i.k_j +
// q_i.K_r[c(i - j)] + k_j.Q_r[c(i - j)]) / sqrt(3 hd), c the log bucket of
// the distance (deberta_relative.h), K_r and Q_r the model's relative
// embeddings [2 buckets, d] projected per layer by trained matrices (as
// DeBERTa v1's pos_proj and pos_q_proj; v2/v3 reuse the layer's own key and
// query projections).
struct DebertaScheme {
  static constexpr std::string_view kName = "deberta";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t buckets = 32;                  // position_buckets: distances up to buckets / 2 exact
  std::int64_t max_relative_positions = 128;  // where the log buckets end (the last one beyond)
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"deberta_buckets", "--deberta-buckets", "deberta: position buckets"}, self.buckets);
    visit(ConfigField{"deberta_max_relative_positions", "--deberta-max-relative-positions",
                      "deberta: the distance where the log buckets end"},
          self.max_relative_positions);
  }
  bool operator==(const DebertaScheme&) const = default;
};

// Complex order (Wang et al., ICLR 2020, "Encoding word order in complex
// embeddings"): the input of word j at position t is, per complex dimension
// c < d/2, r_jc e^{i (w_jc t + theta_jc)}, its real parts then its
// imaginary parts: amplitude, frequency and phase trained per word. Word
// order is in the input only (f(j, t + k) = e^{i w_j k} f(j, t)); the
// blocks stay real (the paper's complex-valued layers are not kept).
struct ComplexOrderScheme : NoFields {
  static constexpr std::string_view kName = "complex-order";
  static constexpr SchemeCapabilities kCapabilities{};
  bool operator==(const ComplexOrderScheme&) const = default;
};

// URPE (Luo et al., NeurIPS 2022): per layer, out_i = sum_j softmax_j(s_ij
// + B_h(i - j)) C_h(i - j) v_j, a relative bias B and a Toeplitz weight C
// per head (no renormalization), both over T5's causal log buckets so that
// every length has them; C starts at 1 (B alone: T5's bias per layer).
struct UrpeScheme {
  static constexpr std::string_view kName = "urpe";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t buckets = 32;
  std::int64_t max_distance = 128;
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"urpe_buckets", "--urpe-buckets", "urpe: buckets of B and C"}, self.buckets);
    visit(ConfigField{"urpe_max_distance", "--urpe-max-distance", "urpe: distance of the last bucket"},
          self.max_distance);
  }
  bool operator==(const UrpeScheme&) const = default;
};

// FLOATER (Liu et al., ICML 2020, "Learning to Encode Position for
// Transformer with Continuous Dynamical Model"): per layer l a position term
// p_l(t) added to the layer's attention input, the solution of one shared
// dynamics dp/dt = h(t, p) from a trained initial state p_l(0), at
// t_i = dt i; h(t, p) = W2 tanh(W1 p + u t + b1) + b2 is trained through the
// solver (fixed-step RK4, `substeps` steps a position). Two steps of 0.05
// by default: RK4's local error is of order h^5 = 3e-7 of the dynamics'
// scale, far below float32 training noise, at 2/5 of the cost of the
// authors' 5 (which --floater-substeps 5 gives).
struct FloaterScheme {
  static constexpr std::string_view kName = "floater";
  static constexpr SchemeCapabilities kCapabilities{};
  std::int64_t hidden = 32;   // h's hidden width
  std::int64_t substeps = 2;  // RK4 steps between two positions (the authors use 5; see below)
  double dt = 0.1;            // t_{i+1} - t_i
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"floater_hidden", "--floater-hidden", "floater: hidden width of the dynamics"}, self.hidden);
    visit(ConfigField{"floater_substeps", "--floater-substeps", "floater: RK4 steps between two positions"},
          self.substeps);
    visit(ConfigField{"floater_dt", "--floater-dt", "floater: time between two positions"}, self.dt);
  }
  bool operator==(const FloaterScheme&) const = default;
};

using PositionScheme =
    std::variant<NopeScheme, SinusoidalScheme, LearnedScheme, ShawScheme, T5Scheme, AlibiScheme, RopeScheme,
                 KerpleScheme, FireScheme, XlnetScheme, DebertaScheme, ComplexOrderScheme, UrpeScheme, FloaterScheme>;

// The scheme's kName.
std::string_view PositionSchemeName(const PositionScheme& scheme);
// The scheme's kCapabilities.
inline SchemeCapabilities PositionSchemeCapabilities(const PositionScheme& scheme) {
  return std::visit([](const auto& alternative) { return alternative.kCapabilities; }, scheme);
}
// The scheme called `name`, with its default fields. Throws posenc::Error
// "[op] parameter = "name": must be one of nope, sinusoidal, ..." otherwise.
PositionScheme ParsePositionScheme(std::string_view name, const char* op = "tiny_lm", const char* parameter = "scheme");
// Every scheme with its default fields, in the variant's order.
std::span<const PositionScheme> AllPositionSchemes();
// "nope, sinusoidal, ..., floater".
std::string PositionSchemeList();

// visitor(ConfigField, member&) for each field of the scheme that `scheme`
// holds (const or not).
template <class Scheme, class Visitor>
requires std::is_same_v<std::remove_const_t<Scheme>, PositionScheme>
void VisitSchemeFields(Scheme& scheme, Visitor&& visit) {
  std::visit([&](auto& alternative) { alternative.VisitFields(alternative, visit); }, scheme);
}

}  // namespace posenc
