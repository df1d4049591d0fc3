# Thin wrapper over the CMake presets (CMakePresets.json). Every target first runs
# scripts/bootstrap, which installs missing Debian packages and is silent when none are missing.
#
#   make build         configure + build the release preset into build/
#   make run           build, then ./build/bin/stormguard simulate (also plots build/friday-night.png)
#   make test          build, then run every test (ctest --preset release, 2 in parallel)
#   make consumers     build, then tests/consumers/run.sh: core-only builds (static, shared) with
#                      every optional package hidden, and consumer projects (find_package,
#                      add_subdirectory, FetchContent, pkg-config) in build-consumers/
#   make bench         build (with the benchmark programs), then run every build/bench/*_benchmark
#                      (BENCH_ARGS=... to pass flags)
#   make fuzz          build the libFuzzer targets (clang++-19, ASan+UBSan, build-fuzz/) and fuzz
#                      FUZZ_TARGET (retry_after, the default: the Retry-After parser; policy:
#                      the policy file parser; or http_framing: serve's request head and body
#                      framing scan) for FUZZ_SECONDS (default 60) from
#                      fuzz/corpus/FUZZ_TARGET
#   make docs          the API reference (Doxygen, ./Doxyfile) into build/docs/html/index.html;
#                      fails on any Doxygen warning (an undocumented public entity, a bad \param)
#   make format        clang-format -i over our sources
#   make format-check  fail if any source is not clang-formatted
#   make clean         remove the build directories of all presets

CLANG_FORMAT ?= clang-format
BENCH_ARGS ?=
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?= retry_after
# The longest input per target: a Retry-After value, or a policy file or request bytes.
FUZZ_MAX_LEN ?= $(if $(filter policy http_framing,$(FUZZ_TARGET)),4096,512)
FORMAT_DIRS := include src cli sim tests bench examples fuzz
FORMAT_FILES = $(shell find $(wildcard $(FORMAT_DIRS)) -type f \( -name '*.hpp' -o -name '*.cpp' \) | sort)

.PHONY: all bootstrap build run test consumers bench fuzz docs format format-check clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	cmake --preset release
	cmake --build --preset release

run: build
	./build/bin/stormguard simulate --plot build/friday-night.png

test: build
	ctest --preset release -j2

consumers: build
	tests/consumers/run.sh --full build build-consumers

bench: build
	cmake --build --preset release --target stormguard_benchmarks
	@set -e; found=0; \
	for b in build/bench/*_benchmark; do \
	  [ -x "$$b" ] || continue; found=1; \
	  echo "== $$b"; "$$b" $(BENCH_ARGS); \
	done; \
	[ "$$found" = 1 ] || echo "make bench: no benchmark programs (bench/*_benchmark.cpp) yet"

# New inputs the fuzzer finds go to build-fuzz/corpus/$(FUZZ_TARGET) (fuzz/corpus/$(FUZZ_TARGET) is
# only read); crashes to build-fuzz/crash-*. Copy a crash into fuzz/corpus/$(FUZZ_TARGET) to keep
# it as a regression test (tests/retry_after_test.cpp and tests/config_policy_test.cpp check every
# corpus file).
fuzz: bootstrap
	cmake --preset fuzz
	cmake --build --preset fuzz --target $(FUZZ_TARGET)_fuzz
	mkdir -p build-fuzz/corpus/$(FUZZ_TARGET)
	build-fuzz/fuzz/$(FUZZ_TARGET)_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) \
	  -dict=fuzz/$(FUZZ_TARGET).dict -artifact_prefix=build-fuzz/ -print_final_stats=1 \
	  build-fuzz/corpus/$(FUZZ_TARGET) fuzz/corpus/$(FUZZ_TARGET)

# docs/ is a folder, hence .PHONY: without it make would answer "Nothing to be done".
docs: bootstrap
	@mkdir -p build/docs
	STORMGUARD_VERSION=$$(sed -nE 's/^  VERSION ([0-9.]+)$$/\1/p' CMakeLists.txt | head -n 1) doxygen Doxyfile
	@echo "docs: build/docs/html/index.html"

format: bootstrap
	@files="$(FORMAT_FILES)"; [ -z "$$files" ] || $(CLANG_FORMAT) -i $$files

format-check: bootstrap
	@files="$(FORMAT_FILES)"; [ -z "$$files" ] || $(CLANG_FORMAT) --dry-run --Werror $$files
	@echo "format-check: all sources are clang-formatted"

clean:
	rm -rf build build-debug build-core build-asan build-tsan build-clang build-fuzz build-consumers
