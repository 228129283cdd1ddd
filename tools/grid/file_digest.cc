#include "grid/file_digest.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <memory>
#include <stdexcept>
#include <vector>

#include "posenc/error.h"
#include "posenc/input_file.h"

namespace posenc::cli {
namespace {

// OpenSSL's EVP interface (SHA-NI where the CPU has it: a 100 MB model in
// well under a second).
class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  }
  void Update(const void* data, std::size_t size) {
    if (EVP_DigestUpdate(context_.get(), data, size) != 1) throw std::runtime_error("SHA-256 update failed");
  }
  std::string HexDigest() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest.data(), &size) != 1) {
      throw std::runtime_error("SHA-256 final failed");
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < size; ++i) {
      hex += kHex[digest[i] >> 4];
      hex += kHex[digest[i] & 15];
    }
    return hex;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context_;
};

}  // namespace

std::string Sha256Hex(std::string_view data) {
  Sha256 sha;
  sha.Update(data.data(), data.size());
  return sha.HexDigest();
}

std::string FileSha256(const std::string& op, const std::string& path) {
  // A regular file only: a FIFO would block the read forever, /dev/zero
  // never ends.
  const OpenedFile file = OpenRegularFile(op, "path", path);
  Sha256 sha;
  std::vector<char> block(1 << 20);
  while (true) {
    const ssize_t n = ::read(file.fd, block.data(), block.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(file.fd);
      ThrowError(op, "path", FormatValue(path), "cannot be read");
    }
    if (n == 0) break;
    sha.Update(block.data(), static_cast<std::size_t>(n));
  }
  ::close(file.fd);
  return sha.HexDigest();
}

}  // namespace posenc::cli
