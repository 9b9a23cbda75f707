#!/usr/bin/env bash
# Download the embedding model for terraform/, verify it, and leave the ONNX file at
# $MODEL_DEST for oci_objectstorage_object to upload. Called by terraform_data.model_file
# (local-exec); run it by hand with the same three variables to debug a failed apply,
# because Terraform hides the output of a provisioner that uses a sensitive value.
#
#   MODEL_URL     https URL of an .onnx file or of a .zip holding exactly one .onnx
#                 (Oracle's all_MiniLM_L12_v2_augmented.zip). May be a PAR URL: never printed.
#   MODEL_SHA256  expected SHA-256 (hex) of the downloaded file, zip or onnx.
#   MODEL_DEST    absolute path of the .onnx file to produce (terraform/.cache/...).
#
# A checksum mismatch fails the apply; nothing unverified is ever left at MODEL_DEST.
# Needs curl, and sha256sum or shasum; unzip or python3 for a .zip.
set -euo pipefail
set +x

url="${MODEL_URL:?MODEL_URL is not set}"
want="$(printf '%s' "${MODEL_SHA256:?MODEL_SHA256 is not set}" | tr 'A-F' 'a-f')"
dest="${MODEL_DEST:?MODEL_DEST is not set}"

if [[ ! "${want}" =~ ^[0-9a-f]{64}$ ]]; then
  echo "fetch-model: MODEL_SHA256 must be 64 hex characters" >&2
  exit 1
fi
if [[ "${url}" != https://* ]]; then
  echo "fetch-model: MODEL_URL must be an https:// URL" >&2
  exit 1
fi

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  elif command -v shasum >/dev/null 2>&1; then
    shasum -a 256 "$1" | cut -d' ' -f1
  else
    echo "fetch-model: need sha256sum or shasum" >&2
    return 1
  fi
}

dir="$(dirname "${dest}")"
stamp="${dest}.source-sha256"
mkdir -p "${dir}"

# Already fetched and verified for this checksum: nothing to do.
if [[ -f "${dest}" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then
  echo "fetch-model: ${dest} is already verified"
  exit 0
fi

work="$(mktemp -d "${dir}/.fetch.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

echo "fetch-model: downloading the model (URL not shown)"
# The URL goes to curl through a config file on stdin, not the command line, so other local
# users cannot read it from the process list.
printf 'url = "%s"\n' "${url}" | curl --fail --silent --show-error --location \
  --proto '=https' --tlsv1.2 --retry 3 --config - --output "${work}/download"

got="$(sha256_of "${work}/download")"
if [[ "${got}" != "${want}" ]]; then
  echo "fetch-model: SHA-256 mismatch: expected ${want}, got ${got}" >&2
  exit 1
fi
echo "fetch-model: SHA-256 verified"

if [[ "$(head -c 4 "${work}/download" | od -An -tx1 | tr -d ' \n')" == "504b0304" ]]; then
  # A zip (PK\x03\x04): take its single .onnx member.
  mkdir "${work}/unzipped"
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -j "${work}/download" '*.onnx' -d "${work}/unzipped"
  else
    python3 - "${work}/download" "${work}/unzipped" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.endswith(".onnx"):
            with z.open(name) as src, open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as out:
                out.write(src.read())
PY
  fi
  shopt -s nullglob
  found=("${work}"/unzipped/*.onnx)
  shopt -u nullglob
  if [[ "${#found[@]}" -ne 1 ]]; then
    echo "fetch-model: expected exactly one .onnx file in the zip, found ${#found[@]}" >&2
    exit 1
  fi
  mv "${found[0]}" "${work}/model.onnx"
else
  mv "${work}/download" "${work}/model.onnx"
fi

chmod 0644 "${work}/model.onnx"
mv -f "${work}/model.onnx" "${dest}"
printf '%s' "${want}" >"${stamp}"
echo "fetch-model: wrote ${dest}"
