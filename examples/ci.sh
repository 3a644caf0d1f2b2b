#!/usr/bin/env bash
# CI for the examples: starts the daemon that `cargo build` produced
# ($MNEMO_BIN, default target/debug/mnemo) on a free port with a temporary
# data directory, runs examples/agent_loop.py against it with the venv that
# clients/python/ci.sh made (target/py-venv, which has the client
# installed; run that script first), then stops the daemon with SIGTERM and
# requires a clean exit. The daemon's log is shown when anything fails.
#
# Extra arguments go to agent_loop.py (e.g. `examples/ci.sh --show-bundle`).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MNEMO_BIN="$(realpath -m "${MNEMO_BIN:-$ROOT/target/debug/mnemo}")"
PYTHON="$ROOT/target/py-venv/bin/python"
STARTUP_SECONDS=30
SHUTDOWN_SECONDS=20

if [ ! -x "$MNEMO_BIN" ]; then
    echo "examples/ci.sh: no mnemo binary at $MNEMO_BIN (run cargo build first)" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import mnemo_client' 2>/dev/null; then
    echo "examples/ci.sh: no mnemo_client in $ROOT/target/py-venv (run clients/python/ci.sh first)" >&2
    exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mnemo-examples.XXXXXX")"
log="$tmp/mnemo.log"
pid=""

show_log() {
    echo "--- mnemo's log (last 30 lines) ---" >&2
    tail -n 30 "$log" >&2 || true
}

# Stops the daemon: SIGTERM, then SIGKILL if it has not exited in time.
# Returns the daemon's exit status (137 when it had to be killed).
# `pid` is cleared only once the daemon is reaped, so a signal that cuts
# this short leaves the rest to the EXIT trap.
stop_daemon() {
    local status=0 i
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < SHUTDOWN_SECONDS * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "examples/ci.sh: mnemo ignored SIGTERM for ${SHUTDOWN_SECONDS}s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" || status=$?
    pid=""
    return "$status"
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_daemon || true
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The address is announced at info level; a config file or store from the
# caller's environment must not change what is being tested.
env -u MNEMO_CONFIG -u MNEMO_STORE -u MNEMO_LISTEN -u MNEMO_DATA_DIR \
    MNEMO_LOG=info MNEMO_LOG_FORMAT=text \
    "$MNEMO_BIN" serve --listen 127.0.0.1:0 --data-dir "$tmp/data" \
    </dev/null >/dev/null 2>"$log" &
pid=$!

addr=""
for ((i = 0; i < STARTUP_SECONDS * 10; i++)); do
    # ANSI colours are stripped in case a future build colours a file.
    addr="$(sed 's/\x1b\[[0-9;]*m//g' "$log" |
        sed -n 's/.*mnemo listening on \([^ ]*:[0-9][0-9]*\).*/\1/p' | head -n 1)"
    [ -n "$addr" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
        status=0
        wait "$pid" || status=$?
        pid=""
        echo "examples/ci.sh: mnemo exited with $status before announcing its address" >&2
        show_log
        exit 1
    fi
    sleep 0.1
done
if [ -z "$addr" ]; then
    echo "examples/ci.sh: mnemo was silent for ${STARTUP_SECONDS}s" >&2
    show_log
    exit 1
fi

echo "examples/ci.sh: mnemo listening on $addr (pid $pid)"
status=0
"$PYTHON" "$ROOT/examples/agent_loop.py" --addr "$addr" "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "examples/ci.sh: examples/agent_loop.py failed with $status" >&2
    show_log
    exit "$status"
fi

daemon_status=0
stop_daemon || daemon_status=$?
if [ "$daemon_status" -ne 0 ]; then
    echo "examples/ci.sh: mnemo exited with $daemon_status on SIGTERM (expected 0)" >&2
    show_log
    exit 1
fi
echo "examples/ci.sh: ok"
