// SPDX-License-Identifier: Apache-2.0
// The checks and field readers that the policy file reader (policy.cpp) and the importers
// (import.cpp, import_envoy.cpp) share; they call nothing in those files.
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/policy_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::config::detail {

namespace {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;

constexpr std::size_t k_max_name = 64;

}  // namespace

// The library's message without its "stormguard::type: " prefix.
void check_name(const std::string& field, std::string_view name) {
  const bool valid_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '_' || c == '.' || c == '/';
  });
  if (name.empty() || name.size() > k_max_name || !valid_chars) {
    sj::fail(field, "must be 1 to " + std::to_string(k_max_name) +
                        " characters from A-Z a-z 0-9 + - _ . /, got " +
                        stormguard::detail::quote_for_message(name));
  }
}

void check_unique_names(const std::vector<policy>& policies, const std::string& path) {
  for (std::size_t i = 0; i < policies.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (policies[j].name == policies[i].name) {
        sj::fail(sj::index_path(path, i) + ".name",
                 stormguard::detail::quote_for_message(policies[i].name) + " is the name of " +
                     sj::index_path(path, j) + " too: names must be unique");
      }
    }
  }
}

void check_retry(const std::string& field, const retry_options& retry) {
  try {
    (void)retry_policy(retry);
  } catch (const std::invalid_argument& e) {
    sj::fail(field, sj::library_message(e));
  }
}

// A protobuf JSON Duration ("0.1s", "25s"): decimal seconds with the suffix s, in (0, max].
duration proto_duration(const sj::object_reader& r, std::string_view key, duration max,
                        bool zero_allowed) {
  const std::string range = std::string("a protobuf Duration string such as \"0.1s\" in ") +
                            (zero_allowed ? "[0, " : "(0, ") + sj::limit_text(max) + "]";
  const json& v = r.required(key, range);
  const std::string text = v.is_string() ? v.get<std::string>() : std::string();
  const bool shape = text.size() >= 2 && text.back() == 's' &&
                     std::all_of(text.begin(), text.end() - 1, [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
                     });
  const auto d = shape ? parse_duration(text) : std::nullopt;
  if (!d || *d < duration::zero() || (*d == duration::zero() && !zero_allowed) || *d > max) {
    sj::fail(r.field(key), "must be " + range + ", got " + sj::quote(v));
  }
  return *d;
}

grpc_codes read_grpc_code_list(const json& value, const std::string& path, bool any_case) {
  const char* const what =
      "gRPC status codes (names as gRPC writes them, such as \"UNAVAILABLE\", or numbers 1..16)";
  if (!value.is_array() || value.size() > 16) {
    sj::fail(path,
             std::string("must be an array of at most 16 ") + what + ", got " + sj::quote(value));
  }
  grpc_codes codes;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const json& v = value[i];
    const std::string field = sj::index_path(path, i);
    std::optional<int> code;
    if (v.is_string()) {
      const std::string name = v.get<std::string>();
      std::string upper = name;
      std::transform(upper.begin(), upper.end(), upper.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      code = grpc_code_of(any_case ? upper : name);
      if (!code && grpc_code_of(upper)) {
        sj::fail(field, "must be written as gRPC writes it, " +
                            stormguard::detail::quote_for_message(upper) + " (upper case), got " +
                            sj::quote(v));
      }
    } else if (v.is_number_unsigned() && v.get<std::uint64_t>() <= 16) {
      code = v.get<int>();
    }
    if (!code) {
      std::string names;
      for (int c = 1; c <= 16; ++c) {
        names += (c == 1 ? "" : ", ");
        names += grpc_code_name(c);
      }
      sj::fail(field, "unknown gRPC status code " + sj::quote(v) + " (gRPC's failure codes are " +
                          names + ", or their numbers 1..16)");
    }
    if (*code == 0) {
      sj::fail(field, "must be a gRPC failure code: OK (0) is a success, never retried, got " +
                          sj::quote(v));
    }
    if (codes.contains(*code)) {
      sj::fail(field, std::string(grpc_code_name(*code)) + " appears more than once");
    }
    codes.insert(*code);
  }
  return codes;
}

nlohmann::ordered_json grpc_code_names_json(const grpc_codes& codes) {
  nlohmann::ordered_json names = nlohmann::ordered_json::array();
  for (const int c : codes.to_vector()) names.push_back(std::string(grpc_code_name(c)));
  return names;
}

std::int64_t proto_integer(const sj::object_reader& r, std::string_view key, std::int64_t lo,
                           std::int64_t hi) {
  return r.integer(key, lo, hi);
}

}  // namespace stormguard::config::detail
