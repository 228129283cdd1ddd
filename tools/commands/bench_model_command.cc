// posenc bench model [--model FILE.gguf] [--weights stored|f32] [--activations f32|int8] [--ctx N] [--reps R]
//                    [--decode-cache C1,C2,...] [--decode-tokens D] [--methods M1;M2;...]
//                    [--threads T] [--json] [--peer DIR [--peer-text FILE] [--peer-out FILE.md]]
//
// Three prefills of the default model (SmolLM2-135M) over one window of N
// tokens (2048 by default): the prompt prefill, as generation runs it (a
// new cache, the last row's logits only: posenc::Prefill); the perplexity
// pass, a sliding window of stride N/2 as `posenc ppl --stride` runs it (the
// logits of the second half's rows only: NextTokenNll from row N/2, the job
// llama-perplexity does on each window); and the every-logit pass (every
// row's logits: NextTokenNll, a window scored whole). For each, the model
// FLOPs per token (linear layers, causal attention and the logits of the
// rows computed: DecoderModel::ForwardFlops), and the ratio of the FLOP/s
// achieved to the FMA peak measured in the same run (and to the int8
// dot-product peak, measured too: the limit of --activations int8's
// integer products where the CPU has them). With a vocabulary of
// 262,144 (Gemma 3) the output matrix is most of an every-logit pass.
//
// Decode throughput: for each cache size C (0, 2048 and 8192 by default) the
// cache is filled once, then for each method (plain RoPE, ReRoPE and
// Self-Extend with windows of 512 by default) rewound to C tokens, one untimed step (it lowers
// the cached keys for the method), and D timed single-token steps, best of R
// such runs (as the prefill). A step reads every weight in its stored type
// and the whole cache once, so it is bound by memory: its bytes
// (DecoderModel::WeightBytes + the float32 keys and values of the cache) times
// tokens/s are compared with the copy bandwidth, the best of copies run
// between the decode repetitions (at least kCopyRuns of them). On a shared
// host the memory's speed moves from minute to minute (a virtual machine of
// this project's read 45-49 GB/s, then 67-76 GB/s ten minutes later): a
// copy timed only before or after the decode can catch another state than
// the decode did, so the two are sampled over the same minutes.
//
// Memory: the resident bytes the loaded model added to the process
// (/proc/self/statm), against the GGUF file's size.
//
// --peer DIR: llama.cpp's benchmark programs (scripts/bench-peer) on the same
// GGUF and thread count, each row's peer measurement right after posenc's
// (bench_peer.h), and a table of posenc / llama.cpp per row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unistd.h>

#include "commands/bench_floors.h"
#include "commands/bench_peer.h"
#include "commands.h"
#include "options/default_inputs.h"
#include "options/integer_options.h"
#include "options/output_files.h"
#include "machine_limits.h"
#include "posenc/context_extension.h"
#include "posenc/generation.h"
#include "options/model_inputs.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::cli {
namespace {

struct BenchModelOptions {
  std::string model{kDefaultModel.path};
  WeightOptions weights;
  std::int64_t ctx = 2048;
  int reps = 2;
  std::vector<std::int64_t> decode_caches{0, 2048, 8192};
  std::int64_t decode_tokens = 32;
  // Windows of 512 tokens, so that most cached keys take the far path (the
  // model's own defaults leave every key below 8,192 near).
  std::vector<ContextExtension> methods =
      ParseContextExtensionList("none;rerope:window=512;self-extend:group=8,window=512");
  int threads = 0;
  bool json = false;
  std::string peer;  // llama.cpp's programs; empty: no peer
  std::string peer_text{kDefaultStudyText.path};
  std::string peer_out;  // the side-by-side table as a Markdown file; empty: none
};

// llama-perplexity's windows of --ctx tokens.
constexpr std::int64_t kPeerWindows = 3;

// The process's resident bytes (Linux /proc/self/statm; 0 where absent).
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// The copy bandwidth's timed runs, at the least (each copies both ways).
constexpr int kCopyRuns = 7;

struct DecodeRun {
  std::string method;
  std::int64_t cache_tokens = 0;
  double tokens_per_s = 0;
  double bytes_per_token = 0;
  double gbps = 0;
  double ratio = 0;
  double peer_tokens_per_s = 0;  // llama.cpp's, plain RoPE with --peer; else 0
};

// Which logits a prefill computes.
enum class PrefillKind {
  kPrompt,      // the last row's, in a new cache (generation's Prefill)
  kPerplexity,  // the second half's rows (a sliding window of stride n/2; llama-perplexity's)
  kEveryLogit,  // every row's (NextTokenNll of the whole window)
};

// How the log, the text output and the peer table name a prefill, and what
// its logits are in words; FirstLogitRow: the first of its n rows whose
// logits it computes.
struct PrefillTraits {
  const char* name;
  const char* rows;
};
PrefillTraits TraitsOf(PrefillKind kind) {
  switch (kind) {
    case PrefillKind::kPrompt: return {"prompt prefill", "the last row's logits, as generation"};
    case PrefillKind::kPerplexity:
      return {"perplexity pass", "the second half's logits, as a sliding window of stride ctx/2 scores"};
    case PrefillKind::kEveryLogit: return {"every-logit pass", "every row's logits"};
  }
  return {"", ""};
}
std::int64_t FirstLogitRow(PrefillKind kind, std::int64_t n) {
  return kind == PrefillKind::kPrompt ? n - 1 : kind == PrefillKind::kPerplexity ? n / 2 : 0;
}

struct PrefillRun {
  PrefillKind kind = PrefillKind::kPrompt;
  double seconds = 0;  // the best repetition
  double flops = 0;    // DecoderModel::ForwardFlops of the rows it computes
  double tokens_per_s = 0;
  double gflops = 0;
  double ratio = 0;              // to the FMA peak
  double int8_ratio = 0;         // to the int8 dot-product peak (0 without one)
  double peer_tokens_per_s = 0;  // llama.cpp's with --peer (none for kEveryLogit); else 0
};

// One line on stderr per step, with the time since the start: the whole
// benchmark takes half a minute or more on the default model, and nothing
// else is printed until it ends.
class StepLog {
 public:
  void operator()(const std::string& step) const {
    std::fprintf(stderr, "bench model [%5.1f s]: %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), step.c_str());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Decode speed for each cache size and method (see the top of the file).
// A copy runs after each timed repetition (`copy`).
// llama.cpp's plain decode runs after posenc's at each cache size (`peer`).
std::vector<DecodeRun> MeasureDecode(const BenchModelOptions& o, const DecoderModel& model, std::mt19937& rng,
                                     bench::CopyProbe& copy, const LlamaCppPeer* peer, const StepLog& log) {
  const DecoderHyperparams& hp = model.hparams();
  std::vector<DecodeRun> runs;
  for (const std::int64_t cached : o.decode_caches) {
    const std::int64_t filled = std::max<std::int64_t>(1, cached);  // a step needs a token before it
    std::vector<std::int32_t> context(static_cast<std::size_t>(filled));
    for (auto& t : context) t = static_cast<std::int32_t>(rng() % hp.vocab_size);
    log("decode: a cache of " + std::to_string(filled) + " tokens");
    DecoderCache cache = model.NewCache();
    std::int32_t next = 0;
    const auto take_argmax = [&](std::span<const std::int64_t>, std::span<const float> logits) {
      next = Argmax(logits);
    };
    const std::int64_t last = filled - 1;
    model.Extend(cache, context, model.DefaultAttention(), std::span(&last, 1), take_argmax);
    for (const ContextExtension& method : o.methods) {
      const ExtensionPlan plan = PlanModelExtension(method, hp, filled + o.decode_tokens + 1);
      const std::string name = FormatContextExtension(plan.resolved);  // every parameter
      const AttentionOptions& attention = plan.attention;
      log("decode: " + name + ", " + std::to_string(o.decode_tokens) + " steps after " + std::to_string(filled) +
          " cached tokens");
      const std::int64_t row = 0;
      const auto step = [&] { model.Extend(cache, std::span(&next, 1), attention, std::span(&row, 1), take_argmax); };
      // Best of the repetitions, as the prefill and the copy bandwidth it is
      // compared with: each one from the same cache.
      double seconds = std::numeric_limits<double>::infinity();
      for (int rep = 0; rep < o.reps; ++rep) {
        cache.Truncate(filled);
        step();  // untimed: lowers the cached keys for this method
        seconds = std::min(seconds, bench::Seconds([&] {
                             for (std::int64_t i = 0; i < o.decode_tokens; ++i) step();
                           }));
        copy.Run();
      }
      DecodeRun run{name, cached, static_cast<double>(o.decode_tokens) / seconds};
      // The cache read by the average step: keys and values of every layer.
      run.bytes_per_token = model.WeightBytes() + model.KeyValueBytes(filled + 1 + o.decode_tokens / 2);
      if (peer != nullptr && name == FormatContextExtension(ContextExtension{})) {
        log("llama.cpp: decode, " + std::to_string(o.decode_tokens) + " steps after " + std::to_string(cached) +
            " cached tokens");
        run.peer_tokens_per_s = peer->Decode(cached, o.decode_tokens);
      }
      runs.push_back(run);
    }
  }
  return runs;
}

// The best of o.reps prefills of `tokens`, then llama.cpp's (`peer`) where it
// does the same job: llama-bench's prompt, llama-perplexity's windows (each
// computes its second half's logits, as kPerplexity).
PrefillRun MeasurePrefill(const BenchModelOptions& o, const DecoderModel& model, std::span<const std::int32_t> tokens,
                          PrefillKind kind, const bench::FmaPeak& peak, const bench::Int8Peak& int8_peak,
                          const LlamaCppPeer* peer, const StepLog& log) {
  const AttentionOptions attention = model.DefaultAttention();
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t first = FirstLogitRow(kind, n);
  PrefillRun run{.kind = kind, .seconds = std::numeric_limits<double>::infinity()};
  for (int rep = 0; rep < o.reps; ++rep) {
    log(std::string(TraitsOf(kind).name) + " (" + TraitsOf(kind).rows + "): prefill of " + std::to_string(n) +
        " tokens, repetition " + std::to_string(rep + 1) + " of " + std::to_string(o.reps));
    if (kind == PrefillKind::kPrompt) {
      DecoderCache cache = model.NewCache();
      run.seconds = std::min(run.seconds, bench::Seconds([&] { Prefill(model, cache, tokens, attention); }));
    } else {
      run.seconds = std::min(run.seconds, bench::Seconds([&] { model.NextTokenNll(tokens, first, attention); }));
    }
  }
  // The rows whose logits are computed: the last one's too in a prompt, not
  // in a pass (it predicts nothing).
  run.flops = model.ForwardFlops(n, kind == PrefillKind::kPrompt ? 1 : n - 1 - first);
  run.tokens_per_s = static_cast<double>(n) / run.seconds;
  run.gflops = run.flops / run.seconds / 1e9;
  run.ratio = run.gflops / peak.gflops;
  // The model's operations (2 a multiply-add, as FLOPs) against the integer
  // products' limit: with --activations int8 the linear layers and logits run
  // as byte products (attention stays float32).
  run.int8_ratio = int8_peak.gops > 0 ? run.gflops / int8_peak.gops : 0.0;
  if (peer != nullptr && kind != PrefillKind::kEveryLogit) {
    const bool prompt = kind == PrefillKind::kPrompt;
    log(std::string("llama.cpp: ") +
        (prompt ? "llama-bench pp" + std::to_string(n)
                : "llama-perplexity, " + std::to_string(kPeerWindows) + " windows of " + std::to_string(n)));
    run.peer_tokens_per_s = prompt ? peer->PromptPrefill(n) : peer->PerplexityPass(n, kPeerWindows);
  }
  return run;
}

// "1.64x", or "-" without a peer figure.
std::string PeerRatio(double posenc, double peer) {
  if (peer <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", posenc / peer);
  return text;
}

// The side-by-side table (Markdown), one row per measure: posenc's tokens/s
// and its ratio to this machine's limit, llama.cpp's tokens/s, the ratio.
std::string PeerTable(const BenchModelOptions& o, const std::vector<PrefillRun>& prefills,
                      const std::vector<DecodeRun>& runs) {
  std::string table =
      "| measure | posenc tokens/s | posenc, of the limit | llama.cpp tokens/s | posenc / llama.cpp |\n"
      "|---|---:|---:|---:|---:|\n";
  char line[512];
  const std::string ctx = std::to_string(o.ctx);
  for (const PrefillRun& run : prefills) {
    std::string what = std::string(TraitsOf(run.kind).name) + " " + ctx;
    switch (run.kind) {
      case PrefillKind::kPrompt: what += " (last logits; llama-bench pp" + ctx + ")"; break;
      case PrefillKind::kPerplexity:
        what += " (the second half's logits, stride " + std::to_string(o.ctx / 2) + "; llama-perplexity, " +
                std::to_string(kPeerWindows) + " windows: its scored second half's)";
        break;
      case PrefillKind::kEveryLogit: what += " (every row's logits; no peer runs this job)"; break;
    }
    std::string peer_figure = "-";
    if (run.peer_tokens_per_s > 0) {
      std::snprintf(line, sizeof line, "%.1f", run.peer_tokens_per_s);
      peer_figure = line;
    }
    std::snprintf(line, sizeof line, "| %s | %.1f | %.2f of the FMA peak | %s | %s |\n", what.c_str(), run.tokens_per_s,
                  run.ratio, peer_figure.c_str(), PeerRatio(run.tokens_per_s, run.peer_tokens_per_s).c_str());
    table += line;
  }
  for (const DecodeRun& run : runs) {
    if (run.peer_tokens_per_s <= 0) continue;
    std::snprintf(line, sizeof line,
                  "| decode after %lld cached tokens (%lld steps; llama-bench tg%lld -d %lld) | %.1f | %.2f of the "
                  "copy | %.1f | %s |\n",
                  static_cast<long long>(run.cache_tokens), static_cast<long long>(o.decode_tokens),
                  static_cast<long long>(o.decode_tokens), static_cast<long long>(run.cache_tokens), run.tokens_per_s,
                  run.ratio, run.peer_tokens_per_s, PeerRatio(run.tokens_per_s, run.peer_tokens_per_s).c_str());
    table += line;
  }
  return table;
}

// --peer-out: the machine, the run's limits and load, and the table.
void WritePeerFile(const BenchModelOptions& o, const LlamaCppPeer* peer, const std::vector<PrefillRun>& prefills,
                   const std::vector<DecodeRun>& runs, const bench::FmaPeak& peak, const bench::CopyBandwidth& copy,
                   const std::string& load_before, const std::string& load_after) {
  if (peer == nullptr || o.peer_out.empty()) return;
  char limits[256];
  std::snprintf(limits, sizeof limits, "FMA peak %.1f GFLOP/s (%s), copy bandwidth %.1f GB/s", peak.gflops, peak.target,
                copy.gbps);
  // The run's circumstances as the table's last row, so that a page copying
  // the table's rows (scripts/readme-examples) shows the machine with them.
  const std::string text =
      "# posenc bench model --peer: " + std::filesystem::path(o.model).filename().string() + "\n\n" +
      "Written by `posenc bench model --peer` (scripts/bench-peer run).\n\n" + PeerTable(o, prefills, runs) +
      "| the run: " + std::filesystem::path(o.model).filename().string() + "; " + CpuDescription() + "; " +
      std::to_string(NumThreads()) + " threads each, posenc and " + peer->Build() +
      " alternating row by row; posenc's decode activations " +
      (o.weights.activations == DotActivations::kInt8 ? "int8" : "float32") + "; best of " + std::to_string(o.reps) +
      " each; measured in the same run: " + limits + "; load averages (1, 5, 15 min) " + load_before + " before, " +
      load_after + " after | | | | |\n";
  OutputFiles files("bench model");
  files.Write(o.peer_out, text);
  files.Commit();
}

void Run(const BenchModelOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  const StepLog log;
  log("loading " + o.model);
  const double resident_before = ResidentBytes();
  const LoadedModel loaded = LoadModel(o.model, o.weights);
  const double resident_bytes = ResidentBytes() - resident_before;
  const auto file_bytes = static_cast<double>(std::filesystem::file_size(o.model));
  const DecoderModel& model = loaded.model;
  const std::string load_before = LoadAverages();
  std::optional<LlamaCppPeer> peer;
  if (!o.peer.empty()) {
    peer.emplace(
        PeerOptions{.dir = o.peer, .model = o.model, .text = o.peer_text, .threads = NumThreads(), .reps = o.reps});
  }
  const LlamaCppPeer* peer_ptr = peer ? &*peer : nullptr;
  // Token ids do not change the work; a fixed random sequence keeps runs alike.
  std::mt19937 rng(1);
  std::vector<std::int32_t> tokens(o.ctx);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % model.hparams().vocab_size);

  log("measuring the FMA peak");
  const bench::FmaPeak peak = bench::MeasureFmaPeak();
  log("measuring the int8 dot-product peak");
  const bench::Int8Peak int8_peak = bench::MeasureInt8Peak();
  std::vector<PrefillRun> prefills;
  for (const PrefillKind kind : {PrefillKind::kPrompt, PrefillKind::kPerplexity, PrefillKind::kEveryLogit}) {
    prefills.push_back(MeasurePrefill(o, model, tokens, kind, peak, int8_peak, peer_ptr, log));
  }
  const PrefillRun& prompt = prefills[0];
  const PrefillRun& pass = prefills[1];
  const PrefillRun& every = prefills[2];

  log("the copy bandwidth: its buffers and a warm-up copy");
  bench::CopyProbe probe;
  std::vector<DecodeRun> runs = MeasureDecode(o, model, rng, probe, peer_ptr, log);
  log("the copy bandwidth: copies up to " + std::to_string(kCopyRuns) + " timed runs");
  probe.RunUntil(kCopyRuns);
  const bench::CopyBandwidth copy = probe.Best();
  log("done");
  for (DecodeRun& run : runs) {
    run.gbps = run.bytes_per_token * run.tokens_per_s / 1e9;
    run.ratio = run.gbps / copy.gbps;
  }
  const bool stored = o.weights.storage == WeightStorage::kAsStored;
  const char* weights = stored ? "stored" : "f32";
  const char* activations = o.weights.activations == DotActivations::kInt8 ? "int8" : "f32";

  std::vector<BenchFloor> floors;
  floors.reserve(prefills.size() + 2 * runs.size() + 1);
  for (const PrefillRun& run : prefills) {
    floors.push_back({std::string(TraitsOf(run.kind).name) + " ratio to the FMA peak >= 0.7", run.ratio >= 0.7});
  }
  const std::int64_t largest = *std::max_element(o.decode_caches.begin(), o.decode_caches.end());
  const DecodeRun* plain = nullptr;
  for (const DecodeRun& run : runs) {
    if (run.method == FormatContextExtension(ContextExtension{})) {
      floors.push_back(
          {"decode (none) after " + std::to_string(run.cache_tokens) + " tokens >= 0.5 of the copy bandwidth",
           run.ratio >= 0.5});
      if (run.cache_tokens == largest) plain = &run;
    }
  }
  for (const DecodeRun& run : runs) {
    if (plain != nullptr && run.cache_tokens == largest && &run != plain && run.method != plain->method) {
      floors.push_back({run.method + " step after " + std::to_string(largest) + " tokens <= 1.5x none's",
                        run.tokens_per_s * 1.5 >= plain->tokens_per_s});
    }
  }
  if (stored) floors.push_back({"resident model <= 1.5x the GGUF file", resident_bytes <= 1.5 * file_bytes});
  // Issue 52's floor: at least 1.5x llama.cpp on every row, side by side.
  if (peer) {
    for (const PrefillRun& run : prefills) {
      if (run.kind == PrefillKind::kEveryLogit) continue;  // no peer figure
      floors.push_back({std::string(TraitsOf(run.kind).name) + " >= 1.5x llama.cpp",
                        run.tokens_per_s >= 1.5 * run.peer_tokens_per_s});
    }
    for (const DecodeRun& run : runs) {
      if (run.peer_tokens_per_s > 0) {
        floors.push_back({"decode after " + std::to_string(run.cache_tokens) + " tokens >= 1.5x llama.cpp",
                          run.tokens_per_s >= 1.5 * run.peer_tokens_per_s});
      }
    }
  }
  const std::string load_after = LoadAverages();

  if (o.json) {
    nlohmann::ordered_json decode = nlohmann::ordered_json::array();
    for (const DecodeRun& run : runs) {
      decode.push_back({{"method", run.method},
                        {"cache_tokens", run.cache_tokens},
                        {"tokens_per_s", run.tokens_per_s},
                        {"bytes_per_token", run.bytes_per_token},
                        {"gbps", run.gbps},
                        {"ratio", run.ratio}});
      if (run.peer_tokens_per_s > 0) decode.back()["peer_tokens_per_s"] = run.peer_tokens_per_s;
    }
    // The every-logit pass at the top level (the pass measured first, before
    // the prompt prefill and the sliding perplexity pass), those two beside it.
    const auto prefill_json = [&](const PrefillRun& run) {
      return nlohmann::ordered_json{{"tokens_per_s", run.tokens_per_s},
                                    {"flops_per_token", run.flops / static_cast<double>(o.ctx)},
                                    {"gflops", run.gflops},
                                    {"ratio", run.ratio},
                                    {"int8_ratio", run.int8_ratio},
                                    {"seconds", run.seconds}};
    };
    nlohmann::ordered_json out{{"tokens_per_s", every.tokens_per_s},
                               {"flops_per_token", every.flops / static_cast<double>(o.ctx)},
                               {"gflops", every.gflops},
                               {"peak_gflops", peak.gflops},
                               {"ratio", every.ratio},
                               {"int8_peak_gops", int8_peak.gops},
                               {"int8_instruction", int8_peak.instruction},
                               {"int8_ratio", every.int8_ratio},
                               {"seconds", every.seconds},
                               {"prompt_prefill", prefill_json(prompt)},
                               {"perplexity_pass", prefill_json(pass)},
                               {"weights", weights},
                               {"activations", activations},
                               {"weight_bytes", model.WeightBytes()},
                               {"resident_bytes", resident_bytes},
                               {"file_bytes", file_bytes},
                               {"decode", decode},
                               {"copy_gbps", copy.gbps},
                               {"copy_runs", copy.runs},
                               {"ctx", o.ctx},
                               {"threads", NumThreads()},
                               {"target", peak.target},
                               {"model", o.model}};
    if (peer) {
      out["peer"] = {{"build", peer->Build()},
                     {"prompt_prefill_tokens_per_s", prompt.peer_tokens_per_s},
                     {"perplexity_pass_tokens_per_s", pass.peer_tokens_per_s},
                     {"perplexity_windows", kPeerWindows},
                     {"cpu", CpuDescription()},
                     {"load_before", load_before},
                     {"load_after", load_after}};
    }
    WritePeerFile(o, peer_ptr, prefills, runs, peak, copy, load_before, load_after);
    std::cout << out.dump(2) << "\n";
    return;
  }
  const DecoderHyperparams& hp = model.hparams();
  std::printf("model %s: %lld layers, d %lld, %lld/%lld heads x %lld, ffn %lld, vocab %lld (loaded in %.1f s)\n",
              o.model.c_str(), static_cast<long long>(hp.block_count), static_cast<long long>(hp.embedding_length),
              static_cast<long long>(hp.head_count), static_cast<long long>(hp.head_count_kv),
              static_cast<long long>(hp.head_dim), static_cast<long long>(hp.feed_forward_length),
              static_cast<long long>(hp.vocab_size), loaded.load_seconds);
  std::printf("weights %s, decode activations %s: %.1f MB held, %.1f MB resident for a %.1f MB file (%.2fx)\n", weights,
              activations, model.WeightBytes() / 1e6, resident_bytes / 1e6, file_bytes / 1e6,
              resident_bytes / file_bytes);
  for (const PrefillRun& run : prefills) {
    std::printf("%s (%s) of %lld tokens, %d threads, best of %d: %.3f s\n", TraitsOf(run.kind).name,
                TraitsOf(run.kind).rows, static_cast<long long>(o.ctx), NumThreads(), o.reps, run.seconds);
    std::printf(
        "  %.1f tokens/s, %.1f MFLOP/token, %.1f GFLOP/s = %.1f%% of the FMA peak measured now (%.1f GFLOP/s, %s)\n",
        run.tokens_per_s, run.flops / static_cast<double>(o.ctx) / 1e6, run.gflops, 100 * run.ratio, peak.gflops,
        peak.target);
    if (int8_peak.gops > 0) {
      std::printf("  = %.1f%% of the int8 dot-product peak measured now (%.1f GOP/s, %s)\n", 100 * run.int8_ratio,
                  int8_peak.gops, int8_peak.instruction);
    }
  }
  std::printf(
      "decode, %lld steps each, best of %d, against the copy bandwidth measured between them (%.1f GB/s, best of "
      "%d):\n",
      static_cast<long long>(o.decode_tokens), o.reps, copy.gbps, copy.runs);
  for (const DecodeRun& run : runs) {
    std::printf("  %-34s after %6lld cached tokens: %7.1f tokens/s, %6.1f MB a step = %5.1f GB/s = %5.1f%%\n",
                run.method.c_str(), static_cast<long long>(run.cache_tokens), run.tokens_per_s,
                run.bytes_per_token / 1e6, run.gbps, 100 * run.ratio);
  }
  if (peer) {
    std::printf("side by side with %s, %d threads each, alternating; load averages %s before, %s after:\n%s",
                peer->Build().c_str(), NumThreads(), load_before.c_str(), load_after.c_str(),
                PeerTable(o, prefills, runs).c_str());
  }
  WritePeerFile(o, peer_ptr, prefills, runs, peak, copy, load_before, load_after);
  PrintFloorVerdict(floors);
}

}  // namespace

void AddBenchModelCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchModelOptions>();
  CLI::App* model = bench.add_subcommand(
      "model", std::string("Prefill tokens/s of a GGUF model and its ratio to the FMA peak") + kFloorsHelp);
  AddModelOption(*model, o->model);
  AddWeightOptions(*model, o->weights);
  model
      ->add_option("--ctx", o->ctx,
                   "Tokens in the prefill window (at least 4: the perplexity pass scores its second half)")
      ->check(CLI::Range(4, 1 << 20))
      ->capture_default_str();
  model->add_option("--reps", o->reps, "Timed repetitions of the prefill and of each decode run (best counts)")
      ->check(CLI::Range(1, 100));
  model->add_option("--decode-cache", o->decode_caches, "Tokens in the cache before the decode steps (a list)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  model->add_option("--decode-tokens", o->decode_tokens, "Decode steps timed per cache size and method")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  auto methods = std::make_shared<std::vector<ContextExtension>>(o->methods);
  AddMethodsOption(*model, methods, "\"none;rerope:window=512;self-extend:group=8,window=512\" (decode)");
  model->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  model->add_flag("--json", o->json, "Print one JSON object");
  CLI::Option* peer = model->add_option(
      "--peer", o->peer,
      "Directory of llama.cpp's llama-bench and llama-perplexity (scripts/bench-peer setup): each row "
      "measured by llama.cpp too, right after posenc, and a table of posenc / llama.cpp");
  model->add_option("--peer-text", o->peer_text, "The text llama-perplexity reads (--peer)")
      ->capture_default_str()
      ->needs(peer);
  model->add_option("--peer-out", o->peer_out, "Also write the side-by-side table, with the machine, to this .md file")
      ->needs(peer);
  model->callback([o, methods] {
    o->methods = *methods;
    o->model = ResolveInput("bench model", "--model", o->model, kDefaultModel);
    if (!o->peer.empty()) o->peer_text = ResolveInput("bench model", "--peer-text", o->peer_text, kDefaultStudyText);
    if (!o->peer_out.empty()) {
      const std::filesystem::path dir = std::filesystem::path(o->peer_out).parent_path();
      RequireOutputDirectory("bench model", "--peer-out", dir.empty() ? "." : dir.string());
    }
    Run(*o);
  });
}

}  // namespace posenc::cli
