"""The client's retry policy, call metadata and TLS, against a scripted in-process server.

The real daemon cannot be made to fail on cue, so a tiny gRPC server that
speaks the same service answers with the status codes each test scripts,
and records what every call carried.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from mnemo_client import DeadlineExceeded, MnemoClient, NotFound, ResourceExhausted, Turn, Unavailable
from mnemo_client._gen import context_pb2, knowledge_pb2, session_pb2, summary_pb2


class ScriptedServer:
    """Serves GetSession, AppendTurns, GetContextBundle, Handoff, WatchSession, PutFact,
    DeleteFact, UpdatePendingAction and Search, failing each call with the next scripted code."""

    def __init__(self, credentials: grpc.ServerCredentials | None = None) -> None:
        self.failures: list[grpc.StatusCode] = []
        self.delay_seconds = 0.0
        self.watch_trailers: tuple[tuple[str, str], ...] = ()
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.requests: list[Any] = []  # what the knowledge handlers received
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "GetSession": grpc.unary_unary_rpc_method_handler(
                self._get_session,
                request_deserializer=session_pb2.GetSessionRequest.FromString,
                response_serializer=session_pb2.GetSessionResponse.SerializeToString,
            ),
            "AppendTurns": grpc.unary_unary_rpc_method_handler(
                self._append_turns,
                request_deserializer=session_pb2.AppendTurnsRequest.FromString,
                response_serializer=session_pb2.AppendTurnsResponse.SerializeToString,
            ),
            "GetContextBundle": grpc.unary_unary_rpc_method_handler(
                self._get_context_bundle,
                request_deserializer=context_pb2.GetContextBundleRequest.FromString,
                response_serializer=context_pb2.GetContextBundleResponse.SerializeToString,
            ),
            "Handoff": grpc.unary_unary_rpc_method_handler(
                self._handoff,
                request_deserializer=context_pb2.HandoffRequest.FromString,
                response_serializer=context_pb2.HandoffResponse.SerializeToString,
            ),
            "WatchSession": grpc.unary_stream_rpc_method_handler(
                self._watch_session,
                request_deserializer=context_pb2.WatchSessionRequest.FromString,
                response_serializer=context_pb2.WatchSessionResponse.SerializeToString,
            ),
            "PutFact": grpc.unary_unary_rpc_method_handler(
                self._put_fact,
                request_deserializer=knowledge_pb2.PutFactRequest.FromString,
                response_serializer=knowledge_pb2.PutFactResponse.SerializeToString,
            ),
            "DeleteFact": grpc.unary_unary_rpc_method_handler(
                self._delete_fact,
                request_deserializer=knowledge_pb2.DeleteFactRequest.FromString,
                response_serializer=knowledge_pb2.DeleteFactResponse.SerializeToString,
            ),
            "UpdatePendingAction": grpc.unary_unary_rpc_method_handler(
                self._update_pending_action,
                request_deserializer=knowledge_pb2.UpdatePendingActionRequest.FromString,
                response_serializer=knowledge_pb2.UpdatePendingActionResponse.SerializeToString,
            ),
            "Search": grpc.unary_unary_rpc_method_handler(
                self._search,
                request_deserializer=knowledge_pb2.SearchRequest.FromString,
                response_serializer=knowledge_pb2.SearchResponse.SerializeToString,
            ),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("mnemo.v1.MemoryService", handlers),)
        )
        if credentials is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.server.start()

    def _answer(self, rpc: str, context: grpc.ServicerContext) -> None:
        self.calls.append((rpc, {k: str(v) for k, v in context.invocation_metadata()}))
        time.sleep(self.delay_seconds)
        if self.failures:
            context.abort(self.failures.pop(0), f"scripted failure of {rpc}")

    def _get_session(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("GetSession", context)
        session = session_pb2.Session(namespace=request.namespace, session_id=request.session_id)
        return session_pb2.GetSessionResponse(session=session)

    def _append_turns(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("AppendTurns", context)
        return session_pb2.AppendTurnsResponse(first_seq=1, last_seq=len(request.turns))

    def _get_context_bundle(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("GetContextBundle", context)
        bundle = context_pb2.ContextBundle(session_id=request.session_id, budget_tokens=request.budget_tokens)
        return context_pb2.GetContextBundleResponse(bundle=bundle)

    def _handoff(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("Handoff", context)
        return context_pb2.HandoffResponse(lease_epoch=request.lease_epoch + 1)

    def _watch_session(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._answer("WatchSession", context)
        turn = session_pb2.Turn(seq=request.from_seq, role=session_pb2.ROLE_USER)
        yield context_pb2.WatchSessionResponse(turn=turn)
        context.set_trailing_metadata(self.watch_trailers)
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "scripted end of the watch")

    def _put_fact(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("PutFact", context)
        self.requests.append(request)
        fact = knowledge_pb2.Fact(namespace=request.namespace, fact_id="f1", text=request.text)
        return knowledge_pb2.PutFactResponse(fact=fact, outcome=knowledge_pb2.PUT_FACT_OUTCOME_CREATED)

    def _delete_fact(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("DeleteFact", context)
        return knowledge_pb2.DeleteFactResponse(fact=knowledge_pb2.Fact(fact_id=request.fact_id))

    def _update_pending_action(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("UpdatePendingAction", context)
        self.requests.append(request)
        action = summary_pb2.PendingAction(action="ship it", status=request.status)
        return knowledge_pb2.UpdatePendingActionResponse(action=action)

    def _search(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._answer("Search", context)
        self.requests.append(request)
        hit = knowledge_pb2.SearchHit(kind=knowledge_pb2.SEARCH_KIND_FACT, fact_id="f1", score=1.5)
        return knowledge_pb2.SearchResponse(hits=[hit], index_lag=2)


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.server.stop(grace=None)


@pytest.fixture
def client(scripted: ScriptedServer) -> Iterator[MnemoClient]:
    with MnemoClient(f"127.0.0.1:{scripted.port}", api_key="k-123", timeout=2.0, retries=2) as c:
        yield c


TURN = [{"role": "user", "content": "hello"}]


def test_reads_are_retried_on_unavailable(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    assert client.get_session("ns", "s").session_id == "s"
    assert len(scripted.calls) == 3


def test_retries_are_bounded(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE] * 5
    with pytest.raises(Unavailable, match="scripted failure"):
        client.get_session("ns", "s")
    assert len(scripted.calls) == 3  # one try and retries=2


def test_other_codes_are_not_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.NOT_FOUND]
    with pytest.raises(NotFound):
        client.get_session("ns", "s")
    assert len(scripted.calls) == 1


def test_appends_without_a_key_are_not_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    with pytest.raises(Unavailable):
        client.append_turns("ns", "s", TURN)
    assert len(scripted.calls) == 1


def test_appends_with_a_key_are_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED]
    assert client.append_turns("ns", "s", TURN, idempotency_key="k1").last_seq == 1
    assert len(scripted.calls) == 3


def test_context_bundles_are_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    assert client.get_context_bundle("ns", "s", 1000).budget_tokens == 1000
    assert len(scripted.calls) == 2


def test_handoffs_are_not_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    # A repeat would fail on the lease epoch the lost first attempt moved.
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    with pytest.raises(Unavailable):
        client.handoff("ns", "s", "agent-a", "agent-b", 1)
    assert len(scripted.calls) == 1
    assert client.handoff("ns", "s", "agent-a", "agent-b", 1).lease_epoch == 2


def test_handoffs_with_a_key_are_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    # With an idempotency key the daemon answers a repeat with the first outcome.
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    assert client.handoff("ns", "s", "agent-a", "agent-b", 1, idempotency_key="h-1").lease_epoch == 2
    assert len(scripted.calls) == 2


def test_fact_puts_are_retried_and_sent_whole(scripted: ScriptedServer, client: MnemoClient) -> None:
    # A repeat of a put that was stored merges into it instead of writing twice.
    scripted.failures = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED]
    result = client.put_fact(
        "ns", "u1", "Prefers tea.", key="drink", source_session_id="s", source_seq=3, tags="vip"
    )
    assert (result.fact.fact_id, result.outcome, result.superseded) == ("f1", "created", None)
    assert len(scripted.calls) == 3
    sent = scripted.requests[-1]
    assert (sent.subject_id, sent.key, sent.text, list(sent.tags)) == ("u1", "drink", "Prefers tea.", ["vip"])
    assert (sent.source.session_id, sent.source.seq) == ("s", 3)
    client.put_fact("ns", "u1", "No source.")
    assert not scripted.requests[-1].HasField("source")


def test_fact_deletions_are_not_retried(scripted: ScriptedServer, client: MnemoClient) -> None:
    # A repeat of a deletion that happened would get NOT_FOUND.
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    with pytest.raises(Unavailable):
        client.delete_fact("ns", "f1")
    assert len(scripted.calls) == 1


def test_pending_action_updates_and_searches_are_retried(
    scripted: ScriptedServer, client: MnemoClient
) -> None:
    scripted.failures = [grpc.StatusCode.UNAVAILABLE]
    assert client.update_pending_action("ns", "s", 4, "in_progress")["status"] == "in_progress"
    sent = scripted.requests[-1]
    assert (sent.ref.session_id, sent.ref.action_seq) == ("s", 4)
    assert len(scripted.calls) == 2

    scripted.failures = [grpc.StatusCode.UNAVAILABLE]  # also what a rebuilding index answers
    result = client.search("ns", "tea", kinds=["fact", "episode"], limit=5, subject_id="u1")
    assert (result.index_lag, [(h.kind, h.fact_id) for h in result.hits]) == (2, [("fact", "f1")])
    sent = scripted.requests[-1]
    assert list(sent.kinds) == [knowledge_pb2.SEARCH_KIND_FACT, knowledge_pb2.SEARCH_KIND_EPISODE]
    assert (sent.query, sent.limit, sent.subject_id) == ("tea", 5, "u1")
    assert len(scripted.calls) == 4


@pytest.mark.parametrize(
    ("trailers", "resume_from_seq"),
    [
        ((("mnemo-resume-from-seq", "42"),), 42),  # the watcher fell behind
        ((), None),  # e.g. too many open watches: nothing to resume
        ((("mnemo-resume-from-seq", "soon"),), None),  # malformed: the error still surfaces
    ],
)
def test_watch_errors_carry_the_resume_seq(
    scripted: ScriptedServer, client: MnemoClient, trailers: Any, resume_from_seq: int | None
) -> None:
    scripted.watch_trailers = trailers
    with client.watch("ns", "s", from_seq=7) as events:
        assert next(events) == Turn(seq=7, role="user")
        with pytest.raises(ResourceExhausted, match="scripted end") as ended:
            next(events)
    assert ended.value.resume_from_seq == resume_from_seq
    assert events.next_seq == 8


def test_every_attempt_has_a_deadline(scripted: ScriptedServer) -> None:
    scripted.delay_seconds = 1.0
    with MnemoClient(f"127.0.0.1:{scripted.port}", timeout=0.2, retries=1) as c:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            c.get_session("ns", "s")
        assert time.monotonic() - started < 1.5
    assert len(scripted.calls) == 2


def test_api_key_is_sent_as_bearer_token(scripted: ScriptedServer, client: MnemoClient) -> None:
    client.get_session("ns", "s")
    client.append_turns("ns", "s", TURN)
    assert [meta.get("authorization") for _, meta in scripted.calls] == ["Bearer k-123"] * 2


def test_no_authorization_header_without_a_key(scripted: ScriptedServer) -> None:
    with MnemoClient(f"127.0.0.1:{scripted.port}") as c:
        c.get_session("ns", "s")
    assert "authorization" not in scripted.calls[0][1]


def test_tls_with_a_private_root_certificate(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server = ScriptedServer(grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())]))
    try:
        with MnemoClient(f"localhost:{server.port}", tls=True, root_certificates=cert) as c:
            assert c.get_session("ns", "s").session_id == "s"
        with MnemoClient(f"https://localhost:{server.port}", root_certificates=cert.read_bytes()) as c:
            assert c.get_session("ns", "s").session_id == "s"
        # Without the private root the server is not trusted.
        with MnemoClient(f"localhost:{server.port}", tls=True, timeout=2.0, retries=0) as c:
            with pytest.raises(Unavailable):
                c.get_session("ns", "s")
    finally:
        server.server.stop(grace=None)
