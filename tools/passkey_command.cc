// posenc passkey [--lengths L,...] [--depths D,...] [--trials N] [--methods M;...]
//                [--seed S] [--max-new-tokens T] [--out DIR] [--model FILE] [--threads T] [--json]
//
// Passkey retrieval (include/posenc/passkey.h) over a grid: every method at
// every length, the key at every depth, N trials (keys) each. Each finished
// trial is appended to DIR/cells.jsonl at once, so an interrupted run keeps
// what it finished and a rerun resumes with only what is missing; the
// table, the JSON and the heat maps are written from all cells at the end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "commands.h"
#include "model_inputs.h"
#include "output_files.h"
#include "passkey_report.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "posenc/passkey.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "passkey";

struct PasskeyOptions {
  std::string model = kDefaultModelPath;
  std::vector<std::int64_t> lengths{4096, 10240};
  std::vector<double> depths{0.1, 0.5, 0.9};
  std::int64_t trials = 1;
  std::vector<ContextExtension> methods;  // empty: the default set below
  std::uint64_t seed = 0;
  std::int64_t max_new_tokens = 12;
  std::string out = "build/passkey";
  int threads = 0;
  bool json = false;
};

// The cells a previous run finished with the same model, seed and token
// budget. A last line cut short by an interrupt is skipped with a note.
std::vector<PasskeyCell> ReadFinishedCells(const std::string& path, const std::string& fingerprint) {
  std::vector<PasskeyCell> cells;
  std::ifstream in(path);
  std::string line;
  std::int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
      std::fprintf(stderr, "passkey: %s line %lld is not a whole cell (an interrupted write?): skipped\n", path.c_str(),
                   static_cast<long long>(number));
      continue;
    }
    if (json.value("fingerprint", std::string()) != fingerprint) continue;
    cells.push_back(PasskeyCellFromJson(json));
  }
  return cells;
}

// Appends one line and syncs it, so a finished cell survives a crash.
void AppendCell(const std::string& path, const PasskeyCell& cell, const std::string& fingerprint) {
  nlohmann::ordered_json json = PasskeyCellJson(cell);
  json["fingerprint"] = fingerprint;
  std::string line = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::FILE* f = std::fopen(path.c_str(), "a+");
  Require(f != nullptr, kOp, "out", path, "cannot be opened for appending");
  // After a line cut short by an interrupt, start on a line of its own.
  if (std::fseek(f, -1, SEEK_END) == 0 && std::fgetc(f) != '\n') line.insert(line.begin(), '\n');
  const bool ok =
      std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  Require(ok && closed, kOp, "out", path, "cannot be written (disk full?)");
}

void Run(const PasskeyOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  for (const double depth : o.depths) {
    Require(depth >= 0 && depth <= 1, kOp, "--depths", depth, "must be in [0, 1] (the share of filler before the key)");
  }
  std::vector<std::int64_t> lengths = o.lengths;
  std::vector<double> depths = o.depths;
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  std::vector<ContextExtension> methods = o.methods;
  if (methods.empty()) methods = ParseContextExtensionList("none;yarn;self-extend;lambda");

  const LoadedModel loaded = LoadModel(o.model);
  const LlamaHyperparams& hp = loaded.model.hparams();
  PasskeyReport report{.model = o.model,
                       .train_length = hp.context_length,
                       .seed = o.seed,
                       .max_new_tokens = o.max_new_tokens,
                       .threads = NumThreads(),
                       .lengths = lengths,
                       .depths = depths,
                       .trials = o.trials};
  for (const auto& m : methods) report.methods.push_back(FormatContextExtension(m));

  // Every plan and prompt is made before any trial runs: a method that
  // cannot work at a length, or a length too short for the prompt, fails now.
  struct Planned {
    ExtensionPlan plan;
    bool same_as_none = false;
  };
  std::vector<std::vector<Planned>> plans(lengths.size());  // [length][method]
  for (std::size_t l = 0; l < lengths.size(); ++l) {
    for (const auto& m : methods) {
      ExtensionPlan plan = PlanContextExtension(m, hp.rope, hp.context_length, lengths[l]);
      const bool same = SameAsModelRope(plan, hp.rope, lengths[l]);
      plans[l].push_back({std::move(plan), same});
    }
    MakePasskeyPrompt(loaded.tokenizer, lengths[l], 0.5, PasskeyKey(o.seed, 0), o.max_new_tokens);
  }

  std::filesystem::create_directories(o.out);
  const std::string cells_path = o.out + "/cells.jsonl";
  const std::string fingerprint =
      o.model + " seed " + std::to_string(o.seed) + " max_new_tokens " + std::to_string(o.max_new_tokens);
  const std::vector<PasskeyCell> finished = ReadFinishedCells(cells_path, fingerprint);
  const auto cached = [&](const std::string& resolved, std::int64_t length, double depth, std::int64_t trial) {
    return std::find_if(finished.begin(), finished.end(), [&](const PasskeyCell& c) {
      return c.resolved == resolved && c.length == length && c.depth == depth && c.trial == trial;
    });
  };
  std::int64_t reused = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t l = 0; l < lengths.size(); ++l) {
    for (const double depth : depths) {
      for (std::int64_t trial = 0; trial < o.trials; ++trial) {
        const std::string key = PasskeyKey(o.seed, trial);
        std::optional<PasskeyPrompt> prompt;
        std::optional<PasskeyCell> model_rope;  // none's trial, shared by the methods equal to it
        for (std::size_t m = 0; m < methods.size(); ++m) {
          const Planned& planned = plans[l][m];
          PasskeyCell cell{.method = report.methods[m],
                           .resolved = FormatContextExtension(planned.plan.resolved),
                           .length = lengths[l],
                           .depth = depth,
                           .trial = trial,
                           .key = key,
                           .same_as_none = planned.same_as_none};
          // A finished trial to reuse: from an earlier run, or none's of this
          // run for a method that is the model's own RoPE here.
          const std::string stored_as = planned.same_as_none ? "none" : cell.resolved;
          std::optional<PasskeyCell> earlier;
          if (auto it = cached(stored_as, lengths[l], depth, trial); it != finished.end()) {
            earlier = *it;
            ++reused;
          } else if (planned.same_as_none) {
            earlier = model_rope;
          }
          if (earlier) {
            if (planned.same_as_none) model_rope = earlier;
            earlier->method = cell.method;
            earlier->resolved = cell.resolved;
            earlier->same_as_none = cell.same_as_none;
            report.cells.push_back(*earlier);
            continue;
          }
          if (!prompt) prompt = MakePasskeyPrompt(loaded.tokenizer, lengths[l], depth, key, o.max_new_tokens);
          const PasskeyScore score =
              ScorePasskey(loaded.model, loaded.tokenizer, *prompt, planned.plan.attention, o.max_new_tokens);
          cell.prompt_tokens = static_cast<std::int64_t>(prompt->prompt.size());
          cell.found = score.generated_has_key;
          cell.exact = score.answer_exact;
          cell.answer_nll = score.answer_nll;
          cell.generated = score.generated;
          cell.seconds = score.seconds;
          // Stored under the form that identifies the computation: the
          // model's own RoPE as "none", whichever method asked for it.
          PasskeyCell stored = cell;
          stored.resolved = stored_as;
          AppendCell(cells_path, stored, fingerprint);
          if (planned.same_as_none) model_rope = stored;
          report.cells.push_back(cell);
          std::fprintf(stderr, "  L %lld depth %.2f trial %lld %s: %s%s, answer NLL %.3f, %.1f s: \"%s\"\n",
                       static_cast<long long>(lengths[l]), depth, static_cast<long long>(trial), cell.resolved.c_str(),
                       cell.found ? "found" : "not found", cell.exact ? ", exact" : "", cell.answer_nll, cell.seconds,
                       EscapeControlBytes(cell.generated).c_str());
        }
      }
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string md = o.out + "/passkey.md", json = o.out + "/passkey.json", png = o.out + "/passkey.png";
  const std::string markdown = PasskeyMarkdown(report);
  OutputFiles files(kOp);
  files.Write(md, markdown);
  files.Write(json, PasskeyJson(report));
  DrawPasskeyHeatmaps(report, png, files);
  files.Commit();
  if (o.json) {
    std::cout << PasskeyJson(report);
    return;
  }
  std::printf(
      "%s\nwrote %s, %s, %s (cells: %s)\npasskey: %zu trials, %lld from earlier runs, %.0f s (%.1f min) on %d "
      "threads\n",
      markdown.c_str(), md.c_str(), json.c_str(), png.c_str(), cells_path.c_str(), report.cells.size(),
      static_cast<long long>(reused), report.seconds, report.seconds / 60, report.threads);
}

}  // namespace

void AddPasskeyCommand(CLI::App& app) {
  auto o = std::make_shared<PasskeyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "passkey", "Passkey retrieval past the training length: a key hidden in filler, asked for at the end");
  cmd->add_option("--model", o->model, "GGUF model file (llama family)")->capture_default_str();
  cmd->add_option("--lengths", o->lengths, "Prompt lengths in tokens, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--depths", o->depths, "Depths of the key in [0, 1], comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--trials", o->trials, "Keys per (length, depth)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}))
      ->capture_default_str();
  AddMethodsOption(*cmd, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods),
                   "none yarn self-extend lambda");
  cmd->add_option("--seed", o->seed, "Seed of the keys")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens generated per trial")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{256}))
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Output directory (cells.jsonl, passkey.md, passkey.json, passkey.png)")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads (default: all)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "Print the JSON report");
  cmd->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
