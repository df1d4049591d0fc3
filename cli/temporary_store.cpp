// SPDX-License-Identifier: Apache-2.0
#include "temporary_store.hpp"

#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <system_error>
#include <utility>
#include <vector>

#include "output.hpp"

namespace stormguard::cli {

outcome<temporary_store, std::string> temporary_store::create(std::string_view command) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / ("stormguard-" + std::string(command) + "-XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    return failure{"cannot create a temporary directory " + pattern + ": " + errno_text(errno)};
  }
  return temporary_store(std::filesystem::path(buffer.data()));
}

temporary_store::temporary_store(temporary_store&& other) noexcept
    : dir_(std::exchange(other.dir_, {})) {}

temporary_store& temporary_store::operator=(temporary_store&& other) noexcept {
  if (this != &other) {
    remove();
    dir_ = std::exchange(other.dir_, {});
  }
  return *this;
}

temporary_store::~temporary_store() { remove(); }

void temporary_store::remove() noexcept {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  dir_.clear();
}

std::string temporary_store::spec() const { return "sqlite:" + (dir_ / "ledger.db").string(); }

}  // namespace stormguard::cli
