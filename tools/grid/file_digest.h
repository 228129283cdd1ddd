// SHA-256 digests: of a file (a grid cell is keyed by the digests of the
// model and text it read, not their paths, so a moved file keeps its cells
// and an edited one does not), and of a string (the cell key).
#pragma once

#include <string>
#include <string_view>

namespace posenc::cli {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// Lower-case hex SHA-256 of the file's bytes, read in blocks. Throws
// posenc::Error "[op] path = ...: cannot be read" when it cannot be.
std::string FileSha256(const std::string& op, const std::string& path);

}  // namespace posenc::cli
