#!/usr/bin/env bash
# CI for the user path: what `pip install mnemo-daemon` (or pipx, or uvx)
# gives a user. Builds the wheel with maturin in the dev profile (reusing
# the target/ that `cargo test` built: only the `mnemo` binary is linked
# again), installs it alone into a fresh virtual environment, and runs
# packaging/smoke.py with a PATH that holds that environment and the
# system's directories but no cargo or rustc: `mnemo --version`,
# `mnemo serve` answering gRPC health, and an MCP round trip through the
# official `mcp` client against `mnemo mcp --embedded`.
#
# maturin and the smoke test's own packages (mcp, grpcio's health stubs)
# live in a kept venv, target/packaging-venv, beside the fresh one.
# MNEMO_WHEEL_PROFILE=release builds the release wheel instead (slow).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
PROFILE="${MNEMO_WHEEL_PROFILE:-dev}"
TOOLS="$ROOT/target/packaging-venv"

if [ ! -x "$TOOLS/bin/python" ]; then
    "$PYTHON" -m venv "$TOOLS"
fi
"$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    'maturin==1.16.0' 'mcp==2.3.0' 'grpcio-health-checking>=1.66'

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mnemo-packaging.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "packaging/ci.sh: maturin build --profile $PROFILE" >&2
start=$SECONDS
"$TOOLS/bin/maturin" build --locked --profile "$PROFILE" --out "$tmp/wheels" >"$tmp/maturin.log" 2>&1 || {
    cat "$tmp/maturin.log" >&2
    exit 1
}
wheels=("$tmp"/wheels/mnemo_daemon-*.whl)
wheel="${wheels[0]}"
[ -f "$wheel" ] || { echo "packaging/ci.sh: no wheel in $tmp/wheels" >&2; exit 1; }
echo "packaging/ci.sh: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB, built in $((SECONDS - start)) s)" >&2

# The user's side: a fresh environment with the wheel and nothing else.
# PATH: the fresh venv and the system's directories, never ~/.cargo/bin.
USER_PATH="$tmp/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
if PATH="$USER_PATH" command -v cargo >/dev/null 2>&1 || PATH="$USER_PATH" command -v rustc >/dev/null 2>&1; then
    echo "packaging/ci.sh: cargo or rustc is on the system PATH; the test needs a PATH without them" >&2
    exit 1
fi
"$PYTHON" -m venv "$tmp/venv"
start=$SECONDS
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-index "$wheel"
echo "packaging/ci.sh: installed in $((SECONDS - start)) s" >&2

env -i PATH="$USER_PATH" HOME="$tmp/home" LANG=C.UTF-8 \
    MNEMO_EXPECT_VENV="$tmp/venv" MNEMO_WHEEL="$wheel" \
    "$TOOLS/bin/python" "$ROOT/packaging/smoke.py" "$tmp/work"
