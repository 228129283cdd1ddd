// Writes GGUF bytes for tests: metadata of any type, tensors with raw data.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace posenc::testing {

class GgufBuilder {
 public:
  explicit GgufBuilder(std::uint32_t version = 3, std::uint32_t alignment = 32)
      : version_(version), alignment_(alignment) {}

  template <class T>
  GgufBuilder& Scalar(const std::string& key, std::uint32_t type, T value) {
    String(meta_, key);
    Put(meta_, type);
    Put(meta_, value);
    ++kv_count_;
    return *this;
  }
  GgufBuilder& Text(const std::string& key, const std::string& value) {
    String(meta_, key);
    Put(meta_, std::uint32_t{8});
    String(meta_, value);
    ++kv_count_;
    return *this;
  }
  template <class T>
  GgufBuilder& Array(const std::string& key, std::uint32_t item_type, const std::vector<T>& items) {
    String(meta_, key);
    Put(meta_, std::uint32_t{9});
    Put(meta_, item_type);
    Put(meta_, static_cast<std::uint64_t>(items.size()));
    for (const T& item : items) Put(meta_, item);
    ++kv_count_;
    return *this;
  }
  GgufBuilder& StringArray(const std::string& key, const std::vector<std::string>& items) {
    String(meta_, key);
    Put(meta_, std::uint32_t{9});
    Put(meta_, std::uint32_t{8});
    Put(meta_, static_cast<std::uint64_t>(items.size()));
    for (const std::string& item : items) String(meta_, item);
    ++kv_count_;
    return *this;
  }
  GgufBuilder& Tensor(const std::string& name, const std::vector<std::uint64_t>& shape, std::uint32_t type,
                      const std::vector<unsigned char>& data) {
    String(infos_, name);
    Put(infos_, static_cast<std::uint32_t>(shape.size()));
    for (std::uint64_t d : shape) Put(infos_, d);
    Put(infos_, type);
    Put(infos_, static_cast<std::uint64_t>(data_.size()));
    data_.insert(data_.end(), data.begin(), data.end());
    while (data_.size() % alignment_) data_.push_back(0);
    ++tensor_count_;
    return *this;
  }

  std::vector<unsigned char> Bytes() const {
    std::vector<unsigned char> out;
    Put(out, std::uint32_t{0x46554747});
    Put(out, version_);
    Put(out, tensor_count_);
    Put(out, kv_count_);
    out.insert(out.end(), meta_.begin(), meta_.end());
    out.insert(out.end(), infos_.begin(), infos_.end());
    while (out.size() % alignment_) out.push_back(0);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

 private:
  template <class T>
  static void Put(std::vector<unsigned char>& out, const T& value) {
    const auto* p = reinterpret_cast<const unsigned char*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
  }
  static void String(std::vector<unsigned char>& out, const std::string& s) {
    Put(out, static_cast<std::uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }

  std::uint32_t version_, alignment_;
  std::uint64_t tensor_count_ = 0, kv_count_ = 0;
  std::vector<unsigned char> meta_, infos_, data_;
};

}  // namespace posenc::testing
