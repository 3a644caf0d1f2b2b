#!/usr/bin/env bash
# Before/after of the replay bench (benches/replay.rs) in one run on one
# machine: builds this tree's replay.rs at a base commit (a temporary git
# worktree) and in this tree, then runs both with the same environment
# (MNEMO_REPLAY_SETS, MNEMO_REPLAY_BUDGETS, ...), base first.
#
# Both builds use this tree's target directory (the dependencies are
# built once). Cargo names a workspace member's artifacts and its build
# script's output independently of where the tree lies, so the two trees
# overwrite each other's: each bench binary is copied out right after its
# build, and `proto/` is touched before each build so that the build
# script regenerates the gRPC code from that tree's contract.
#
# Usage: benches/replay_compare.sh <base commit> (from anywhere).
set -euo pipefail
base=${1:?usage: benches/replay_compare.sh <base commit>}
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
work=$(mktemp -d)
tree=$work/base
git -C "$root" worktree add --detach "$tree" "$base" >/dev/null
trap 'git -C "$root" worktree remove --force "$tree"; rm -rf "$work"' EXIT
cp "$root/benches/replay.rs" "$tree/benches/replay.rs"

build() { # tree, copy to
    touch "$1/proto"/mnemo/v1/*.proto
    local exe
    exe=$(cd "$1" && cargo bench --profile dev --bench replay --no-run \
        --message-format=json-render-diagnostics |
        grep '"kind":\["bench"\]' | grep '"name":"replay"' |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
    [ -n "$exe" ] || { echo "no replay bench built in $1" >&2; exit 1; }
    cp "$exe" "$2"
}
build "$tree" "$work/replay-base"
build "$root" "$work/replay-head"
head=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain --untracked-files=no | grep -q . && echo " + uncommitted changes" || true)

echo "## Before: $(git -C "$root" rev-parse --short "$base")"
echo
(cd "$tree" && "$work/replay-base" --bench)
echo
echo "## After: $head$dirty"
echo
(cd "$root" && "$work/replay-head" --bench)
