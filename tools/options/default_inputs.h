// The files that scripts/fetch-model and scripts/fetch-texts put under the
// source tree's build/: the defaults of --model, --text and --corpus. They
// are paths relative to the tree's root, so a tool run from another
// directory would miss them; ResolveInput also looks in the tree the
// running tool was built in, and says how to get a file that is missing.
#pragma once

#include <string>
#include <string_view>

namespace posenc::cli {

struct DefaultInput {
  std::string_view path;          // relative to the source tree's root
  std::string_view fetch_script;  // what puts it there
};

inline constexpr DefaultInput kDefaultModel{"build/models/SmolLM2-135M-Instruct.Q4_1.gguf", "./scripts/fetch-model"};
inline constexpr DefaultInput kDefaultStudyText{"build/texts/debian-handbook.txt", "./scripts/fetch-texts"};
inline constexpr DefaultInput kDefaultTrainCorpus{"build/texts/train-corpus.txt", "./scripts/fetch-texts"};
inline constexpr DefaultInput kDefaultValidationText{"build/texts/validation.txt", "./scripts/fetch-texts"};

// The file a command opens for `option`, whose value is `path`. A path
// other than the default is the user's and comes back as it is. The
// default is taken from the current directory when it is there, else from
// the source tree of the running tool (the first directory above
// /proc/self/exe that holds scripts/fetch-model); when neither has it,
// throws posenc::Error "[op] option = path: not found ...; run
// ./scripts/fetch-model in the source tree, or pass option FILE".
std::string ResolveInput(std::string_view op, std::string_view option, const std::string& path,
                         const DefaultInput& default_input);

}  // namespace posenc::cli
