// The synthetic tasks' formats (include/posenc/tiny_lm_tasks.h): each
// writes its bytes left to right and records its answers.
#include "posenc/tiny_lm_tasks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>

#include "posenc/error.h"
#include "util/split_mix64.h"

namespace posenc {
namespace {

constexpr const char* kOp = "tasks";
constexpr std::array kTasks{TinyLmTask::kCopy, TinyLmTask::kRecall, TinyLmTask::kNeedle, TinyLmTask::kEven};
// Keeps the tasks' streams apart from the other users of a seed.
constexpr std::uint64_t kTaskSalt = 0x7461736b73657121ULL;  // "tasksq!"
// Far above any tiny model (tiny_lm's own limit on a length).
constexpr std::int64_t kMaxLength = std::int64_t{1} << 20;

constexpr std::int64_t kLetters = 26;
// Recall's keys are the capitals A-Z, one byte a key (matching a key is
// then one byte's match, as an induction head does); its values lower-case.
constexpr std::int64_t kRecallFirstKey = 'A';
constexpr std::int64_t kRecallKeys = kLetters;
constexpr std::int64_t kNeedleBytes = 4;  // "#ddd"
constexpr std::int64_t kAskBytes = 5;     // "?#ddd"

// The previous-byte rows' stream, apart from every task's (a task's is
// its enum value).
constexpr std::uint64_t kPreviousByteStream = 0x70726576ULL;  // "prev"

// Counters through SplitMix64: word i of sequence (stream, seed, index).
class Words {
 public:
  Words(TinyLmTask task, std::uint64_t seed, std::int64_t index)
      : Words(static_cast<std::uint64_t>(task), seed, index) {}
  Words(std::uint64_t stream, std::uint64_t seed, std::int64_t index)
      : key_(SplitMix64(SplitMix64(SplitMix64(seed ^ kTaskSalt) + stream) + static_cast<std::uint64_t>(index))) {}
  // Uniform in [0, n) up to n / 2^64.
  std::int64_t Below(std::int64_t n) {
    return static_cast<std::int64_t>(SplitMix64(key_ + counter_++) % static_cast<std::uint64_t>(n));
  }
  std::uint8_t Letter() { return static_cast<std::uint8_t>('a' + Below(kLetters)); }
  std::uint8_t Digit() { return static_cast<std::uint8_t>('0' + Below(10)); }

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

// Builds a sequence byte by byte; an answer's bytes are marked scored.
class Writer {
 public:
  explicit Writer(std::int64_t length) : length_(length) {
    sequence_.tokens.reserve(static_cast<std::size_t>(length + 1));
    sequence_.scored.assign(static_cast<std::size_t>(length), 0);
  }
  std::int64_t Position() const { return static_cast<std::int64_t>(sequence_.tokens.size()); }
  void Put(std::uint8_t byte) { sequence_.tokens.push_back(byte); }
  void Pad(std::int64_t bytes) {
    sequence_.tokens.insert(sequence_.tokens.end(), static_cast<std::size_t>(bytes), '.');
  }
  // `bytes` written as an answer whose source starts at token `source`;
  // its depth source / length unless given (the needle's placement).
  void Answer(std::span<const std::uint8_t> bytes, std::int64_t source, std::optional<double> depth = std::nullopt) {
    const std::int64_t first = Position();
    for (const std::uint8_t b : bytes) {
      sequence_.scored[static_cast<std::size_t>(Position() - 1)] = 1;
      Put(b);
    }
    sequence_.answers.push_back({.first = first - 1,
                                 .size = static_cast<std::int64_t>(bytes.size()),
                                 .depth = depth.value_or(static_cast<double>(source) / static_cast<double>(length_)),
                                 .distance = first - source});
  }
  TinyLmTaskSequence Finish() && { return std::move(sequence_); }

 private:
  std::int64_t length_;
  TinyLmTaskSequence sequence_;
};

// "<" s "|" then the bytes s[0], s[step], s[2 step], ... as answers, one a
// byte: copy (step 1, as many answers as s has bytes) and even (step 2,
// half as many); s as long as the length allows, "." before "<" for the rest.
TinyLmTaskSequence SelectFromString(std::int64_t length, Words& words, std::int64_t step) {
  // "<" s "|" and n / step answers: 2 + n + n / step of the length + 1 bytes.
  const std::int64_t answers = (length - 1) / (step + 1), n = step * answers;
  Writer w(length);
  w.Pad(length + 1 - 2 - n - answers);
  w.Put('<');
  const std::int64_t start = w.Position();
  std::vector<std::uint8_t> s(static_cast<std::size_t>(n));
  for (std::uint8_t& b : s) b = words.Letter();
  for (const std::uint8_t b : s) w.Put(b);
  w.Put('|');
  for (std::int64_t i = 0; i < answers; ++i) {
    w.Answer(std::span(s).subspan(static_cast<std::size_t>(step * i), 1), start + step * i);
  }
  return std::move(w).Finish();
}

// Pairs of a recall sequence of `length`, as many as queries: 2 bytes
// each, at most one a key.
std::int64_t RecallPairs(std::int64_t length) { return std::min(kRecallKeys, length / 4); }

TinyLmTaskSequence Recall(std::int64_t length, Words& words) {
  const std::int64_t pairs = RecallPairs(length);
  // Distinct keys: the first `pairs` of a Fisher-Yates shuffle of all of
  // them; the queries ask each once, in an order shuffled the same way.
  const auto shuffle = [&](std::vector<std::int64_t>& v, std::int64_t first) {
    for (std::int64_t i = 0; i < first; ++i) {
      std::swap(v[i], v[i + words.Below(static_cast<std::int64_t>(v.size()) - i)]);
    }
  };
  std::vector<std::int64_t> keys(static_cast<std::size_t>(kRecallKeys));
  std::iota(keys.begin(), keys.end(), 0);
  shuffle(keys, pairs);
  std::vector<std::int64_t> order(static_cast<std::size_t>(pairs));
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, pairs);
  std::vector<std::uint8_t> values(static_cast<std::size_t>(pairs));
  std::vector<std::int64_t> value_at(static_cast<std::size_t>(pairs));
  // The context's bytes beyond the pairs are "." spread evenly before them,
  // so that the pairs span the whole context at any length.
  const std::int64_t gaps = length + 1 - 1 - 4 * pairs;
  Writer w(length);
  for (std::int64_t p = 0; p < pairs; ++p) {
    w.Pad((p + 1) * gaps / pairs - p * gaps / pairs);
    values[p] = words.Letter();
    value_at[p] = w.Position();
    w.Put(values[p]);
    w.Put(static_cast<std::uint8_t>(kRecallFirstKey + keys[p]));
  }
  w.Put('|');
  for (const std::int64_t p : order) {
    w.Put(static_cast<std::uint8_t>(kRecallFirstKey + keys[p]));
    w.Answer(std::span(values).subspan(static_cast<std::size_t>(p), 1), value_at[p]);
  }
  return std::move(w).Finish();
}

TinyLmTaskSequence Needle(std::int64_t length, Words& words, std::optional<double> depth) {
  const std::int64_t filler = length + 1 - kNeedleBytes - kAskBytes;
  const std::int64_t at = depth ? std::llround(*depth * static_cast<double>(filler)) : words.Below(filler + 1);
  const std::array<std::uint8_t, 3> digits{words.Digit(), words.Digit(), words.Digit()};
  Writer w(length);
  for (std::int64_t i = 0; i < at; ++i) w.Put(words.Letter());
  w.Put('#');
  const std::int64_t source = w.Position();
  for (const std::uint8_t d : digits) w.Put(d);
  for (std::int64_t i = at; i < filler; ++i) w.Put(words.Letter());
  w.Put('?');
  w.Put('#');
  w.Answer(digits, source, filler > 0 ? static_cast<double>(at) / static_cast<double>(filler) : 0.0);
  return std::move(w).Finish();
}

}  // namespace

std::span<const TinyLmTask> AllTinyLmTasks() { return kTasks; }

std::string_view TinyLmTaskName(TinyLmTask task) {
  switch (task) {
    case TinyLmTask::kCopy: return "copy";
    case TinyLmTask::kRecall: return "recall";
    case TinyLmTask::kNeedle: return "needle";
    case TinyLmTask::kEven: return "even";
  }
  return "?";
}

std::string_view TinyLmTaskList() { return "copy, recall, needle, even"; }

TinyLmTask ParseTinyLmTask(std::string_view name, const char* op, const char* flag) {
  for (const TinyLmTask task : kTasks) {
    if (name == TinyLmTaskName(task)) return task;
  }
  ThrowError(op, flag, FormatValue(name), "must be one of " + std::string(TinyLmTaskList()));
}

std::int64_t TinyLmTaskMinLength(TinyLmTask task) {
  switch (task) {
    case TinyLmTask::kCopy: return 3;                               // "<" a "|" a
    case TinyLmTask::kRecall: return 4;                             // "kv|kv"
    case TinyLmTask::kNeedle: return kNeedleBytes + kAskBytes - 1;  // no filler
    case TinyLmTask::kEven: return 4;                               // "<" a b "|" a
  }
  return 0;
}

void CheckTinyLmTaskLength(TinyLmTask task, std::int64_t length, const char* op, const char* flag) {
  const std::int64_t low = TinyLmTaskMinLength(task), high = kMaxLength;
  if (length >= low && length <= high) return;
  std::string why;
  switch (task) {
    case TinyLmTask::kCopy: why = "\"<\" s \"|\" s with s at least one byte"; break;
    case TinyLmTask::kRecall: why = "one pair k v, \"|\" and one query k v at least"; break;
    case TinyLmTask::kNeedle: why = "the needle \"#ddd\" and the question \"?#ddd\""; break;
    case TinyLmTask::kEven: why = "\"<\" s \"|\" and one answer, s at least two bytes"; break;
  }
  ThrowError(op, flag, std::to_string(length),
             "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "] for the task " +
                 std::string(TinyLmTaskName(task)) + " (bytes a sequence: " + why + ")");
}

TinyLmTaskSequence MakeTinyLmTaskSequence(TinyLmTask task, std::int64_t length, std::uint64_t seed, std::int64_t index,
                                          std::optional<double> depth) {
  CheckTinyLmTaskLength(task, length, kOp, "length");
  if (depth) {
    Require(task == TinyLmTask::kNeedle, kOp, "depth", *depth,
            "is for the task needle only (the " + std::string(TinyLmTaskName(task)) + " task places its own answers)");
    Require(*depth >= 0 && *depth <= 1, kOp, "depth", *depth, "must be in [0, 1] (0: the start, 1: the end)");
  }
  Words words(task, seed, index);
  switch (task) {
    case TinyLmTask::kCopy: return SelectFromString(length, words, 1);
    case TinyLmTask::kRecall: return Recall(length, words);
    case TinyLmTask::kNeedle: return Needle(length, words, depth);
    case TinyLmTask::kEven: return SelectFromString(length, words, 2);
  }
  return {};
}

TinyLmBatch MakeTinyLmPreviousByteRow(std::int64_t length, std::uint64_t seed, std::int64_t index) {
  Require(length >= 2 && length <= kMaxLength, kOp, "length", length,
          "must be in [2, " + std::to_string(kMaxLength) + "] (\"~\" and one byte to look back at)");
  Words words(kPreviousByteStream, seed, index);
  TinyLmBatch row;
  row.tokens.assign(static_cast<std::size_t>(length + 1), '~');
  for (std::int64_t t = 1; t <= length; ++t) {
    const std::int64_t letter = words.Below(2 * kLetters);
    row.tokens[t] = static_cast<std::uint8_t>(letter < kLetters ? 'a' + letter : 'A' + letter - kLetters);
  }
  row.scored.assign(static_cast<std::size_t>(length), 1);
  row.scored[0] = 0;  // "~" has nothing before it
  row.targets.assign(static_cast<std::size_t>(length), '~');
  for (std::int64_t t = 1; t < length; ++t) row.targets[t] = row.tokens[t - 1];
  return row;
}

std::vector<bool> TinyLmTaskCorrect(const TinyLmTaskSequence& sequence, std::span<const std::uint8_t> predictions) {
  const auto length = static_cast<std::int64_t>(sequence.scored.size());
  Require(static_cast<std::int64_t>(predictions.size()) == length, kOp, "predictions.size()", predictions.size(),
          "must be the sequence's length " + std::to_string(length));
  std::vector<bool> correct;
  correct.reserve(sequence.answers.size());
  for (const TinyLmTaskAnswer& a : sequence.answers) {
    bool right = true;
    for (std::int64_t b = 0; b < a.size; ++b)
      right = right && predictions[a.first + b] == sequence.tokens[a.first + b + 1];
    correct.push_back(right);
  }
  return correct;
}

}  // namespace posenc
