// SPDX-License-Identifier: Apache-2.0
// Internal: an unsigned 128-bit integer for exact intermediate arithmetic (Lemire's bounded
// draw, exact duration parsing, sums of durations). GCC and Clang only.
#ifndef STORMGUARD_DETAIL_UINT128_HPP
#define STORMGUARD_DETAIL_UINT128_HPP

namespace stormguard::detail {

__extension__ typedef unsigned __int128 uint128;  // __extension__ quiets -Wpedantic

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_UINT128_HPP
