#include "grid/grid_executor.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <system_error>
#include <thread>

#include "grid/bounded_program.h"
#include "grid/child_watch.h"
#include "grid/grid_lock.h"
#include "posenc/error.h"
#include "posenc/input_file.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, for execve

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

// Starts a cell's process, `argv` (argv[0] a path), with stdout and stderr
// to `log`; returns its pid. The cell dies with this process: a SIGKILL,
// which no handler here sees (ChildWatch forwards the others), would
// otherwise leave it computing under PID 1, beside the cell a resume starts
// again. Linux's PR_SET_PDEATHSIG does it, set between fork and exec (and
// kept across exec); a parent gone before it was set is caught by getppid.
pid_t SpawnCell(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execve's type
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw std::system_error(errno, std::generic_category(), "cannot write " + log);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec: this process has threads.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::execve(args[0], args.data(), environ);
    constexpr char kFailed[] = "grid: cannot start the cell's posenc (execve failed)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kFailed, sizeof kFailed - 1);
    ::_exit(127);
  }
  const int error = errno;
  ::close(out);
  if (pid < 0) throw std::system_error(error, std::generic_category(), "cannot start " + argv[0]);
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

// Runs sbatch or squeue within --slurm-timeout; throws posenc::Error saying
// what happened when it gave no answer in time.
ProgramOutput RunSlurmProgram(const std::vector<std::string>& argv, const std::string& subject,
                              const ExecutorOptions& o) {
  ProgramOutput out = RunBoundedProgram(argv, o.slurm_timeout_s);
  if (out.timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", o.slurm_timeout_s);
    ThrowError(kOp, argv[0], subject,
               std::string("gave no answer in ") + seconds + " s (--slurm-timeout), so it was killed" +
                   (out.output.empty() ? "" : "; it printed: " + EscapeControlBytes(out.output.substr(0, 200))));
  }
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

// A word for sh: in single quotes, each ' written as '\''. Any byte,
// newlines included, stays inside the word.
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

// A stop signal came while cells run: sends it on to each, waits for them
// all, and dies of it (ChildWatch). Their finished cells are kept; a cell
// cut short leaves only a temporary file, so the same command resumes.
[[noreturn]] void StopCells(const std::map<pid_t, std::string>& running, int signal) {
  std::fprintf(stderr, "grid: %s: stopping %zu running cell(s); the finished cells are kept\n", strsignal(signal),
               running.size());
  for (const auto& [pid, key] : running) ::kill(pid, signal);
  for (const auto& [pid, key] : running) WaitFor(pid);
  ChildWatch::DieOf(signal);
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
  const ChildWatch watch;
  while (true) {
    if (const int signal = watch.StopSignal(); signal != 0) StopCells(running, signal);
    while (running.size() < static_cast<std::size_t>(jobs) && next < keys.size() && failed.empty()) {
      const std::string& key = keys[next++];
      running[SpawnCell({program, "grid", "cell", dir, key, "--threads", std::to_string(threads)},
                        CellLogPath(dir, key))] = key;
    }
    if (running.empty()) break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
    if (pid <= 0) {
      watch.Wait();  // a cell's end or a stop signal
      continue;
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

bool Matches(const std::string& text, const char* pattern) { return std::regex_match(text, std::regex(pattern)); }

// The Slurm values that go into the batch script's #SBATCH lines, each
// checked against Slurm's own syntax, so that no text can become a line of
// its own there (a newline in --partition once ran as a shell command).
void CheckSlurmOptions(const ExecutorOptions& o) {
  if (!o.partition.empty()) {
    Require(Matches(o.partition, "[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*"), kOp, "--partition", o.partition,
            "must be Slurm partition names (letters, digits, _ . -), separated by commas");
  }
  if (!o.time.empty()) {
    Require(Matches(o.time, "[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|infinite|unlimited|INFINITE|UNLIMITED"),
            kOp, "--time", o.time,
            "must be a Slurm time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
            "days-hours:minutes, days-hours:minutes:seconds, or unlimited");
  }
  if (!o.mem.empty()) {
    Require(Matches(o.mem, "[0-9]+[KMGTkmgt]?"), kOp, "--mem", o.mem,
            "must be a Slurm memory size: a whole number with an optional unit K, M, G or T (default M)");
  }
  Require(std::isfinite(o.slurm_timeout_s) && o.slurm_timeout_s > 0 && o.slurm_timeout_s <= 3600, kOp,
          "--slurm-timeout", o.slurm_timeout_s, "must be in (0, 3600] seconds");
}

// `path` as a Slurm filename pattern: each % doubled, so only the %a we add
// is replaced.
std::string SlurmPatternQuote(const std::string& path) {
  std::string out;
  for (const char c : path) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
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
  // Every path of the script is in sh quotes; the #SBATCH lines hold only
  // values of Slurm's syntax (CheckSlurmOptions; the kind is one of the
  // known names). The log pattern, a path, goes to sbatch as an argument:
  // an #SBATCH line cannot quote every path.
  const std::string log_pattern = SlurmPatternQuote(slurm_dir + "/" + stamp) + "-%a.log";
  std::string script = "#!/bin/sh\n# posenc " + grid.kind + " grid " + EscapeControlBytes(abs_dir) + ": " +
                       std::to_string(keys.size()) + " cells, one array task each (posenc grid cell).\n";
  script += "# Submitted as: sbatch --parsable --output=<" + EscapeControlBytes(slurm_dir) + "/" + stamp +
            "-%a.log> <this script>\n";
  script += "#SBATCH --job-name=posenc-" + grid.kind + "\n";
  script += "#SBATCH --array=0-" + std::to_string(keys.size() - 1) + "\n";
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
  const ProgramOutput submitted =
      RunSlurmProgram({"sbatch", "--parsable", "--output=" + log_pattern, script_path}, FormatValue(script_path), o);
  std::string id = submitted.output.substr(0, submitted.output.find(';'));  // "id[;cluster]"
  Require(WIFEXITED(submitted.status) && WEXITSTATUS(submitted.status) == 0 && !id.empty() &&
              id.find_first_not_of("0123456789") == std::string::npos,
          kOp, "sbatch", script_path,
          "failed (" + DescribeStatus(submitted.status) + "): " + EscapeControlBytes(submitted.output));
  std::ofstream(slurm_dir + "/jobs", std::ios::app) << id << " " << stamp << " " << keys.size() << "\n";
  std::fprintf(stderr, "grid: submitted Slurm job array %s: %zu cells (%s), logs %s/%s-*.log\n", id.c_str(),
               keys.size(), script_path.c_str(), slurm_dir.c_str(), stamp.c_str());
  return id;
}

// Whether Slurm still has the job (pending or running): squeue prints one
// state a line (PENDING, RUNNING, ...) for each task it still has.
bool SlurmJobActive(const std::string& id, const ExecutorOptions& o) {
  const std::string job = "job " + id;
  const ProgramOutput q = RunSlurmProgram({"squeue", "-h", "-j", id, "-o", "%T"}, job, o);
  if (WIFEXITED(q.status) && WEXITSTATUS(q.status) == 0) {
    Require(!q.cut && Matches(q.output, "([A-Z_]+\n)*[A-Z_]*"), kOp, "squeue", Verbatim{job},
            "printed what is not a list of job states (PENDING, RUNNING, ...): \"" +
                EscapeControlBytes(q.output.substr(0, 200)) + (q.output.size() > 200 ? "…" : "") + "\"");
    return !q.output.empty();
  }
  // Once a job has left the controller's memory, squeue calls its id invalid.
  if (q.output.find("Invalid job id") != std::string::npos) return false;
  ThrowError(kOp, "squeue", job, "failed (" + DescribeStatus(q.status) + "): " + EscapeControlBytes(q.output));
}

// Polls until the job has left the queue, reporting cells as their files
// appear (existence only: the merge reads and checks them).
void WaitForSlurm(const std::string& dir, const std::string& id, const std::vector<std::string>& keys,
                  const ExecutorOptions& o) {
  Require(OnPath("squeue"), kOp, "executor", Verbatim{"slurm"}, "needs squeue on PATH to wait (or use --no-wait)");
  const auto start = std::chrono::steady_clock::now();
  std::size_t reported = 0;
  for (int poll = 0;; ++poll) {
    std::this_thread::sleep_for(std::chrono::seconds(poll < 5 ? 1 : 5));
    const bool active = SlurmJobActive(id, o);
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
  // A name checked against the names (help: TEXT:{local,slurm}), then
  // mapped: a CheckedTransformer to the enum would show CLI11's mapping in
  // the help and take the enum's numbers too.
  command
      .add_option_function<std::string>(
          "--executor",
          [o](const std::string& name) { o->executor = name == "slurm" ? Executor::kSlurm : Executor::kLocal; },
          "local: cells run here, several at once; slurm: one sbatch job array over the missing cells")
      ->transform(CLI::IsMember({"local", "slurm"}, CLI::ignore_case))
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
  command.add_flag("--plan-only", o->plan_only,
                   "Write the grid (DIR/grid.json) and compute nothing: posenc grid status DIR prints its cost");
  command
      .add_option("--slurm-timeout", o->slurm_timeout_s,
                  "slurm: seconds sbatch and each squeue may take to answer before posenc gives up")
      ->capture_default_str();
}

bool RunGrid(const std::string& dir, const Grid& grid, const ExecutorOptions& o, GridReport* report) {
  if (o.executor == Executor::kSlurm) CheckSlurmOptions(o);
  const GridLock lock(dir);  // before grid.json: a second run changes nothing
  WriteGrid(dir, grid);
  const GridScan scan = ScanGrid(dir, grid);
  RequireNoForeignCells(dir, scan);
  for (const std::string& why : scan.unreadable) {
    std::fprintf(stderr, "grid: not a whole cell (cut short by an interrupt?), computed again: %s\n", why.c_str());
  }
  std::fprintf(stderr, "grid: %s: %zu cells, %zu finished earlier, %zu to compute\n", dir.c_str(), grid.cells.size(),
               scan.finished.size(), scan.missing.size());
  if (o.plan_only) {
    std::printf("planned %s: %zu cells to compute. Its cost: posenc grid status %s\n", dir.c_str(), scan.missing.size(),
                dir.c_str());
    return false;
  }
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
      WaitForSlurm(dir, id, keys, o);
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
    const std::string unreadable =
        scan.unreadable.empty() ? "" : " (" + std::to_string(scan.unreadable.size()) + " cut short or invalid)";
    ThrowError(kOp, "dir", FormatValue(dir),
               std::to_string(scan.missing.size()) + " of " + std::to_string(grid.cells.size()) + " cells are missing" +
                   unreadable + ", so the report is not merged:" + list);
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

void RunGridAndReport(const char* op, const std::string& dir, const Grid& grid, const ExecutorOptions& options,
                      bool json, std::chrono::steady_clock::time_point start) {
  GridReport report;
  if (!RunGrid(dir, grid, options, &report)) return;
  PrintGridReport(report, json);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(json ? stderr : stdout, "%s: this run took %.0f s (%.1f min) of wall time\n", op, wall, wall / 60);
}

}  // namespace posenc::cli
