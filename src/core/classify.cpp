// SPDX-License-Identifier: Apache-2.0
#include "stormguard/classify.hpp"

#include <system_error>

namespace stormguard {

bool is_transient(const std::error_code& ec) noexcept {
  if (!ec) return false;
  // std::errc::operation_would_block equals resource_unavailable_try_again where EWOULDBLOCK ==
  // EAGAIN (Linux, macOS); listed so that it is transient where they differ.
  for (const std::errc c :
       {std::errc::connection_refused, std::errc::connection_reset, std::errc::connection_aborted,
        std::errc::timed_out, std::errc::host_unreachable, std::errc::network_unreachable,
        std::errc::resource_unavailable_try_again, std::errc::operation_would_block,
        std::errc::interrupted}) {
    if (ec == c) return true;
  }
  return false;
}

std::error_code error_code_of(const std::exception_ptr& e) noexcept {
  if (!e) return {};
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& error) {
    return error.code();
  } catch (...) {
    return {};
  }
}

}  // namespace stormguard
