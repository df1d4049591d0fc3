#!/usr/bin/env bash
# Builds stormguard the ways a project consumes it, and a small consumer against each
# (tests/consumers/*/), as .ci/run does:
#   1. core only, static, with every optional package hidden (below), GoogleTest included: the
#      tests default to OFF without a flag; installed; the `core` consumer (find_package, hidden
#      too) and a pkg-config consumer of stormguard-core.pc
#   2. core only, shared (BUILD_SHARED_LIBS=ON), hidden but GoogleTest: builds and passes the
#      core's tests; SONAME and exported symbols checked; installed; the `core` consumer links the
#      shared library and runs
#   3. add_subdirectory (BUILD_SHARED_LIBS stays out of the parent's cache) and 4. FetchContent
#      from a local clone (the committed HEAD), hidden
#   5. with --full BUILD_DIR (a configured and built default build, e.g. build/ after `make test`):
#      it is installed and the `http` and `grpc` consumers build with find_package and with
#      pkg-config; the `optional` consumer configures with pkg-config finding nothing
#   6. every component, shared: every library's SONAME and exported symbols checked (namespace
#      stormguard only); installed; the `shared` consumer links stormguard::http and
#      stormguard::config shared and runs
#
# "Hidden": CMAKE_FIND_ROOT_PATH=/nonexistent with the package, include and library modes ONLY
# and an empty PKG_CONFIG_LIBDIR; only what a step names (stormguard_DIR, GTest_DIR) is found.
#
#   tests/consumers/run.sh [--full BUILD_DIR] [WORK_DIR]     (WORK_DIR default: build-consumers)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(cd "${here}/../.." && pwd)"
full_build=""
if [[ "${1:-}" == "--full" ]]; then
  full_build="$(cd "$2" && pwd)"
  shift 2
fi
work="${1:-${source_dir}/build-consumers}"
rm -rf "${work}"
mkdir -p "${work}"
work="$(cd "${work}" && pwd)"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
hidden=(
  -DCMAKE_FIND_ROOT_PATH=/nonexistent
  -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY
  -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY
  -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
  -DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER
)
components_off=()
for c in CONFIG SIM ASIO HTTP LAB METRICS GUARD ADMISSION FLEET GRPC; do components_off+=("-DSTORMGUARD_WITH_${c}=OFF"); done

step() { echo "== consumers: $*"; }
configure() { PKG_CONFIG_LIBDIR="" cmake --no-warn-unused-cli "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null; }
build() { cmake --build "$1" >/dev/null; }
run_consumer() {
  local out
  out="$("$1")"
  [[ "${out}" == "stormguard "* ]] || { echo "consumers: $1 printed '${out}'" >&2; exit 1; }
  echo "   $1: ${out}"
}

step "1. core only, static, every optional package hidden (GoogleTest too: no tests, no flag needed)"
configure -S "${source_dir}" -B "${work}/core-static" "${hidden[@]}" "${components_off[@]}"
grep -q '^STORMGUARD_BUILD_TESTS:BOOL=OFF$' "${work}/core-static/CMakeCache.txt" ||
  { echo "consumers: without GoogleTest the tests are not off by default" >&2; exit 1; }
build "${work}/core-static"
cmake --install "${work}/core-static" --prefix "${work}/core-static-prefix" >/dev/null
static_dir="$(dirname "$(find "${work}/core-static-prefix" -name stormguardConfig.cmake)")"
configure -S "${here}/core" -B "${work}/consumer-core-static" "${hidden[@]}" -Dstormguard_DIR="${static_dir}"
build "${work}/consumer-core-static"
run_consumer "${work}/consumer-core-static/consumer"

step "   pkg-config: stormguard-core.pc"
pc_dir="$(dirname "$(find "${work}/core-static-prefix" -name stormguard-core.pc)")"
# shellcheck disable=SC2046  # pkg-config prints flags to split
c++ -std=c++20 -o "${work}/pkgconfig-core" "${here}/core/main.cpp" \
  $(PKG_CONFIG_LIBDIR="${pc_dir}" pkg-config --cflags --libs stormguard-core)
run_consumer "${work}/pkgconfig-core"

step "2. core only, shared, with the core's tests (GoogleTest visible, the rest hidden)"
gtest_dir="$(dirname "$(find /usr/lib /usr/local/lib -name GTestConfig.cmake -print -quit)")"
configure -S "${source_dir}" -B "${work}/core-shared" "${hidden[@]}" "${components_off[@]}" \
  -DBUILD_SHARED_LIBS=ON -DGTest_DIR="${gtest_dir}"
build "${work}/core-shared"
ctest --test-dir "${work}/core-shared" -j2 --output-on-failure >"${work}/core-shared/ctest.log" 2>&1 ||
  { cat "${work}/core-shared/ctest.log"; exit 1; }
echo "   $(grep -E 'tests passed' "${work}/core-shared/ctest.log")"
library="$(find "${work}/core-shared" -maxdepth 1 -name 'libstormguard_core.so.*.*.*')"
soname="$(readelf -d "${library}" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')"
[[ "${soname}" =~ ^libstormguard_core\.so\.[0-9]+\.[0-9]+$ ]] ||
  { echo "consumers: SONAME '${soname}'" >&2; exit 1; }
# Only the public API leaves the library (STORMGUARD_EXPORT, -fvisibility=hidden,
# -fvisibility-inlines-hidden): every exported definition is stormguard's, none detail's.
exported="$(nm -DC --defined-only "${library}" | awk '$2 ~ /^[TWDBRV]$/ { $1 = ""; $2 = ""; print }')"
grep -q 'stormguard::backoff::backoff' <<<"${exported}" ||
  { echo "consumers: backoff's constructor is not exported" >&2; exit 1; }
if grep -vq 'stormguard::' <<<"${exported}" || grep -Eq 'stormguard::detail::|anonymous namespace' <<<"${exported}"; then
  echo "consumers: symbols beyond the public API are exported:" >&2
  grep -v 'stormguard::' <<<"${exported}" | head >&2
  grep -E 'stormguard::detail::|anonymous namespace' <<<"${exported}" | head >&2
  exit 1
fi
echo "   ${soname}: $(wc -l <<<"${exported}") exported symbols"
cmake --install "${work}/core-shared" --prefix "${work}/core-shared-prefix" >/dev/null
shared_dir="$(dirname "$(find "${work}/core-shared-prefix" -name stormguardConfig.cmake)")"
configure -S "${here}/core" -B "${work}/consumer-core-shared" "${hidden[@]}" -Dstormguard_DIR="${shared_dir}"
build "${work}/consumer-core-shared"
grep -q "${soname}" <<<"$(ldd "${work}/consumer-core-shared/consumer")" ||
  { echo "consumers: the consumer is not linked to ${soname}" >&2; exit 1; }
run_consumer "${work}/consumer-core-shared/consumer"

step "3. add_subdirectory, every optional package hidden"
configure -S "${here}/subdirectory" -B "${work}/consumer-subdirectory" "${hidden[@]}" \
  -DSTORMGUARD_SOURCE_DIR="${source_dir}"
build "${work}/consumer-subdirectory"
run_consumer "${work}/consumer-subdirectory/consumer"
# stormguard's options land in the parent's cache, BUILD_SHARED_LIBS does not (it is the parent's).
if grep -q '^BUILD_SHARED_LIBS:' "${work}/consumer-subdirectory/CMakeCache.txt"; then
  echo "consumers: add_subdirectory put BUILD_SHARED_LIBS into the parent's cache" >&2
  exit 1
fi

step "4. FetchContent from a local clone (HEAD), every optional package hidden"
configure -S "${here}/fetchcontent" -B "${work}/consumer-fetchcontent" "${hidden[@]}" \
  -DSTORMGUARD_GIT_URL="file://${source_dir}" \
  -DSTORMGUARD_GIT_TAG="$(git -C "${source_dir}" rev-parse HEAD)"
build "${work}/consumer-fetchcontent"
run_consumer "${work}/consumer-fetchcontent/consumer"

if [[ -n "${full_build}" ]]; then
  step "5. the full build ${full_build}: find_package(COMPONENTS http) and pkg-config"
  cmake --install "${full_build}" --prefix "${work}/full-prefix" >/dev/null
  full_dir="$(dirname "$(find "${work}/full-prefix" -name stormguardConfig.cmake)")"
  cmake "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -S "${here}/http" -B "${work}/consumer-http" \
    -Dstormguard_DIR="${full_dir}" >/dev/null
  build "${work}/consumer-http"
  run_consumer "${work}/consumer-http/consumer"
  full_pc_dir="$(dirname "$(find "${work}/full-prefix" -name stormguard-http.pc)")"
  # shellcheck disable=SC2046
  c++ -std=c++20 -o "${work}/pkgconfig-http" "${here}/http/main.cpp" \
    $(PKG_CONFIG_PATH="${full_pc_dir}" pkg-config --cflags --libs stormguard-http)
  run_consumer "${work}/pkgconfig-http"
  step "   find_package(COMPONENTS grpc) and stormguard-grpc.pc"
  cmake "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -S "${here}/grpc" -B "${work}/consumer-grpc" \
    -Dstormguard_DIR="${full_dir}" >/dev/null
  build "${work}/consumer-grpc"
  run_consumer "${work}/consumer-grpc/consumer"
  # shellcheck disable=SC2046
  c++ -std=c++20 -o "${work}/pkgconfig-grpc" "${here}/grpc/main.cpp" \
    $(PKG_CONFIG_PATH="${full_pc_dir}" pkg-config --cflags --libs stormguard-grpc)
  run_consumer "${work}/pkgconfig-grpc"
  step "   QUIET and OPTIONAL_COMPONENTS when pkg-config finds nothing"
  PKG_CONFIG_LIBDIR=/nonexistent cmake "${generator[@]}" -S "${here}/optional" \
    -B "${work}/consumer-optional" -Dstormguard_DIR="${full_dir}" >/dev/null
fi
step "6. every component shared (BUILD_SHARED_LIBS=ON; no tests, CLI, examples or benchmarks)"
# Not hidden: every component's packages are needed (configure() hides pkg-config's).
cmake --no-warn-unused-cli "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -S "${source_dir}" -B "${work}/all-shared" -DBUILD_SHARED_LIBS=ON \
  -DSTORMGUARD_BUILD_TESTS=OFF -DSTORMGUARD_BUILD_CLI=OFF -DSTORMGUARD_BUILD_EXAMPLES=OFF \
  -DSTORMGUARD_BUILD_BENCH=OFF >/dev/null
build "${work}/all-shared"
cmake --install "${work}/all-shared" --prefix "${work}/all-shared-prefix" >/dev/null
# Only the public API leaves any library (STORMGUARD_EXPORT, hidden visibility):
#  - every strong definition (nm types T D B R: functions, data, the vtables and typeinfo of
#    exported classes) is in namespace stormguard, none in a detail namespace or an anonymous one;
#  - weak and unique ones (W V u: vague linkage) are stormguard's too, or instantiations and
#    static data of the header-only code of libstdc++ (std::, __gnu_cxx::) and Asio (asio::),
#    which the compiler exports whatever the visibility so that one copy exists in the process
#    (Asio's service ids, call stacks and error categories must be unique: an asio::error_code
#    compares categories by address).
libraries=()
while IFS= read -r library; do libraries+=("${library}"); done < <(
  find "${work}/all-shared-prefix" -name 'libstormguard_*.so.*.*.*' | sort)
((${#libraries[@]} >= 9)) || { echo "consumers: ${#libraries[@]} shared libraries installed" >&2; exit 1; }
ours='((typeinfo|typeinfo name|vtable|VTT|guard variable) for )?stormguard::'
vague='^[WVu] ((typeinfo|typeinfo name|vtable|VTT|guard variable) for )?([a-z_:]+[*&]? )?(std|__gnu_cxx|asio)::'
for library in "${libraries[@]}"; do
  name="$(basename "${library}")"
  [[ "$(readelf -d "${library}" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" =~ ^${name%%.so.*}\.so\.[0-9]+\.[0-9]+$ ]] ||
    { echo "consumers: ${name} has no SONAME <name>.so.MAJOR.MINOR" >&2; exit 1; }
  # "<type> <demangled name>" per exported definition
  exported="$(nm -D --defined-only "${library}" | awk '{ print $2, $3 }' | c++filt)"
  beyond="$(grep -Ev "^. ${ours}" <<<"${exported}" | grep -Ev "${vague}" || true)"
  # (the name before its parameter list: a detail type among the parameters is fine)
  internal="$(grep -E "^. ${ours}" <<<"${exported}" | sed 's/(.*//' |
    grep -E '::detail::|anonymous namespace' || true)"
  if [[ -n "${beyond}${internal}" ]]; then
    echo "consumers: ${name} exports symbols beyond the public API:" >&2
    printf '%s\n' "${beyond}" "${internal}" | grep -v '^$' | head -20 >&2
    exit 1
  fi
  echo "   ${name}: $(grep -cE "^. ${ours}" <<<"${exported}") stormguard symbols exported," \
    "$(grep -cEv "^. ${ours}" <<<"${exported}" || true) of libstdc++/Asio templates"
done
all_shared_dir="$(dirname "$(find "${work}/all-shared-prefix" -name stormguardConfig.cmake)")"
cmake "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -S "${here}/shared" -B "${work}/consumer-shared" \
  -Dstormguard_DIR="${all_shared_dir}" >/dev/null
build "${work}/consumer-shared"
# ldd's output in a variable first: `ldd | grep -q` fails under pipefail when grep stops at its
# first match and ldd, still writing, gets SIGPIPE.
linked="$(ldd "${work}/consumer-shared/consumer")"
for component in core http config; do
  grep -q "libstormguard_${component}\.so" <<<"${linked}" ||
    { echo "consumers: the consumer is not linked to libstormguard_${component}.so" >&2; exit 1; }
done
run_consumer "${work}/consumer-shared/consumer"

echo "== consumers: all passed"
