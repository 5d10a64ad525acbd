#!/usr/bin/env bash
# Installs what building the eBPF object and running the full test suite need, on Debian as root:
# Debian's rustc-web toolchain (ships rust-src for -Z build-std) with LLVM 22, a pinned
# bpf-linker, and the Python packages the tests use. Idempotent: it skips what is present.
set -euo pipefail

BPF_LINKER_VERSION=0.13.0
PY_PACKAGES=(pytest "perfetto==0.59.1" "nvidia-cuda-runtime-cu12==12.9.79" "jsonschema==4.26.0" "nvtx==0.2.16" "opentelemetry-proto==1.45.2")

need_apt=()
for pkg in rustc-web cargo-web rust-web-src llvm-22-dev libpolly-22-dev libzstd-dev gcc libc6-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "prerequisites: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${need_apt[@]}"
fi

if ! bpf-linker --version 2>/dev/null | grep -qx "bpf-linker $BPF_LINKER_VERSION"; then
  echo "prerequisites: cargo install bpf-linker $BPF_LINKER_VERSION (LLVM 22; takes a few minutes)"
  LLVM_PREFIX=/usr/lib/llvm-22 cargo install bpf-linker --version "$BPF_LINKER_VERSION" --locked \
    --no-default-features --features llvm-22
fi

missing_py=()
for spec in "${PY_PACKAGES[@]}"; do
  name=${spec%%==*}
  python3 -m pip show -q "$name" >/dev/null 2>&1 || missing_py+=("$spec")
done
if [ ${#missing_py[@]} -gt 0 ]; then
  echo "prerequisites: pip install ${missing_py[*]}"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "${missing_py[@]}"
fi

# The ML frameworks the integration tests run against (pinned there; skipped when present).
bash "$(dirname "$0")/install-framework-deps.sh"

if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing || echo "prerequisites: could not mount tracefs" >&2
fi
