#!/usr/bin/env bash
# Sets up, builds and runs every test suite (the README's second command; .ci/run calls it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=${LCM_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"
