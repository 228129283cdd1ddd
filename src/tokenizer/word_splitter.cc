// The pre-tokenizer regexes, compiled once with PCRE2 (JIT where available).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>

#include "posenc/error.h"
#include "tokenizer/word_splitter.h"

namespace posenc::tokenizer {
namespace {

constexpr const char* kOp = "tokenizer";

// GPT-2's pattern (also the ByteLevel pre-tokenizer of Hugging Face with
// use_regex=true). `\s+(?!\S)` leaves the last space of a run of spaces to
// start the next word, so " the" stays one word after several spaces.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama-3's pattern: contractions in any case, one optional non-letter
// before a run of letters, numbers cut into groups of at most three digits,
// newlines attached to the punctuation or whitespace that precedes them.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// SmolLM's first step (Hugging Face Digits(individual_digits=true), which
// isolates every character that Rust's char::is_numeric accepts: \p{N}).
constexpr const char* kDigitPattern = R"(\p{N})";

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
using Code = std::unique_ptr<pcre2_code, CodeDeleter>;

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

Code Compile(const char* pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    ThrowError(kOp, "pattern", FormatValue(std::string_view(pattern)),
               "PCRE2 cannot compile it: " + std::string(reinterpret_cast<char*>(message)));
  }
  // The JIT is only faster, never different; without it PCRE2 interprets.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Code(code);
}

// One match of `code` in subject[0, size) at or after `start`. The first call
// on a subject validates its UTF-8 (PCRE2 checks the whole subject), later
// calls pass `checked` to skip that. Returns false when nothing matches.
bool Find(const pcre2_code* code, pcre2_match_data* data, std::string_view subject, std::size_t start, bool checked,
          std::size_t& begin, std::size_t& end) {
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start,
                             checked ? PCRE2_NO_UTF_CHECK : 0, data, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    const bool utf_error = rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21;
    ThrowError(
        kOp, "text",
        utf_error ? "byte " + std::to_string(pcre2_get_startchar(data)) + " of " + std::to_string(subject.size())
                  : std::to_string(subject.size()) + " bytes",
        std::string(utf_error ? "is not valid UTF-8: " : "cannot be split: ") + reinterpret_cast<char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

}  // namespace

struct WordSplitter::Regexes {
  Code words;   // GPT-2 or Llama-3 pattern
  Code digits;  // SmolLM only
};

// Runs `code` over `text` and appends every match as a word; text between
// matches (none with these patterns, which match every character) is a word
// too, as in Hugging Face's Split with the Isolated behaviour.
static void SplitWith(const pcre2_code* code, pcre2_match_data* data, std::string_view text, bool checked,
                      std::vector<std::string_view>& words) {
  if (text.empty()) return;
  std::size_t start = 0, begin = 0, end = 0;
  while (start < text.size() && Find(code, data, text, start, checked, begin, end)) {
    checked = true;
    if (begin > start) words.push_back(text.substr(start, begin - start));
    if (end == begin) {  // an empty match: step over one character
      end = begin + 1;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    }
    words.push_back(text.substr(begin, end - begin));
    start = end;
  }
  if (start < text.size()) words.push_back(text.substr(start));
}

WordSplitter::WordSplitter(PreTokenizer pre) : pre_(pre), regexes_(std::make_unique<Regexes>()) {
  regexes_->words = Compile(pre == PreTokenizer::kLlama3 ? kLlama3Pattern : kGpt2Pattern);
  if (pre == PreTokenizer::kSmolLm) regexes_->digits = Compile(kDigitPattern);
}

WordSplitter::WordSplitter(WordSplitter&&) noexcept = default;
WordSplitter& WordSplitter::operator=(WordSplitter&&) noexcept = default;
WordSplitter::~WordSplitter() = default;

void WordSplitter::Split(std::string_view text, std::vector<std::string_view>& words) const {
  const pcre2_code* code = regexes_->words.get();
  MatchData data(pcre2_match_data_create_from_pattern(code, nullptr));
  if (pre_ != PreTokenizer::kSmolLm) {
    SplitWith(code, data.get(), text, /*checked=*/false, words);
    return;
  }
  // Every number character is a word; the word regex runs on each stretch
  // between them as on a text of its own (so `\s+(?!\S)` sees the stretch's
  // end as the end of the text, as Hugging Face's Sequence does).
  if (text.empty()) return;
  const pcre2_code* digits = regexes_->digits.get();
  MatchData digit_data(pcre2_match_data_create_from_pattern(digits, nullptr));
  std::size_t start = 0, begin = 0, end = 0;
  bool checked = false;
  while (start < text.size() && Find(digits, digit_data.get(), text, start, checked, begin, end)) {
    checked = true;
    SplitWith(code, data.get(), text.substr(start, begin - start), true, words);
    words.push_back(text.substr(begin, end - begin));
    start = end;
  }
  // The first Find validated all of `text`, even when it found no number.
  SplitWith(code, data.get(), text.substr(start), /*checked=*/true, words);
}

}  // namespace posenc::tokenizer
