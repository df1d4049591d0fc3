// SPDX-License-Identifier: Apache-2.0
// The idempotency guard in front of your own handler (docs/idempotency.md): a payments endpoint
// whose ledger write commits together with the stored response, so a retried POST never charges
// twice. Your HTTP framework gives you the principal, the method, the target, the body and the
// Idempotency-Key header; the guard gives you the response to send.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/store.hpp"

namespace sg = stormguard::guard;

int main() {
  const auto dir = std::filesystem::temp_directory_path() / "stormguard-example-guard";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "payments.db").string();

  // One store per process (thread-safe); replicas would share "postgres:URL" or "redis:URL".
  auto store = sg::open_store("sqlite:" + db);
  store->query("CREATE TABLE IF NOT EXISTS ledger (principal TEXT, k TEXT, amount INTEGER)", {});
  sg::idempotency_guard guard(*store);  // lease 30 s, records kept 24 h, key required

  // What your framework calls for POST /charges: who asks, the amount, the Idempotency-Key header.
  auto post_charge = [&](const std::string& principal, std::int64_t amount,
                         std::optional<std::string> key_header) {
    const std::string body = "{\"amount\":" + std::to_string(amount) + "}";
    const sg::request req{principal, "POST", "/charges", body, key_header};
    const sg::result r = guard.handle(req, [&](sg::transaction& tx) {
      // Runs at most once per (principal, key); its writes commit with the stored response.
      const std::string key = *sg::parse_idempotency_key(*key_header);  // the guard checked it
      tx.execute("INSERT INTO ledger (principal, k, amount) VALUES ($1, $2, $3)",
                 {principal, key, std::to_string(amount)});
      return sg::stored_response{201, {{"Content-Type", "application/json"}}, body};
    });
    // Send r.response.status, r.response.headers and r.response.body.
    std::cout << r.response.status << " " << sg::to_string(r.decision) << "  " << r.response.body
              << "\n";
    return r;
  };

  const auto first = post_charge("acct_1", 1234, "\"key-1\"");   // 201 ran
  const auto retry = post_charge("acct_1", 1234, "\"key-1\"");   // 201 replayed (no new row)
  const auto other = post_charge("acct_1", 9999, "\"key-1\"");   // 422 mismatch
  const auto nokey = post_charge("acct_1", 1234, std::nullopt);  // 400 missing_key
  const auto mine = post_charge("acct_2", 1234, "key-1");        // 201 ran: keys are per principal

  const auto rows = store->query("SELECT COUNT(*) FROM ledger", {});
  std::cout << "ledger rows: " << rows.at(0).at(0).value_or("?") << "\n";
  store.reset();
  std::filesystem::remove_all(dir);

  const bool ok = first.decision == sg::decision::ran && retry.decision == sg::decision::replayed &&
                  other.response.status == 422 && nokey.response.status == 400 &&
                  mine.decision == sg::decision::ran && rows.at(0).at(0) == "2";
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
