"""The installed wheel as a user meets it (run by packaging/ci.sh).

`mnemo` must come from the fresh virtual environment (MNEMO_EXPECT_VENV),
with no cargo or rustc on PATH. Checks, in order:

1. `mnemo --version` prints the wheel's version (one source: Cargo.toml).
2. `mnemo serve` on a free port with a temp data directory answers gRPC
   health (SERVING), and stops cleanly on SIGTERM.
3. `mnemo mcp --embedded --namespace ci --data-dir DIR` through the official
   `mcp` client over stdio: the nine tools are listed, `remember` writes,
   `get_context` and `search_memory` read it back.

Prints the figures (seconds to health, tools listed); exits non-zero on
any failure. Usage: smoke.py WORK_DIR
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TOOLS = {
    "get_context",
    "remember",
    "search_memory",
    "put_fact",
    "list_facts",
    "list_pending_actions",
    "update_pending_action",
    "handoff",
    "list_sessions",
}
STARTUP_SECONDS = 60


def say(line: str) -> None:
    print(f"packaging/smoke.py: {line}", file=sys.stderr, flush=True)


def the_binary() -> str:
    found = shutil.which("mnemo")
    venv = Path(os.environ["MNEMO_EXPECT_VENV"]).resolve()
    assert found, f"mnemo is not on PATH ({os.environ['PATH']})"
    assert Path(found).resolve().parent == venv / "bin", f"mnemo comes from {found}, not {venv}/bin"
    for tool in ("cargo", "rustc"):
        assert shutil.which(tool) is None, f"{tool} is reachable: {shutil.which(tool)}"
    return found


def check_version(mnemo: str) -> None:
    wheel = Path(os.environ["MNEMO_WHEEL"]).name
    # mnemo_daemon-0.1.0-py3-none-manylinux_2_28_x86_64.whl
    name, version, _python, _abi, platform = wheel[: -len(".whl")].split("-")
    assert name == "mnemo_daemon", wheel
    assert platform.startswith("manylinux_"), f"not a manylinux wheel: {wheel}"
    out = subprocess.run([mnemo, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"mnemo {version}", f"mnemo --version said {out!r}; the wheel is {version}"
    say(f"{out} from {wheel}")


def check_serve(mnemo: str, work: Path) -> float:
    """Starts the daemon, waits for SERVING, stops it; seconds to health."""
    log = (work / "serve.log").open("w+")
    started = time.monotonic()
    daemon = subprocess.Popen(
        [mnemo, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(work / "serve-data")],
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    try:
        address = None
        while address is None:
            assert daemon.poll() is None, f"mnemo serve exited: {(work / 'serve.log').read_text()}"
            assert time.monotonic() - started < STARTUP_SECONDS, "mnemo serve did not listen in time"
            match = re.search(r"mnemo listening on (\S+)", (work / "serve.log").read_text())
            if match:
                address = match.group(1)
            else:
                time.sleep(0.05)
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    status = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status
                    if status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
                assert time.monotonic() - started < STARTUP_SECONDS, "no SERVING in time"
                time.sleep(0.05)
        to_health = time.monotonic() - started
        say(f"mnemo serve on {address}: SERVING {to_health:.2f} s after start")
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            code = daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            raise
    assert code == 0, f"mnemo serve exited with {code}: {(work / 'serve.log').read_text()}"
    return to_health


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def check_mcp(mnemo: str, work: Path) -> int:
    params = StdioServerParameters(
        command="mnemo",
        args=["mcp", "--embedded", "--namespace", "ci", "--data-dir", str(work / "mcp-data")],
        env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]},
    )
    started = time.monotonic()
    async with stdio_client(params) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            listed = {t.name for t in (await session.list_tools()).tools}
            assert listed == TOOLS, f"tools listed: {sorted(listed)}"
            say(f"mnemo mcp --embedded: {len(listed)} tools listed {time.monotonic() - started:.2f} s after start")
            kept = await session.call_tool(
                "remember",
                {
                    "session_id": "ci-1",
                    "subject_id": "user-7",
                    "turns": [
                        {"role": "user", "speaker": "user-7", "content": "My locker code is 4417, building C."},
                        {"role": "assistant", "content": "Noted: locker 4417 in building C."},
                    ],
                },
            )
            assert not kept.is_error, text_of(kept)
            context = await session.call_tool("get_context", {"session_id": "ci-1"})
            assert not context.is_error and "4417" in text_of(context), text_of(context)
            found = await session.call_tool("search_memory", {"query": "locker code"})
            assert not found.is_error and "ci-1" in text_of(found), text_of(found)
            say("remember, get_context and search_memory round trip: ok")
    return len(listed)


def main() -> None:
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    Path(os.environ["HOME"]).mkdir(parents=True, exist_ok=True)
    mnemo = the_binary()
    check_version(mnemo)
    check_serve(mnemo, work)
    asyncio.run(check_mcp(mnemo, work))
    say("ok")


if __name__ == "__main__":
    main()
