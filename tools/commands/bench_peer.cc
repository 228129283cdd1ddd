#include "commands/bench_peer.h"

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "grid/bounded_program.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "bench model";
// A run of either program: Gemma 3's decode after 8,192 cached tokens fills
// the cache first (about 30 s a repetition on 2 cores).
constexpr double kTimeoutS = 900;

// Runs `program` with `args` through sh, keeping the last lines of its
// output (both streams): llama.cpp logs a model's metadata first, its
// results last, and RunBoundedProgram keeps only the first 4,000 bytes.
std::string RunTail(const std::string& program, const std::vector<std::string>& args, int lines) {
  // The program's exit status, not tail's (sh has no pipefail).
  std::vector<std::string> argv{"sh", "-c",
                                "out=$(\"$0\" \"$@\" 2>&1); status=$?; printf '%s\\n' \"$out\" | tail -n " +
                                    std::to_string(lines) + "; exit $status",
                                program};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProgramOutput out = RunBoundedProgram(argv, kTimeoutS);
  if (out.timed_out || !WIFEXITED(out.status) || WEXITSTATUS(out.status) != 0) {
    ThrowError(kOp, "peer", program,
               (out.timed_out ? "did not finish in time; its output: " : "failed; its output: ") + out.output);
  }
  return out.output;
}

}  // namespace

LlamaCppPeer::LlamaCppPeer(PeerOptions options) : o_(std::move(options)) {
  for (const char* program : {"llama-bench", "llama-perplexity"}) {
    const std::filesystem::path path = std::filesystem::path(o_.dir) / program;
    if (!std::filesystem::is_regular_file(path)) {
      ThrowError(kOp, "peer", o_.dir,
                 std::string("must hold llama.cpp's ") + program + " (scripts/bench-peer setup builds it)");
    }
  }
}

double LlamaCppPeer::BenchBest(const std::vector<std::string>& args) const {
  std::vector<std::string> all{"-m", o_.model, "-t", std::to_string(o_.threads), "-r", std::to_string(o_.reps),
                               "-o", "json"};
  all.insert(all.end(), args.begin(), args.end());
  // One test's JSON is about 60 lines.
  const std::string out = RunTail((std::filesystem::path(o_.dir) / "llama-bench").string(), all, 200);
  const std::size_t begin = out.find("[\n");
  nlohmann::json tests;
  try {
    tests = nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin));
  } catch (const nlohmann::json::exception&) {
    ThrowError(kOp, "peer", "llama-bench", "printed no JSON; its output: " + out);
  }
  if (!tests.is_array() || tests.size() != 1 || !tests[0].contains("samples_ts")) {
    ThrowError(kOp, "peer", "llama-bench", "printed no single test with samples_ts; its output: " + out);
  }
  const nlohmann::json& test = tests[0];
  build_ = "llama.cpp " + test.value("build_commit", std::string("(commit unknown)"));
  double best = 0;
  for (const auto& ts : test["samples_ts"]) best = std::max(best, ts.get<double>());
  return best;
}

double LlamaCppPeer::PromptPrefill(std::int64_t tokens) const {
  return BenchBest({"-p", std::to_string(tokens), "-n", "0"});
}

double LlamaCppPeer::Decode(std::int64_t cached, std::int64_t steps) const {
  return BenchBest({"-p", "0", "-n", std::to_string(steps), "-d", std::to_string(cached)});
}

double LlamaCppPeer::PerplexityPass(std::int64_t tokens, std::int64_t windows) const {
  const std::string n = std::to_string(tokens);
  const std::string out = RunTail((std::filesystem::path(o_.dir) / "llama-perplexity").string(),
                                  {"-m", o_.model, "-f", o_.text, "-c", n, "-b", n, "--chunks", std::to_string(windows),
                                   "-t", std::to_string(o_.threads), "--perf", "-lv", "4"},
                                  40);
  // --perf -lv 4 (the timings are logged at that verbosity): llama_perf_context_print's "prompt eval time =
  // X ms / N tokens (Y ms per token, Z tokens per second)", over every window's batches (the warm-up before
  // them is not counted).
  static const std::regex kLine(R"(prompt eval time =\s*[0-9.]+ ms /\s*([0-9]+) tokens \(.*,\s*([0-9.]+) tokens per)");
  std::smatch match;
  if (!std::regex_search(out, match, kLine)) {
    ThrowError(kOp, "peer", "llama-perplexity", "printed no prompt eval time; its output: " + out);
  }
  if (std::stoll(match[1].str()) != tokens * windows) {
    ThrowError(kOp, "peer", "llama-perplexity",
               "evaluated " + match[1].str() + " tokens, not " + std::to_string(tokens * windows) +
                   " (is --peer-text long enough?); its output: " + out);
  }
  return std::stod(match[2].str());
}

std::string CpuDescription() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(cpuinfo, line) && (model.empty() || flags.empty())) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (model.empty() && line.rfind("model name", 0) == 0) model = value;
    if (flags.empty() && key == "flags") flags = value;
  }
  // The SIMD extensions that either engine's kernels choose between.
  static const std::set<std::string> kShown{"avx2",        "fma",         "f16c",        "avx512f",  "avx512bw",
                                            "avx512vl",    "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_int8",
                                            "avx512_fp16", "avx512vbmi",  "asimd",       "asimddp",  "i8mm"};
  std::istringstream words(flags);
  std::string shown, word;
  while (words >> word) {
    if (kShown.contains(word)) shown += (shown.empty() ? "" : " ") + word;
  }
  return (model.empty() ? std::string("unknown CPU") : model) + " (" +
         (shown.empty() ? "no SIMD flags listed" : shown) + ")";
}

std::string LoadAverages() {
  std::ifstream loadavg("/proc/loadavg");
  double one = 0, five = 0, fifteen = 0;
  if (!(loadavg >> one >> five >> fifteen)) return "unknown";
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << one << " / " << five << " / " << fifteen;
  return out.str();
}

}  // namespace posenc::cli
