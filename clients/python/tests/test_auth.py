"""API keys and TLS, end to end against the real `mnemo` daemon.

Each test starts a daemon of its own with a config file: API keys made by
`mnemo key create`, and certificates made with the openssl command (a
private CA, a server certificate for localhost and a client certificate,
all signed by it).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo_client import MnemoClient, MnemoError, PermissionDenied, Turn, Unauthenticated

MakeKey = Callable[[str, str], tuple[str, str]]  # see conftest.make_key

TURNS = [
    {"role": "user", "speaker": "customer:42", "content": "Where is my refund?"},
    {"role": "assistant", "speaker": "agent-a", "content": "It was sent on Monday."},
]
# Well formed, but no daemon was ever told about it.
UNKNOWN_KEY = "mnemo_" + "0" * 64


@dataclasses.dataclass(frozen=True)
class Certificates:
    """PEM files: a private CA, and a server and a client certificate it signed."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests need the openssl command to make their certificates")
    pki = tmp_path_factory.mktemp("pki")
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req", "-x509", *new_key, "-days", "1", "-subj", "/CN=mnemo test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
        "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.pem"),
    )  # fmt: skip
    extensions = {
        "server": "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        "client": "extendedKeyUsage=clientAuth\n",
    }
    for serial, (name, ext) in enumerate(extensions.items(), start=1):
        (pki / f"{name}.ext").write_text(ext)
        _openssl(
            "req", "-new", *new_key, "-subj", f"/CN={name}",
            "-keyout", str(pki / f"{name}.key"), "-out", str(pki / f"{name}.csr"),
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", str(pki / f"{name}.csr"), "-days", "1", "-set_serial", str(serial),
            "-CA", str(pki / "ca.pem"), "-CAkey", str(pki / "ca.key"), "-extfile", str(pki / f"{name}.ext"),
            "-out", str(pki / f"{name}.pem"),
        )  # fmt: skip
    return Certificates(
        ca=pki / "ca.pem",
        server_cert=pki / "server.pem",
        server_key=pki / "server.key",
        client_cert=pki / "client.pem",
        client_key=pki / "client.key",
    )


def _config(path: Path, *sections: str) -> str:
    """Writes a daemon config file of `sections` (TOML) and returns its path."""
    path.write_text("\n".join(sections))
    return str(path)


def _tls(certificates: Certificates, *, mutual: bool = False) -> str:
    """The config's [tls] section; with `mutual`, clients need a certificate the CA signed."""
    files = {"cert": certificates.server_cert, "key": certificates.server_key}
    if mutual:
        files["client_ca"] = certificates.ca
    # A JSON string is a TOML basic string.
    return "[tls]\n" + "".join(f"{name} = {json.dumps(str(p))}\n" for name, p in files.items())


def test_api_keys_are_checked_by_namespace_and_role(
    start_daemon: Callable[..., Any], make_key: MakeKey, tmp_path: Path
) -> None:
    write_key, write_config = make_key("a", "write")
    read_key, read_config = make_key("a", "read")
    daemon = start_daemon("--config", _config(tmp_path / "mnemo.toml", write_config, read_config))

    # No key, or one the daemon does not know: nothing is allowed, reads and watches included.
    for api_key in (None, UNKNOWN_KEY):
        with MnemoClient(daemon.address, api_key=api_key) as stranger:
            with pytest.raises(Unauthenticated) as unauthenticated:
                stranger.create_session("a")
            assert isinstance(unauthenticated.value, MnemoError)
            assert unauthenticated.value.code == "UNAUTHENTICATED" and unauthenticated.value.message
            with pytest.raises(Unauthenticated):
                stranger.get_session("a", "s1")
            with pytest.raises(Unauthenticated), stranger.watch("a", "s1", from_seq=1, timeout=5.0) as events:
                next(events)

    # The health check needs no key.
    with grpc.insecure_channel(daemon.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    with MnemoClient(daemon.address, api_key=write_key) as writer:
        assert writer.create_session("a", "s1").session_id == "s1"
        appended = writer.append_turns("a", "s1", TURNS)
        assert (appended.first_seq, appended.last_seq) == (1, 2)
        assert [t.content for t in writer.list_turns("a", "s1")] == [t["content"] for t in TURNS]
        with pytest.raises(PermissionDenied) as denied:  # another namespace
            writer.create_session("b")
        assert denied.value.code == "PERMISSION_DENIED" and denied.value.message
        with pytest.raises(PermissionDenied):
            writer.get_session("b", "s1")
        with pytest.raises(PermissionDenied):  # deleting a session takes an admin key
            writer.delete_session("a", "s1")

    with MnemoClient(daemon.address, api_key=read_key) as reader:
        assert reader.get_session("a", "s1").turn_count == 2
        assert [t.seq for t in reader.list_turns("a", "s1")] == [1, 2]
        with reader.watch("a", "s1", from_seq=1, timeout=5.0) as events:
            first = next(events)
            assert isinstance(first, Turn) and first.seq == 1
        with pytest.raises(PermissionDenied):
            reader.create_session("a")
        with pytest.raises(PermissionDenied):
            reader.append_turns("a", "s1", TURNS)
        with pytest.raises(PermissionDenied):
            reader.get_session("b", "s1")
        assert reader.get_session("a", "s1").turn_count == 2  # nothing was written


def test_tls_with_a_private_ca(
    start_daemon: Callable[..., Any], certificates: Certificates, tmp_path: Path
) -> None:
    daemon = start_daemon("--config", _config(tmp_path / "mnemo.toml", _tls(certificates)))
    port = daemon.address.rsplit(":", 1)[1]

    with MnemoClient(f"localhost:{port}", tls=True, root_certificates=certificates.ca) as trusting:
        assert trusting.create_session("ns", "s1").session_id == "s1"
        assert trusting.append_turns("ns", "s1", TURNS).last_seq == 2
    # An https:// address, or the CA alone, is enough to mean TLS.
    ca = certificates.ca.read_bytes()
    for address in (f"https://localhost:{port}", f"localhost:{port}"):
        with MnemoClient(address, root_certificates=ca) as trusting:
            assert trusting.get_session("ns", "s1").turn_count == 2

    # Plaintext against the TLS port, and TLS that does not trust the CA, fail at once.
    for tls in (False, True):
        with MnemoClient(f"localhost:{port}", tls=tls, timeout=3.0, retries=0) as wrong:
            started = time.monotonic()
            with pytest.raises(MnemoError) as failed:
                wrong.get_session("ns", "s1")
            assert failed.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"), failed.value
            assert time.monotonic() - started < 5.0


def test_mutual_tls_with_an_api_key(
    start_daemon: Callable[..., Any], certificates: Certificates, make_key: MakeKey, tmp_path: Path
) -> None:
    key, key_config = make_key("*", "write")
    config = _config(tmp_path / "mnemo.toml", _tls(certificates, mutual=True), key_config)
    daemon = start_daemon("--config", config)
    address = f"localhost:{daemon.address.rsplit(':', 1)[1]}"

    def connect(api_key: str | None) -> MnemoClient:
        return MnemoClient(
            address,
            api_key=api_key,
            root_certificates=certificates.ca,
            client_cert=certificates.client_cert,
            client_key=certificates.client_key.read_bytes(),  # a path or the PEM bytes
        )

    with connect(key) as client:
        assert client.create_session("ns", "s1").session_id == "s1"
        assert client.append_turns("ns", "s1", TURNS).last_seq == 2
    # The certificate proves the machine, not the caller: the key is still needed.
    with connect(None) as keyless, pytest.raises(Unauthenticated):
        keyless.get_session("ns", "s1")
    # Without a client certificate the handshake fails.
    with MnemoClient(address, api_key=key, root_certificates=certificates.ca, timeout=3.0, retries=0) as anon:
        with pytest.raises(MnemoError) as failed:
            anon.get_session("ns", "s1")
        assert failed.value.code == "UNAVAILABLE", failed.value

    with pytest.raises(ValueError, match="client_cert and client_key"):
        MnemoClient(address, root_certificates=certificates.ca, client_cert=certificates.client_cert)
