// Internal: makes `T({})` mean "T with default options" for the classes whose constructor takes
// an options struct with a default (`explicit T(T_options options = {})`). Without it, `{}`
// could be either `T_options{}` or a default `T` to copy, and `T({})` did not compile.
#ifndef STORMGUARD_DETAIL_EMPTY_BRACES_HPP
#define STORMGUARD_DETAIL_EMPTY_BRACES_HPP

namespace stormguard::detail {

/// The element type of the `T(std::initializer_list<empty_braces>)` constructors. Never
/// constructed: only an empty list `{}` converts to such an initializer_list (an identity
/// conversion, which beats both user-defined conversions).
struct empty_braces {
  empty_braces() = delete;
};

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_EMPTY_BRACES_HPP
