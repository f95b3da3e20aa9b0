#!/usr/bin/env bash
# Build llama.cpp's llama-server, pinned, from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI (the only registry this project's machines reach), into a cache
# outside the repository. Prints the binary's path on its last line. Safe to re-run: an existing
# build is reused. ~9 minutes on 2 cores (CPU only, no GPU backends).
#
#   scripts/build_llama_server.sh            # build if missing, print the path
#   LLAMA_CACHE=DIR scripts/build_llama_server.sh
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llminfer/llama.cpp-$VERSION}"
BIN="$CACHE/build/bin/llama-server"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
for tool in cmake c++ make; do
  command -v "$tool" >/dev/null || { echo "build_llama_server: $tool is missing" >&2; exit 3; }
done
PYTHON="${PYTHON:-python3}"
mkdir -p "$CACHE"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
  "llama-cpp-python==$VERSION" -d "$WORK" >&2
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
rm -rf "$CACHE/src" && cp -r "$SRC" "$CACHE/src"
# CPU only, no native tuning (the binary may run on another CPU of the same kind), no curl
# (nothing is downloaded at run time), only the server and batched-bench targets.
cmake -S "$CACHE/src" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$CACHE/build" --target llama-server llama-batched-bench -j "$(nproc)" >&2
echo "$BIN"
