#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the go-retryablehttp fleet (main.go beside this script) into OUTDIR, offline: Debian's Go
# (golang-go) in GOPATH mode against Debian's packaged sources under /usr/share/gocode
# (golang-github-hashicorp-go-retryablehttp-dev and its dependencies), no module download.
# Install them with `scripts/bootstrap --components fleets`. Prints the program's path.
#
#   fleets/go-retryablehttp/build.sh OUTDIR
set -euo pipefail
(($# == 1)) || { echo "usage: fleets/go-retryablehttp/build.sh OUTDIR" >&2; exit 2; }
out="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gopath=/usr/share/gocode
if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: no go on PATH: scripts/bootstrap --components fleets installs Debian's" >&2
  exit 1
fi
if [[ ! -f "${gopath}/src/github.com/hashicorp/go-retryablehttp/client.go" ]]; then
  echo "build.sh: ${gopath}/src/github.com/hashicorp/go-retryablehttp missing:" \
    "scripts/bootstrap --components fleets installs golang-github-hashicorp-go-retryablehttp-dev" >&2
  exit 1
fi
mkdir -p "${out}"
cd "${here}"
GOPATH="${gopath}" GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local \
  go build -trimpath -o "${out}/go-retryablehttp-fleet" .
echo "${out}/go-retryablehttp-fleet"
