#!/usr/bin/env bash
# CI stage: kiln serve's pytest suite with the official openai client, requests and a headless
# Chromium (selenium), against build/release/kiln (built by the release stage before this one).
set -euo pipefail
cd "$(dirname "$0")/.."
test -x build/release/kiln || { echo "build/release/kiln is missing: run the release build first" >&2; exit 1; }
venv=build/serve-venv
# (Re)installs when a package the suite imports is missing, as in a venv made before it needed it.
if ! "$venv/bin/python" -c "import openai, requests, pytest, selenium, jsonschema" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet openai requests pytest selenium jsonschema
fi
"$venv/bin/pytest" -q tests/server "$@"
