#!/usr/bin/env bash
# CI for the Node client: installs clients/node's locked dependencies
# (npm ci, into clients/node/node_modules), compiles it with tsc into
# clients/node/build, then runs its tests with node's test runner against the
# daemon that `cargo build` produced ($MNEMO_BIN, default target/debug/mnemo)
# and the repository's proto/.
#
# Nothing is installed globally. Extra arguments go to `node --test`
# (e.g. `clients/node/ci.sh --test-name-pattern=watch`).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# The tests resolve a relative MNEMO_BIN from the repository root; make it the caller's.
MNEMO_BIN="$(realpath -m "${MNEMO_BIN:-$ROOT/target/debug/mnemo}")"
export MNEMO_BIN
cd "$ROOT/clients/node"

if [ ! -x "$MNEMO_BIN" ]; then
    echo "clients/node/ci.sh: no mnemo binary at $MNEMO_BIN (run cargo build first)" >&2
    exit 1
fi
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
    echo "clients/node/ci.sh: needs Node.js 20 or newer, found $(node --version)" >&2
    exit 1
fi

# Install scripts are not needed (protobufjs's only checks its optional CLI).
npm ci --silent --no-audit --no-fund --ignore-scripts
rm -rf build # no test compiled from a deleted source
node_modules/.bin/tsc -p .
# Options go before the files: node 20 takes anything after them for a file.
exec node --test --test-reporter=spec --test-timeout=120000 "$@" build/test/*.test.js
