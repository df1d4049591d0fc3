// SPDX-License-Identifier: Apache-2.0
// The default store of the payments endpoint (`serve`, `lab payments`): an SQLite database in a
// private temporary directory, removed with everything in it (the database, its -wal and -shm
// files) when the object dies.
//
//   auto made = stormguard::cli::temporary_store::create("serve");
//   if (!made) return fail(made.error());
//   std::string spec = made->spec();   // "sqlite:/tmp/stormguard-serve-Ab12Cd/ledger.db"
//
// A process killed by SIGKILL leaves the directory behind (nothing else can remove it).
#ifndef STORMGUARD_CLI_TEMPORARY_STORE_HPP
#define STORMGUARD_CLI_TEMPORARY_STORE_HPP

#include <filesystem>
#include <string>
#include <string_view>

#include "stormguard/outcome.hpp"

namespace stormguard::cli {

/// See the file comment. Movable (the moved-from object removes nothing), not copyable.
class temporary_store {
 public:
  /// Creates DIR = $TMPDIR (or /tmp)/stormguard-COMMAND-XXXXXX with mkdtemp (mode 0700); an error
  /// naming the directory and the system's reason when it cannot.
  [[nodiscard]] static outcome<temporary_store, std::string> create(std::string_view command);

  temporary_store(temporary_store&& other) noexcept;
  temporary_store& operator=(temporary_store&& other) noexcept;
  temporary_store(const temporary_store&) = delete;
  temporary_store& operator=(const temporary_store&) = delete;
  /// Removes the directory and everything in it (errors ignored).
  ~temporary_store();

  /// "sqlite:DIR/ledger.db", as --idempotency takes it.
  [[nodiscard]] std::string spec() const;

 private:
  explicit temporary_store(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void remove() noexcept;
  std::filesystem::path dir_;
};

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_TEMPORARY_STORE_HPP
