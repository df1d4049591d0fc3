// SPDX-License-Identifier: Apache-2.0
// What the writers of `policy export` share (export_format.hpp), and the targets' names
// (stormguard/config/export.hpp); calls none of the writers.
#include "config/export_format.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/config/export.hpp"

namespace stormguard::config::detail {

namespace {

// The end of the array that opens at text[open] when it holds only numbers and strings of
// [A-Z0-9_*] (gRPC code names, "*"), npos otherwise.
std::size_t plain_array_end(const std::string& text, std::size_t open) {
  bool in_string = false;
  for (std::size_t j = open + 1; j < text.size(); ++j) {
    const char c = text[j];
    if (c == '"') {
      in_string = !in_string;
    } else if (in_string) {
      if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '*')) {
        return std::string::npos;
      }
    } else if (c == ']') {
      return j;
    } else if (std::string_view("0123456789-., \n").find(c) == std::string_view::npos) {
      return std::string::npos;
    }
  }
  return std::string::npos;
}
}  // namespace

std::string compact_arrays(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      const std::size_t close = plain_array_end(text, i);
      // Only arrays that dump() spread over lines (the items hold no space or newline).
      if (close != std::string::npos && text.find('\n', i) < close) {
        std::string items;
        bool gap = false;
        for (std::size_t j = i + 1; j < close; ++j) {
          const char c = text[j];
          if (c == ' ' || c == '\n') {
            gap = true;
            continue;
          }
          if (gap && !items.empty() && items.back() == ',') items += ' ';
          gap = false;
          items += c;
        }
        out += "[" + items + "]";
        i = close;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::string proto_seconds(duration d) {
  const std::int64_t ns = d.count();
  std::string out = std::to_string(ns / 1'000'000'000);
  std::int64_t fraction = ns % 1'000'000'000;
  if (fraction != 0) {
    std::string digits = std::to_string(fraction);
    digits.insert(0, 9 - digits.size(), '0');
    digits.erase(digits.find_last_not_of('0') + 1);
    out += "." + digits;
  }
  return out + "s";
}

std::string go_duration(duration d) {
  const std::int64_t ns = d.count();
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

std::optional<ratio_budget_options> ratio_of(const budget_options& budget) {
  if (const auto* r = std::get_if<ratio_budget_options>(&budget)) return *r;
  if (const auto* f = std::get_if<fleet_budget_options>(&budget)) return f->ratio;
  return std::nullopt;
}

std::string budget_words(const budget_options& budget) {
  if (std::holds_alternative<fleet_budget_options>(budget)) return "ratio with a fleet";
  return std::string(budget_kind(budget));
}

std::string status_list(const std::vector<int>& statuses) {
  std::string out;
  for (const int s : statuses) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out.empty() ? "none" : out;
}

std::string code_list(const grpc_codes& codes) {
  std::string out;
  for (const int c : codes.to_vector()) {
    out += out.empty() ? "" : ", ";
    out += grpc_code_name(c);
  }
  return out.empty() ? "none" : out;
}

retryable_statuses statuses_implied_by(const grpc_codes& codes) {
  if (codes.contains(k_grpc_unavailable)) return retryable_statuses{};
  return retryable_statuses(std::span<const int>());
}

bool default_max_retry_after(const policy& p) {
  return p.retry.max_retry_after == retry_options{}.max_retry_after;
}

}  // namespace stormguard::config::detail

namespace stormguard::config {

std::string_view to_string(export_target target) noexcept {
  switch (target) {
    case export_target::envoy:
      return "envoy";
    case export_target::grpc:
      return "grpc";
    case export_target::linkerd:
      return "linkerd";
  }
  return "envoy";
}

std::optional<export_target> parse_export_target(std::string_view name) noexcept {
  for (const export_target t :
       {export_target::envoy, export_target::grpc, export_target::linkerd}) {
    if (to_string(t) == name) return t;
  }
  return std::nullopt;
}

}  // namespace stormguard::config
