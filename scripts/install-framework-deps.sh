#!/usr/bin/env bash
# Installs the ML frameworks that the ingero-annotate integration tests run against (CPU only),
# pinned to the versions docs/integrations.md says were tested. Idempotent: a package already
# present at its pinned version is skipped, so a warm machine pays only a few `pip show` calls.
# PyPI's torch wheel pulls about 3 GB of CUDA libraries; on a fresh machine expect a few minutes.
set -euo pipefail

PY=${PYTHON:-python3}
PINNED=(
  "torch==2.15.0"
  "lightning==2.6.6"
  "pytorch-lightning==2.6.6"
  "transformers==5.24.0"
  "accelerate==1.15.0"
  "ray[default]==2.60.0"
)

# One interpreter start reads every installed version (`pip show` per
# package costs seconds each in a large environment).
mapfile -t missing < <("$PY" - "${PINNED[@]}" <<'PYEOF'
import sys
from importlib import metadata

for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        have = metadata.version(name.split("[")[0])
    except metadata.PackageNotFoundError:
        have = None
    if have != want:
        print(spec)
PYEOF
)

if [ ${#missing[@]} -eq 0 ]; then
  echo "framework deps: all pinned versions present"
  exit 0
fi
echo "framework deps: pip install ${missing[*]}"
start=$(date +%s)
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore "${missing[@]}"
echo "framework deps: installed in $(( $(date +%s) - start )) s"
