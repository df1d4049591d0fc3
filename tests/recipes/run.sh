#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest design.recipes: CONTRIBUTING.md's recipes, followed on a copy of the source tree. It adds a
# test-only server defence ("attempt-cap": its own two headers under files/), a scenario field
# (probe_level) and a report key (probe_events), each by the recipe: its own files, one list line
# and its CMakeLists header line (recipe.patch, nothing else), builds the command-line programs
# and checks that `simulate`, `serve` and `lab` accept them. A recipe that stops being true (a
# list spelled twice again, a hand-kept table) fails here: the patch no longer applies, the copy
# no longer builds, or a command refuses the new defence, field or key.
#
# Usage: tests/recipes/run.sh SOURCE_DIR WORK_DIR
# SOURCE_DIR is a git checkout (its tracked and untracked, not ignored, files are copied);
# WORK_DIR is emptied and reused, so a second run builds only what changed.
set -euo pipefail

src=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "${work}"
work=$(cd "${work}" && pwd)
tree="${work}/src"
build="${work}/build"

fail() {
  echo "design.recipes: $*" >&2
  exit 1
}

# The copy: the checkout's files, then the recipe's own files and its list lines.
rm -rf "${tree}"
mkdir -p "${tree}"
(cd "${src}" && git ls-files -z --cached --others --exclude-standard) |
  (cd "${src}" && tar --null -T - -cf -) | tar -C "${tree}" -xf -
cp -Rp "${here}/files/." "${tree}/"
if ! patch -d "${tree}" -p1 --batch --forward --quiet <"${here}/recipe.patch"; then
  fail "recipe.patch no longer applies: the list lines moved; update CONTRIBUTING.md's recipes and the patch together"
fi

# The programs only (no tests, examples or benchmarks), unoptimized: the point is that it builds.
cmake -S "${tree}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O0 -g0" \
  -DSTORMGUARD_BUILD_TESTS=OFF -DSTORMGUARD_BUILD_EXAMPLES=OFF -DSTORMGUARD_BUILD_BENCH=OFF \
  -DSTORMGUARD_INSTALL=OFF -DSTORMGUARD_WITH_GRPC=OFF >"${work}/configure.log" 2>&1 ||
  { cat "${work}/configure.log" >&2; fail "the copy does not configure"; }
cmake --build "${build}" --target stormguard-simulate stormguard-serve stormguard-lab stormguard \
  >"${work}/build.log" 2>&1 || { tail -n 60 "${work}/build.log" >&2; fail "the copy does not build"; }
stormguard="${build}/bin/stormguard"

# A small scenario that uses all three: the defence with a setting, the field, 60 req/s.
scenario="${work}/probe.json"
cat >"${scenario}" <<'JSON'
{
  "name": "probe",
  "seed": 7,
  "duration": "4s",
  "requests_per_second": 60,
  "clients": 2,
  "timeout": "200ms",
  "server": {
    "workers": 2,
    "queue_limit": 4,
    "service_time": "20ms",
    "defences": {"attempt-cap": {"max_attempt": 1}}
  },
  "incident": {"start": "1s", "end": "2s", "error_rate": 0.5},
  "probe_level": 3
}
JSON

# simulate: the field is read, the defence refuses retries, the key is written.
out=$("${stormguard}" simulate "${scenario}" -s full --json) || fail "simulate refused the scenario"
grep -q '"defence":"attempt-cap"' <<<"${out}" || fail "simulate did not run attempt-cap: ${out}"
grep -q '"probe_events":0' <<<"${out}" || fail "simulate --json has no probe_events: ${out}"
grep -q '"rejected":[1-9]' <<<"${out}" || fail "attempt-cap refused no retry in simulate: ${out}"
# The field's range, from its one line: 11 is refused, naming the field.
sed 's/"probe_level": 3/"probe_level": 11/' "${scenario}" >"${work}/bad.json"
if err=$("${stormguard}" simulate "${work}/bad.json" -s full 2>&1); then
  fail "simulate accepted probe_level 11"
fi
grep -q 'probe_level' <<<"${err}" || fail "the error does not name probe_level: ${err}"
# --defence knows it by name, and `all` includes it.
"${stormguard}" simulate "${scenario}" -s full --defence attempt-cap+retry-budget --json |
  grep -q '"defence":"attempt-cap+retry-budget"\|"defence":"retry-budget+attempt-cap"' ||
  fail "simulate --defence attempt-cap+retry-budget"

# lab: the same scenario on real sockets; every row has the key, the defence refused retries.
out=$("${stormguard}" lab "${scenario}" -s full --json) || fail "lab refused the scenario"
grep -q '"probe_events":0' <<<"${out}" || fail "lab --json has no probe_events: ${out}"
grep -q '"defence":"attempt-cap"' <<<"${out}" || fail "lab did not run attempt-cap: ${out}"

# serve: the defence's counter on /stats.
"${stormguard}" serve "${scenario}" --port 0 >"${work}/serve.out" 2>"${work}/serve.err" &
serve=$!
trap 'kill "${serve}" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 100); do
  url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "${work}/serve.out")
  [[ -n "${url}" ]] && break
  sleep 0.1
done
[[ -n "${url}" ]] || fail "serve did not start: $(cat "${work}/serve.err")"
stats=$(curl -sS --max-time 5 "${url}stats") || fail "GET /stats failed"
grep -q '"refused_attempt_cap":0' <<<"${stats}" || fail "/stats has no refused_attempt_cap: ${stats}"
echo "design.recipes: a test-only defence, scenario field and report key added by the recipes; simulate, lab and serve accept them"
