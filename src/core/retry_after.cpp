// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_after.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "stormguard/detail/http_syntax.hpp"

namespace stormguard {

namespace {

using std::chrono::days;
using std::chrono::sys_days;
using std::chrono::sys_seconds;
using std::chrono::system_clock;

constexpr std::int64_t k_ns_per_s = 1'000'000'000;
constexpr std::int64_t k_max_ns = std::numeric_limits<duration::rep>::max();
// The largest whole number of seconds that fits in duration (9223372036 s, about 292 years).
constexpr std::int64_t k_max_whole_seconds = k_max_ns / k_ns_per_s;

// Indexed by std::chrono::weekday::c_encoding() (Sunday = 0).
constexpr std::array<std::string_view, 7> k_day_names = {"Sun", "Mon", "Tue", "Wed",
                                                         "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> k_long_day_names = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
// Indexed by month - 1.
constexpr std::array<std::string_view, 12> k_month_names = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

using detail::trim_ows;

// A forward-only reader over the field value; every method consumes only on success.
class cursor {
 public:
  explicit constexpr cursor(std::string_view s) noexcept : s_(s) {}

  [[nodiscard]] constexpr bool done() const noexcept { return i_ == s_.size(); }

  constexpr bool literal(std::string_view text) noexcept {
    if (s_.substr(i_, text.size()) != text) return false;
    i_ += text.size();
    return true;
  }

  // Exactly `n` decimal digits (n <= 4).
  constexpr std::optional<int> digits(std::size_t n) noexcept {
    if (s_.size() - i_ < n) return std::nullopt;
    int value = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = s_[i_ + k];
      if (!is_digit(c)) return std::nullopt;
      value = value * 10 + (c - '0');
    }
    i_ += n;
    return value;
  }

  // One of `names`; returns its index. Names in one list never prefix each other.
  template <std::size_t N>
  constexpr std::optional<int> one_of(const std::array<std::string_view, N>& names) noexcept {
    for (std::size_t k = 0; k < N; ++k) {
      if (literal(names[k])) return static_cast<int>(k);
    }
    return std::nullopt;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

// The fields of an HTTP-date as written, before calendar validation.
struct date_fields {
  int weekday = 0;  // c_encoding: Sunday = 0
  int year = 0;     // four digits, or two for rfc850 (resolved later)
  int month = 0;    // 1..12
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

// time-of-day = hour ":" minute ":" second (2DIGIT each; ranges checked later)
bool parse_time_of_day(cursor& c, date_fields& f) noexcept {
  const auto h = c.digits(2);
  if (!h || !c.literal(":")) return false;
  const auto m = c.digits(2);
  if (!m || !c.literal(":")) return false;
  const auto s = c.digits(2);
  if (!s) return false;
  f.hour = *h;
  f.minute = *m;
  f.second = *s;
  return true;
}

bool parse_month(cursor& c, date_fields& f) noexcept {
  const auto m = c.one_of(k_month_names);
  if (!m) return false;
  f.month = *m + 1;
  return true;
}

// "GMT" per the grammar; "UTC" accepted as the same instant (documented leniency).
bool parse_zone(cursor& c) noexcept { return c.literal("GMT") || c.literal("UTC"); }

// IMF-fixdate after the day name: "," SP day SP month SP year SP time-of-day SP GMT
bool parse_imf_rest(cursor& c, date_fields& f) noexcept {
  if (!c.literal(", ")) return false;
  const auto d = c.digits(2);
  if (!d || !c.literal(" ") || !parse_month(c, f) || !c.literal(" ")) return false;
  const auto y = c.digits(4);
  if (!y || !c.literal(" ") || !parse_time_of_day(c, f) || !c.literal(" ")) return false;
  if (!parse_zone(c)) return false;
  f.day = *d;
  f.year = *y;
  return c.done();
}

// rfc850-date after the long day name: "," SP day "-" month "-" 2DIGIT SP time-of-day SP GMT
bool parse_rfc850_rest(cursor& c, date_fields& f) noexcept {
  if (!c.literal(", ")) return false;
  const auto d = c.digits(2);
  if (!d || !c.literal("-") || !parse_month(c, f) || !c.literal("-")) return false;
  const auto y = c.digits(2);
  if (!y || !c.literal(" ") || !parse_time_of_day(c, f) || !c.literal(" ")) return false;
  if (!parse_zone(c)) return false;
  f.day = *d;
  f.year = *y;
  return c.done();
}

// asctime-date after the day name: SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP year
bool parse_asctime_rest(cursor& c, date_fields& f) noexcept {
  if (!c.literal(" ") || !parse_month(c, f) || !c.literal(" ")) return false;
  std::optional<int> d;
  if (c.literal(" ")) {
    d = c.digits(1);
  } else {
    d = c.digits(2);
  }
  if (!d || !c.literal(" ") || !parse_time_of_day(c, f) || !c.literal(" ")) return false;
  const auto y = c.digits(4);
  if (!y) return false;
  f.day = *d;
  f.year = *y;
  return c.done();
}

constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b - ((a % b != 0 && (a < 0) != (b < 0)) ? 1 : 0);
}

// An instant as whole seconds (rounded down) and the nanoseconds after them, computed on the
// tick count: std::chrono::floor<seconds>(now) is not representable in nanoseconds near
// system_clock::time_point::min(), and converting it back overflowed (found by the fuzzer).
struct split_instant {
  std::int64_t seconds;      // floor(now / 1 s)
  std::int64_t fraction_ns;  // in [0, 1e9)
};

constexpr split_instant split_now(system_clock::time_point now) noexcept {
  // Works on the clock's own ticks (nanoseconds in libstdc++, microseconds in libc++), so that
  // no conversion can overflow at either end of the clock.
  using period = system_clock::period;
  static_assert(period::num == 1 && period::den <= k_ns_per_s && k_ns_per_s % period::den == 0,
                "system_clock ticks must divide a nanosecond-resolution second");
  constexpr std::int64_t ticks_per_s = period::den;
  const std::int64_t ticks = now.time_since_epoch().count();
  const std::int64_t seconds = floor_div(ticks, ticks_per_s);
  std::int64_t fraction = ticks % ticks_per_s;
  if (fraction < 0) fraction += ticks_per_s;
  return {seconds, fraction * (k_ns_per_s / ticks_per_s)};
}

// Seconds since midnight of the written time; 86400 for the leap second 23:59:60.
constexpr std::int64_t second_of_day(const date_fields& f) noexcept {
  return std::int64_t{f.hour} * 3600 + std::int64_t{f.minute} * 60 + f.second;
}

// True when the written date and time (with `year`) is later than the instant `limit`, compared
// field by field so that a day that does not exist in `year` (Feb 29) still compares.
bool later_than(int year, const date_fields& f, const std::chrono::year_month_day& limit_date,
                std::chrono::nanoseconds limit_time_of_day) noexcept {
  const int limit_year = static_cast<int>(limit_date.year());
  const int limit_month = static_cast<int>(static_cast<unsigned>(limit_date.month()));
  const int limit_day = static_cast<int>(static_cast<unsigned>(limit_date.day()));
  if (year != limit_year) return year > limit_year;
  if (f.month != limit_month) return f.month > limit_month;
  if (f.day != limit_day) return f.day > limit_day;
  return std::chrono::seconds(second_of_day(f)) > limit_time_of_day;
}

// RFC 9110 §5.6.7: a two-digit year that "appears to be more than 50 years in the future" is
// "the most recent year in the past that had the same last two digits". So the year is the
// latest one ending in `yy` whose timestamp is not more than 50 years after `now`.
int resolve_two_digit_year(const date_fields& f, system_clock::time_point now) noexcept {
  const split_instant split = split_now(now);
  const std::int64_t day_number = floor_div(split.seconds, 86400);
  const std::chrono::year_month_day now_date{sys_days(days(day_number))};
  const std::chrono::nanoseconds time_of_day((split.seconds - day_number * 86400) * k_ns_per_s +
                                             split.fraction_ns);
  // now + 50 years: the same month, day and time of day 50 years later. Feb 29 + 50 years may not
  // exist; the field-by-field comparison handles it (a Feb 29 limit is between Feb 28 and Mar 1).
  const std::chrono::year_month_day limit_date{now_date.year() + std::chrono::years(50),
                                               now_date.month(), now_date.day()};
  const int now_year = static_cast<int>(now_date.year());
  const int century = (now_year >= 0 ? now_year : now_year - 99) / 100 * 100;
  // Candidates, latest first: next century, this century, the one before, the one before that
  // (the limit is at least now_year + 50, so two steps down always suffice).
  int year = century + 100 + f.year;
  for (int step = 0; step < 3 && later_than(year, f, limit_date, time_of_day); ++step) year -= 100;
  return year;
}

// Calendar validation; the instant of a valid date.
std::optional<sys_seconds> to_instant(const date_fields& f) noexcept {
  if (f.year < 1900) return std::nullopt;  // RFC 5322 §3.3: "1900 or later"
  if (f.hour > 23 || f.minute > 59) return std::nullopt;
  const bool leap_second = f.second == 60 && f.hour == 23 && f.minute == 59;
  if (f.second > 59 && !leap_second) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year(f.year),
                                         std::chrono::month(static_cast<unsigned>(f.month)),
                                         std::chrono::day(static_cast<unsigned>(f.day))};
  if (!date.ok()) return std::nullopt;  // Feb 30, Apr 31, Feb 29 of a common year, day 00 ...
  const sys_days midnight{date};
  if (std::chrono::weekday(midnight).c_encoding() != static_cast<unsigned>(f.weekday)) {
    return std::nullopt;
  }
  return sys_seconds(midnight) + std::chrono::seconds(second_of_day(f));
}

std::optional<std::pair<sys_seconds, retry_after_form>> parse_date(
    std::string_view text, system_clock::time_point now) noexcept {
  cursor c(text);
  date_fields f;
  retry_after_form form{};
  if (const auto long_day = c.one_of(k_long_day_names)) {
    f.weekday = *long_day;
    if (!parse_rfc850_rest(c, f)) return std::nullopt;
    f.year = resolve_two_digit_year(f, now);
    form = retry_after_form::rfc850_date;
  } else if (const auto day = c.one_of(k_day_names)) {
    f.weekday = *day;
    if (parse_imf_rest(c, f)) {
      form = retry_after_form::imf_fixdate;
    } else if (cursor again(text.substr(3)); parse_asctime_rest(again, f)) {
      form = retry_after_form::asctime_date;
    } else {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  const auto instant = to_instant(f);
  if (!instant) return std::nullopt;
  return std::pair{*instant, form};
}

// delay-seconds = 1*DIGIT, saturating at duration::max().
std::optional<duration> parse_delay_seconds(std::string_view text) noexcept {
  if (text.empty()) return std::nullopt;
  std::int64_t seconds = 0;
  bool saturated = false;
  for (const char c : text) {
    if (!is_digit(c)) return std::nullopt;
    if (saturated) continue;  // keep scanning: trailing junk still makes it invalid
    seconds = seconds * 10 + (c - '0');
    if (seconds > k_max_whole_seconds) saturated = true;
  }
  if (saturated) return duration::max();
  return duration(seconds * k_ns_per_s);
}

// date - now, 0 when the date is at or before now, saturated at duration::max().
duration delay_until(sys_seconds date, system_clock::time_point now) noexcept {
  const split_instant split = split_now(now);
  // Both are within a few hundred billion seconds of the epoch: no overflow.
  const std::int64_t whole = date.time_since_epoch().count() - split.seconds;
  if (whole <= 0) return duration::zero();  // date <= now_seconds <= now
  if (whole - 1 > k_max_whole_seconds) return duration::max();
  // (whole - 1) s + (1 s - fraction), each part in range; their sum may not be.
  const std::int64_t head = (whole - 1) * k_ns_per_s;
  const std::int64_t tail = k_ns_per_s - split.fraction_ns;  // in (0, 1e9]
  if (tail > k_max_ns - head) return duration::max();
  return duration(head + tail);
}

}  // namespace

std::optional<sys_seconds> parse_http_date(std::string_view text,
                                           system_clock::time_point now) noexcept {
  const auto parsed = parse_date(trim_ows(text), now);
  if (!parsed) return std::nullopt;
  return parsed->first;
}

std::optional<retry_after_value> parse_retry_after_detailed(std::string_view field_value,
                                                            system_clock::time_point now) noexcept {
  const std::string_view text = trim_ows(field_value);
  if (text.empty()) return std::nullopt;
  if (is_digit(text.front())) {
    const auto delay = parse_delay_seconds(text);
    if (!delay) return std::nullopt;
    return retry_after_value{*delay, retry_after_form::delay_seconds};
  }
  const auto parsed = parse_date(text, now);
  if (!parsed) return std::nullopt;
  return retry_after_value{delay_until(parsed->first, now), parsed->second};
}

std::optional<duration> parse_retry_after(std::string_view field_value,
                                          system_clock::time_point now) noexcept {
  const auto parsed = parse_retry_after_detailed(field_value, now);
  if (!parsed) return std::nullopt;
  return parsed->delay;
}

}  // namespace stormguard
