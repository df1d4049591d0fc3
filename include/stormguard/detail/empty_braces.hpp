// SPDX-License-Identifier: Apache-2.0
// Internal: makes `T({})` mean "T with default options" for the classes whose constructor takes
// an options struct with a default (`explicit T(T_options options = {})`). Without it, `{}`
// could be either `T_options{}` or a default `T` to copy (two user-defined conversions), and
// `T({})` did not compile.
#ifndef STORMGUARD_DETAIL_EMPTY_BRACES_HPP
#define STORMGUARD_DETAIL_EMPTY_BRACES_HPP

namespace stormguard::detail {

/// The parameter type of the `T(empty_braces)` constructors. `{}` converts to a scoped
/// enumeration by an identity conversion (value-initialization), which beats both user-defined
/// conversions; nothing else converts to it implicitly (`{0}` and designated lists such as
/// `{.ratio = 0, .window = 1s}` still select the options struct). A scoped enumeration rather
/// than an initializer_list of a never-constructed type: GCC 12 took `{.a = 0, .b = 0}` for
/// such an initializer_list and called the call ambiguous.
enum class empty_braces : unsigned char {};

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_EMPTY_BRACES_HPP
