// SPDX-License-Identifier: Apache-2.0
// The example of the API reference's page for the idempotency guard (a Doxygen `\snippet`
// between `//! [name]` markers): a charge handler behind the guard, on a real SQLite store in a
// temporary directory. The assertions after it check what its comments say.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/store.hpp"

namespace {

namespace fs = std::filesystem;

// A temporary directory, removed at the end of the test.
struct scratch_dir {
  scratch_dir() {
    std::string tmpl = (fs::temp_directory_path() / "stormguard-reference-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

TEST(ReferenceExamples, IdempotencyGuard) {
  const scratch_dir dir;
  const std::string spec = "sqlite:" + (dir.path / "keys.db").string();
  //! [idempotency_guard]
  // The store of the keys and of the handler's own table (one transaction for both).
  std::unique_ptr<stormguard::guard::store> store = stormguard::guard::open_store(spec);
  store->query("CREATE TABLE IF NOT EXISTS ledger (k TEXT, amount INTEGER)", {});
  stormguard::guard::idempotency_guard guard(*store);

  // POST /charges from user 42 with `Idempotency-Key: order-1`: the handler runs once.
  auto charge = [&](stormguard::guard::transaction& tx) {
    tx.execute("INSERT INTO ledger (k, amount) VALUES ($1, $2)", {"order-1", "100"});
    return stormguard::guard::stored_response{
        201, {{"Content-Type", "application/json"}}, R"({"charged":100})"};
  };
  const stormguard::guard::request req{.principal = "user-42",
                                       .method = "POST",
                                       .target = "/charges",
                                       .body = R"({"amount":100})",
                                       .idempotency_key = "order-1"};
  const stormguard::guard::result first = guard.handle(req, charge);
  // first.decision == decision::ran, first.response.status == 201

  // The client did not get the answer (a timeout) and retries with the same key: the stored
  // response is replayed, with `Idempotent-Replayed: true`, and the handler does not run again.
  const stormguard::guard::result retry = guard.handle(req, charge);
  // retry.decision == decision::replayed: one row in the ledger, one charge
  //! [idempotency_guard]
  EXPECT_EQ(first.decision, stormguard::guard::decision::ran);
  EXPECT_EQ(first.response.status, 201);
  EXPECT_EQ(retry.decision, stormguard::guard::decision::replayed);
  EXPECT_EQ(retry.response.status, 201);
  EXPECT_EQ(retry.response.body, R"({"charged":100})");
  bool replayed_header = false;
  for (const auto& [name, value] : retry.response.headers) {
    replayed_header |= (name == "Idempotent-Replayed" && value == "true");
  }
  EXPECT_TRUE(replayed_header);
  const auto rows = store->query("SELECT COUNT(*) FROM ledger", {});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at(0), "1");
}

}  // namespace
