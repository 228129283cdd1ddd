#include "grid_executor.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>
#include <thread>

#include "posenc/error.h"
#include "posenc/input_file.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, for posix_spawn

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// This program's own path: the cells run the very binary that planned them.
std::string ThisProgram() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot resolve /proc/self/exe: " + ec.message());
  return self.string();
}

// MemAvailable from /proc/meminfo (the physical memory where it is missing).
double AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  double kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit) {
    if (name == "MemAvailable:") return kib * 1024;
  }
  return static_cast<double>(PhysicalMemoryBytes());
}

std::string Last(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() <= bytes ? all : "…" + all.substr(all.size() - bytes);
}

// Starts `argv` with stdout and stderr to `log`; returns its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log, bool search_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: posix_spawn's type
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = search_path ? posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ)
                                : posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::system_error(error, std::generic_category(), "cannot start " + argv[0]);
  return pid;
}

int WaitFor(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
  }
  return status;
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

struct CommandOutput {
  int status = 0;
  std::string output;  // stdout and stderr together
};

// Runs a program found on PATH (sbatch, squeue) and returns what it printed.
CommandOutput RunProgram(const std::vector<std::string>& argv, const std::string& scratch) {
  const pid_t pid = Spawn(argv, scratch, true);
  CommandOutput out{.status = WaitFor(pid), .output = Last(scratch, 4000)};
  std::filesystem::remove(scratch);
  while (!out.output.empty() && (out.output.back() == '\n' || out.output.back() == ' ')) out.output.pop_back();
  return out;
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string FormatMinutes(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, seconds < 120 ? "%.0f s" : "%.1f min", seconds < 120 ? seconds : seconds / 60);
  return buffer;
}

// Missing cells, the most expensive first: the long ones do not end up
// alone at the end.
std::vector<std::string> MissingByCost(const Grid& grid, const GridScan& scan) {
  std::vector<std::string> keys = scan.missing;
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return grid.cells.at(a).flops > grid.cells.at(b).flops;
  });
  return keys;
}

void RunLocal(const std::string& dir, const Grid& grid, const std::vector<std::string>& keys,
              const ExecutorOptions& o) {
  const int cores = std::max(1U, std::thread::hardware_concurrency());
  double memory = 1;
  for (const std::string& key : keys) memory = std::max(memory, grid.cells.at(key).memory_bytes);
  int jobs = o.jobs;
  if (jobs == 0) {
    const auto fit = static_cast<int>(std::floor(0.8 * AvailableMemoryBytes() / memory));
    jobs = std::max(1, std::min({cores, fit, static_cast<int>(keys.size())}));
  }
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / jobs);
  double total_flops = 0, done_flops = 0;
  for (const std::string& key : keys) total_flops += grid.cells.at(key).flops;
  std::fprintf(stderr, "grid: %zu cells to compute in %s, %d at once, %d thread(s) each\n", keys.size(), dir.c_str(),
               jobs, threads);
  std::filesystem::create_directories(dir + "/logs");
  const std::string program = ThisProgram();
  const auto start = std::chrono::steady_clock::now();
  const GridKind& kind = FindGridKind(grid.kind);
  std::map<pid_t, std::string> running;
  std::vector<std::string> failed;
  std::size_t next = 0, done = 0;
  while (!running.empty() || (next < keys.size() && failed.empty())) {
    while (running.size() < static_cast<std::size_t>(jobs) && next < keys.size() && failed.empty()) {
      const std::string& key = keys[next++];
      running[Spawn({program, "grid", "cell", dir, key, "--threads", std::to_string(threads)}, CellLogPath(dir, key),
                    false)] = key;
    }
    int status = 0;
    const pid_t pid = ::wait(&status);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "wait");
    }
    const std::string key = running.at(pid);
    running.erase(pid);
    const GridCell& cell = grid.cells.at(key);
    ++done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed.push_back(key);
      std::fprintf(stderr, "  [%zu/%zu] %s: FAILED (%s), %s:\n%s\n", done, keys.size(), cell.label.c_str(),
                   DescribeStatus(status).c_str(), CellLogPath(dir, key).c_str(),
                   Last(CellLogPath(dir, key), 1500).c_str());
      continue;
    }
    done_flops += cell.flops;
    std::ifstream in(CellPath(dir, key));
    const nlohmann::json result = nlohmann::json::parse(in, nullptr, false);
    const double elapsed = Seconds(start);
    const double left = done_flops > 0 ? elapsed * (total_flops - done_flops) / done_flops : 0;
    std::fprintf(stderr, "  [%zu/%zu] %s: %s, %.1f s%s\n", done, keys.size(), cell.label.c_str(),
                 result.is_object() ? kind.summary(result.at("result")).c_str() : "?",
                 result.is_object() ? result.at("seconds").get<double>() : 0.0,
                 done < keys.size() ? ("; about " + FormatMinutes(left) + " left").c_str() : "");
  }
  if (!failed.empty()) {
    throw std::runtime_error("[grid] " + std::to_string(failed.size()) + " cell(s) failed, e.g. " +
                             grid.cells.at(failed.front()).label + " (log: " + CellLogPath(dir, failed.front()) +
                             "); the finished cells are kept: run the same command again to retry");
  }
}

// Submits one job array over `keys`; returns its job id.
std::string SubmitSlurmArray(const std::string& dir, const Grid& grid, const std::vector<std::string>& keys,
                             const ExecutorOptions& o) {
  Require(OnPath("sbatch"), kOp, "executor", Verbatim{"slurm"},
          "needs sbatch on PATH (Slurm's client, Debian package slurm-client), or use --executor local");
  const std::string abs_dir = std::filesystem::absolute(dir).lexically_normal().string();
  const std::string slurm_dir = abs_dir + "/slurm";
  std::filesystem::create_directories(slurm_dir);
  const std::string stamp = "array-" +
                            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()) +
                            "-" + std::to_string(::getpid());
  std::string key_list;
  double memory = 0;
  for (const std::string& key : keys) {
    key_list += key + "\n";
    memory = std::max(memory, grid.cells.at(key).memory_bytes);
  }
  const std::string keys_path = slurm_dir + "/" + stamp + ".keys", script_path = slurm_dir + "/" + stamp + ".sh";
  // Without --mem, ask for the cells' estimated peak plus a margin: Slurm's
  // default may be far less, or the whole node.
  const std::string mem =
      !o.mem.empty() ? o.mem : std::to_string(static_cast<std::int64_t>(memory * 1.25 / 1e6) + 256) + "M";
  std::string script = "#!/bin/sh\n# posenc " + grid.kind + " grid " + abs_dir + ": " + std::to_string(keys.size()) +
                       " cells, one array task each (posenc grid cell).\n";
  script += "#SBATCH --job-name=posenc-" + grid.kind + "\n";
  script += "#SBATCH --array=0-" + std::to_string(keys.size() - 1) + "\n";
  script += "#SBATCH --output=" + slurm_dir + "/" + stamp + "-%a.log\n";
  script += "#SBATCH --mem=" + mem + "\n";
  if (o.cpus_per_task > 0) script += "#SBATCH --cpus-per-task=" + std::to_string(o.cpus_per_task) + "\n";
  if (!o.partition.empty()) script += "#SBATCH --partition=" + o.partition + "\n";
  if (!o.time.empty()) script += "#SBATCH --time=" + o.time + "\n";
  const std::string threads = o.threads > 0 ? std::to_string(o.threads) : std::string("\"${SLURM_CPUS_PER_TASK:-1}\"");
  script += "key=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" " + ShellQuote(keys_path) + ")\n";
  script += "exec " + ShellQuote(ThisProgram()) + " grid cell " + ShellQuote(abs_dir) + " \"$key\" --threads " +
            threads + "\n";
  {
    std::ofstream(keys_path) << key_list;
    std::ofstream out(script_path);
    out << script;
    Require(out.good(), kOp, "out", slurm_dir, "cannot be written");
  }
  const CommandOutput submitted =
      RunProgram({"sbatch", "--parsable", script_path}, slurm_dir + "/" + stamp + ".sbatch");
  std::string id = submitted.output.substr(0, submitted.output.find(';'));  // "id[;cluster]"
  Require(WIFEXITED(submitted.status) && WEXITSTATUS(submitted.status) == 0 && !id.empty() &&
              id.find_first_not_of("0123456789") == std::string::npos,
          kOp, "sbatch", script_path, "failed (" + DescribeStatus(submitted.status) + "): " + submitted.output);
  std::ofstream(slurm_dir + "/jobs", std::ios::app) << id << " " << stamp << " " << keys.size() << "\n";
  std::fprintf(stderr, "grid: submitted Slurm job array %s: %zu cells (%s), logs %s/%s-*.log\n", id.c_str(),
               keys.size(), script_path.c_str(), slurm_dir.c_str(), stamp.c_str());
  return id;
}

// Whether Slurm still has the job (pending or running).
bool SlurmJobActive(const std::string& id, const std::string& scratch) {
  const CommandOutput q = RunProgram({"squeue", "-h", "-j", id, "-o", "%T"}, scratch);
  if (WIFEXITED(q.status) && WEXITSTATUS(q.status) == 0) return !q.output.empty();
  // Once a job has left the controller's memory, squeue calls its id invalid.
  if (q.output.find("Invalid job id") != std::string::npos) return false;
  ThrowError(kOp, "squeue", FormatValue(id), "failed (" + DescribeStatus(q.status) + "): " + q.output);
}

// Polls until the job has left the queue, reporting cells as their files
// appear (existence only: the merge reads and checks them).
void WaitForSlurm(const std::string& dir, const std::string& id, const std::vector<std::string>& keys) {
  Require(OnPath("squeue"), kOp, "executor", Verbatim{"slurm"}, "needs squeue on PATH to wait (or use --no-wait)");
  const auto start = std::chrono::steady_clock::now();
  std::size_t reported = 0;
  for (int poll = 0;; ++poll) {
    std::this_thread::sleep_for(std::chrono::seconds(poll < 5 ? 1 : 5));
    const bool active = SlurmJobActive(id, dir + "/slurm/squeue.out");
    const auto finished = static_cast<std::size_t>(std::count_if(
        keys.begin(), keys.end(), [&](const std::string& key) { return std::filesystem::exists(CellPath(dir, key)); }));
    if (finished != reported) {
      std::fprintf(stderr, "  job %s: %zu/%zu cells finished, %.0f s\n", id.c_str(), finished, keys.size(),
                   Seconds(start));
      reported = finished;
    }
    if (!active) return;
  }
}

}  // namespace

void AddExecutorOptions(CLI::App& command, const std::shared_ptr<ExecutorOptions>& o) {
  const std::map<std::string, Executor> executors{{"local", Executor::kLocal}, {"slurm", Executor::kSlurm}};
  command
      .add_option("--executor", o->executor,
                  "local: cells run here, several at once; slurm: one sbatch job array over the missing cells")
      ->transform(CLI::CheckedTransformer(executors, CLI::ignore_case))
      ->default_str("local");
  command.add_option("--jobs", o->jobs, "local: cells at once (default: as many as the cores and memory allow)")
      ->check(CLI::Range(1, 1024));
  command
      .add_option("--threads", o->threads,
                  "Threads per cell (default: the cores shared among the jobs; Slurm: "
                  "--cpus-per-task)")
      ->check(CLI::Range(1, 1024));
  command.add_option("--partition", o->partition, "slurm: sbatch --partition");
  command.add_option("--time", o->time, "slurm: sbatch --time (per cell)");
  command.add_option("--cpus-per-task", o->cpus_per_task, "slurm: sbatch --cpus-per-task (the threads of each cell)")
      ->check(CLI::Range(1, 1024));
  command.add_option("--mem", o->mem, "slurm: sbatch --mem (default: the cells' estimated peak + 25%)");
  command.add_flag("--no-wait", o->no_wait, "slurm: submit and return (posenc grid status/merge DIR follow up)");
}

bool RunGrid(const std::string& dir, const Grid& grid, const ExecutorOptions& o, GridReport* report) {
  WriteGrid(dir, grid);
  const GridScan scan = ScanGrid(dir, grid);
  RequireNoForeignCells(dir, scan);
  for (const std::string& why : scan.unreadable) {
    std::fprintf(stderr, "grid: not a whole cell (cut short by an interrupt?), computed again: %s\n", why.c_str());
  }
  std::fprintf(stderr, "grid: %s: %zu cells, %zu finished earlier, %zu to compute\n", dir.c_str(), grid.cells.size(),
               scan.finished.size(), scan.missing.size());
  const std::vector<std::string> keys = MissingByCost(grid, scan);
  if (!keys.empty()) {
    if (o.executor == Executor::kLocal) {
      RunLocal(dir, grid, keys, o);
    } else {
      const std::string id = SubmitSlurmArray(dir, grid, keys, o);
      if (o.no_wait) {
        std::printf(
            "submitted Slurm job %s: %zu cells. Follow up with\n  posenc grid status %s\n  posenc grid merge %s\n",
            id.c_str(), keys.size(), dir.c_str(), dir.c_str());
        return false;
      }
      WaitForSlurm(dir, id, keys);
    }
  }
  *report = MergeGrid(dir, grid);
  return true;
}

GridReport MergeGrid(const std::string& dir, const Grid& grid) {
  const GridScan scan = ScanGrid(dir, grid);
  RequireNoForeignCells(dir, scan);
  if (!scan.missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < scan.missing.size() && i < 5; ++i) {
      list += "\n  " + scan.missing[i] + " " + grid.cells.at(scan.missing[i]).label;
    }
    if (scan.missing.size() > 5) list += "\n  …";
    ThrowError(kOp, "dir", FormatValue(dir),
               std::to_string(scan.missing.size()) + " of " + std::to_string(grid.cells.size()) + " cells are missing" +
                   (scan.unreadable.empty() ? "" : " (" + std::to_string(scan.unreadable.size()) + " cut short)") +
                   ", so the report is not merged:" + list);
  }
  try {
    return FindGridKind(grid.kind).merge(grid, scan.finished, dir);
  } catch (const nlohmann::json::exception& e) {
    // ReadGrid checked grid.json; a cell's result is read here.
    ThrowError(kOp, "dir", FormatValue(dir),
               std::string("holds a finished cell whose result is not whole (") + e.what() +
                   "): remove the cells that were edited (grid status lists them) and run again");
  }
}

void PrintGridReport(const GridReport& report, bool json) {
  if (json) {
    std::cout << report.json;
    return;
  }
  std::string files;
  for (const std::string& f : report.files) files += (files.empty() ? "" : ", ") + f;
  std::printf("%s\nwrote %s\n%s\n", report.markdown.c_str(), files.c_str(), report.summary.c_str());
}

}  // namespace posenc::cli
