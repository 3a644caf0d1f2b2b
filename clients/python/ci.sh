#!/usr/bin/env bash
# CI for the Python client: installs clients/python (stubs generated from
# proto/ during the install) with its test extras into target/py-venv, then
# runs its tests against the daemon that `cargo build` produced.
#
# Idempotent and quick to re-run: the venv is kept, and the package is
# reinstalled only when its sources, the protos or the Python version change.
# Extra arguments go to pytest (e.g. `clients/python/ci.sh -k summary`).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# The tests need an absolute path; a relative MNEMO_BIN is the caller's.
MNEMO_BIN="$(realpath -m "${MNEMO_BIN:-$ROOT/target/debug/mnemo}")"
export MNEMO_BIN
cd "$ROOT"

VENV="$ROOT/target/py-venv"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$MNEMO_BIN" ]; then
    echo "clients/python/ci.sh: no mnemo binary at $MNEMO_BIN (run cargo build first)" >&2
    exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi

# What the installed package was built from: its sources, the protos, the
# version (Cargo.toml's) and the interpreter.
fingerprint="$(
    {
        "$VENV/bin/python" --version
        grep -m1 '^version' Cargo.toml
        find clients/python proto -type f \
            \( -name '*.py' -o -name '*.toml' -o -name '*.proto' \) \
            -not -path 'clients/python/tests/*' -not -path 'clients/python/build/*' \
            -not -path '*/_gen/*' -not -path '*.egg-info/*' -print0 |
            sort -z | xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1
)"
stamp="$VENV/.mnemo-client-fingerprint"
if [ "$(cat "$stamp" 2>/dev/null)" != "$fingerprint" ]; then
    rm -f "$stamp"
    # A stale build/ could carry modules deleted from the sources into the wheel.
    rm -rf clients/python/build
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        "./clients/python[test]"
    echo "$fingerprint" >"$stamp"
fi

exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider clients/python/tests "$@"
