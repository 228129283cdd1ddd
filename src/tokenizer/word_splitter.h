// Pre-tokenization: cutting text into the words that BPE merges within.
// PCRE2 (UTF + UCP mode) supplies the Unicode categories \p{L}, \p{N} and
// Unicode \s, and the lookahead that the GPT-2 regex needs.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "posenc/tokenizer.h"

namespace posenc::tokenizer {

class WordSplitter {
 public:
  explicit WordSplitter(PreTokenizer pre);
  WordSplitter(WordSplitter&&) noexcept;
  WordSplitter& operator=(WordSplitter&&) noexcept;
  ~WordSplitter();

  // Appends the words of `text` to `words` (views into `text`, in order,
  // covering it exactly). Throws posenc::Error if `text` is not valid UTF-8.
  // Thread-safe.
  void Split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Regexes;
  PreTokenizer pre_;
  std::unique_ptr<Regexes> regexes_;
};

}  // namespace posenc::tokenizer
