"""End-to-end tests of long-term memory against the real daemon: facts, search,
episodes, and what a subject's next session starts with.

The search index and the episodes are written in the background shortly after
the write that feeds them, so those tests poll with a deadline instead of
sleeping; deletions, on the other hand, must be invisible at once.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

import pytest

from mnemo_client import (
    CarriedAction,
    Episode,
    InvalidArgument,
    MnemoClient,
    NotFound,
    SearchHit,
)

T = TypeVar("T")

SEARCH_SECONDS = 10.0  # the index catches up within about a second
EPISODE_SECONDS = 15.0  # the close's summary, then the episode, are written in the background


def poll(what: str, seconds: float, attempt: Callable[[], T], done: Callable[[T], bool]) -> T:
    """Calls `attempt` until `done` holds of its result; fails with the last result after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        result = attempt()
        if done(result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds}s; last result: {result!r}")
        time.sleep(0.05)


def search_until(
    client: MnemoClient, namespace: str, query: str, done: Callable[[list[SearchHit]], bool], **kwargs: Any
) -> list[SearchHit]:
    return poll(
        f"search {query!r}", SEARCH_SECONDS, lambda: client.search(namespace, query, **kwargs).hits, done
    )


def test_facts_supersede_keep_history_merge_and_delete(client: MnemoClient, namespace: str) -> None:
    first = client.put_fact(namespace, "cust-1", "Prefers Spanish.", key="preferred_language", tags=["lang"])
    assert first.outcome == "created" and first.superseded is None
    f1 = first.fact
    assert (f1.namespace, f1.subject_id, f1.key, f1.text) == (
        namespace,
        "cust-1",
        "preferred_language",
        "Prefers Spanish.",
    )
    assert (f1.origin, f1.tags, f1.sources, f1.supersedes, f1.superseded_by) == (
        "client",
        ["lang"],
        [],
        "",
        "",
    )
    assert f1.create_time is not None and f1.create_time.tzinfo is not None

    # The same key supersedes; the old version stays readable.
    second = client.put_fact(namespace, "cust-1", "Prefers English since May.", key="preferred_language")
    assert second.outcome == "superseded"
    f2 = second.fact
    assert second.superseded is not None
    assert (second.superseded.fact_id, second.superseded.superseded_by) == (f1.fact_id, f2.fact_id)
    assert (f2.supersedes, f2.superseded_by) == (f1.fact_id, "")
    old = client.get_fact(namespace, f1.fact_id)
    assert (old.text, old.superseded_by) == ("Prefers Spanish.", f2.fact_id)
    assert client.get_fact(namespace, f2.fact_id) == f2

    # A repeated put (what a retry after a lost answer sends) merges into the fact it stored.
    again = client.put_fact(namespace, "cust-1", "Prefers English since May.", key="preferred_language")
    assert again.outcome == "merged" and again.fact.fact_id == f2.fact_id and again.superseded is None

    # Unkeyed facts with the same normalized words merge, tags included.
    dogs = client.put_fact(namespace, "cust-1", "Has two dogs, Rex and Bo.", tags=["pets"])
    assert dogs.outcome == "created"
    merged = client.put_fact(namespace, "cust-1", "has two dogs rex and bo", tags=("family",))
    assert merged.outcome == "merged" and merged.fact.fact_id == dogs.fact.fact_id
    assert sorted(merged.fact.tags) == ["family", "pets"]

    current = list(client.list_facts(namespace, subject_id="cust-1"))
    assert [f.fact_id for f in current] == [f2.fact_id, dogs.fact.fact_id]  # oldest first, current only
    history = list(client.list_facts(namespace, subject_id="cust-1", include_history=True, page_size=1))
    assert sorted(f.fact_id for f in history) == sorted([f1.fact_id, f2.fact_id, dogs.fact.fact_id])
    assert [f.text for f in client.list_facts(namespace, tag="family")] == ["Has two dogs, Rex and Bo."]
    assert [f.fact_id for f in client.list_facts(namespace, key="preferred_language")] == [f2.fact_id]
    assert list(client.list_facts(namespace, subject_id="cust-2")) == []
    assert list(client.list_facts(f"{namespace}-other")) == []

    # Deleting the current version leaves the key without a current fact; history stays.
    deleted = client.delete_fact(namespace, f2.fact_id)
    assert deleted.fact_id == f2.fact_id
    with pytest.raises(NotFound):
        client.get_fact(namespace, f2.fact_id)
    with pytest.raises(NotFound):  # why delete_fact is not retried
        client.delete_fact(namespace, f2.fact_id)
    assert [f.key for f in client.list_facts(namespace, subject_id="cust-1")] == [""]
    assert client.get_fact(namespace, f1.fact_id).text == "Prefers Spanish."
    assert (
        client.put_fact(namespace, "cust-1", "Prefers French.", key="preferred_language").outcome == "created"
    )


def test_fact_requests_are_validated(client: MnemoClient, namespace: str) -> None:
    with pytest.raises(InvalidArgument, match="key"):
        client.put_fact(namespace, "cust-1", "x", key="Bad Key")
    with pytest.raises(InvalidArgument):
        client.put_fact(namespace, "cust-1", " ")
    with pytest.raises(InvalidArgument):
        client.put_fact(namespace, "cust-1", "x", tags=["a b"])
    with pytest.raises(NotFound):
        client.put_fact(namespace, "cust-1", "x", source_session_id="no-such-session")
    assert list(client.list_facts(namespace, include_history=True)) == []  # nothing stored

    sid = client.create_session(namespace, subject_id="cust-1").session_id
    client.append_turns(namespace, sid, [{"role": "user", "content": "I have a cat."}])
    with pytest.raises(InvalidArgument):
        client.put_fact(namespace, "cust-1", "Has a cat.", source_session_id=sid, source_seq=2)
    stated = client.put_fact(namespace, "cust-1", "Has a cat.", source_session_id=sid, source_seq=1)
    assert [(s.session_id, s.seq) for s in stated.fact.sources] == [(sid, 1)]

    with pytest.raises(ValueError, match="source_session_id"):  # caught before any call
        client.put_fact(namespace, "cust-1", "x", source_seq=1)
    with pytest.raises(NotFound):
        client.get_fact(namespace, "no-such-fact")


def test_search_finds_turns_and_facts_and_forgets_deletions(client: MnemoClient, namespace: str) -> None:
    sid = client.create_session(namespace, subject_id="cust-9").session_id
    client.append_turns(
        namespace,
        sid,
        [
            {
                "role": "user",
                "speaker": "cust-9",
                "content": "The espresso machine leaks water from the boiler.",
            },
            {"role": "assistant", "speaker": "agent-a", "content": "I will book a technician for Monday."},
        ],
    )
    hits = search_until(client, namespace, "boiler leaking", lambda h: len(h) > 0)
    top = hits[0]
    assert (top.kind, top.session_id, top.seq, top.role, top.subject_id) == ("turn", sid, 1, "user", "cust-9")
    assert "boiler" in top.snippet and top.score > 0

    fact = client.put_fact(namespace, "cust-9", "Warranty runs until March 2027.", key="warranty").fact
    hits = search_until(client, namespace, "warranty", lambda h: any(x.kind == "fact" for x in h))
    assert [(h.kind, h.fact_id) for h in hits] == [("fact", fact.fact_id)]

    # Scope: kinds, subject, session; all fully indexed now.
    result = client.search(namespace, "boiler warranty technician", limit=100)
    assert result.index_lag == 0
    assert {h.kind for h in result.hits} == {"turn", "fact"}
    only_facts = client.search(namespace, "boiler warranty technician", kinds=["fact"]).hits
    assert [h.fact_id for h in only_facts] == [fact.fact_id]
    assert all(h.kind == "turn" for h in client.search(namespace, "boiler warranty", kinds=["turn"]).hits)
    assert client.search(namespace, "boiler warranty", subject_id="cust-other").hits == []
    assert {h.session_id for h in client.search(namespace, "boiler technician", session_id=sid).hits} == {sid}
    assert len(client.search(namespace, "boiler technician", limit=1).hits) == 1

    # Deleted sessions and facts never appear, whatever the index lag.
    client.delete_session(namespace, sid)
    assert [h for h in client.search(namespace, "boiler espresso technician").hits if h.kind != "fact"] == []
    client.delete_fact(namespace, fact.fact_id)
    assert client.search(namespace, "warranty").hits == []


def test_search_requests_are_validated(client: MnemoClient, namespace: str) -> None:
    with pytest.raises(InvalidArgument, match="query"):
        client.search(namespace, " ")
    with pytest.raises(InvalidArgument, match="limit"):
        client.search(namespace, "x", limit=101)
    with pytest.raises(ValueError, match="SearchKind"):  # caught before any call
        client.search(namespace, "x", kinds=["session"])  # type: ignore[list-item]


REPLACEMENT = "I will send the replacement charger by 2026-12-20."

FIRST_VISIT: list[dict[str, Any]] = [
    {
        "role": "user",
        "speaker": "cust-1",
        "content": "Hi, the charger I bought with order ORD-77120 stopped working.",
    },
    {"role": "assistant", "speaker": "agent-a", "content": "Sorry about that. Let me check the order."},
    {"role": "user", "speaker": "cust-1", "content": "My preferred language is Portuguese."},
    {"role": "assistant", "speaker": "agent-a", "content": REPLACEMENT},
    {"role": "user", "speaker": "cust-1", "content": "Thank you."},
]


def test_the_next_session_of_a_subject_starts_with_what_the_first_left(
    client: MnemoClient, namespace: str
) -> None:
    first = client.create_session(namespace, "visit-1", subject_id="cust-1", owner_agent="agent-a")
    assert first.settings.fact_extraction == "enabled"  # the default, filled in
    client.append_turns(namespace, "visit-1", FIRST_VISIT)
    client.close_session(namespace, "visit-1")

    # The close writes a summary, then the episode, in the background.
    episodes = poll(
        "the episode of visit-1",
        EPISODE_SECONDS,
        lambda: list(client.list_episodes(namespace, "cust-1")),
        lambda eps: len(eps) == 1,
    )
    episode = episodes[0]
    assert isinstance(episode, Episode)
    assert (episode.episode_id, episode.session_id, episode.subject_id, episode.ended_as) == (
        "visit-1",
        "visit-1",
        "cust-1",
        "closed",
    )
    assert episode.last_seq == len(FIRST_VISIT) and episode.summary_version >= 1
    assert episode.start_time is not None and episode.end_time is not None
    assert episode.start_time <= episode.end_time
    pending = [a for a in episode.pending_actions if "replacement charger" in a["action"]]
    assert len(pending) == 1, f"the summarizer found no pending replacement in {episode!r}"
    action = pending[0]
    assert (action["deadline"], action["status"], action["evidence_seqs"][0]) == ("2026-12-20", "pending", 4)

    # The stated preference became a fact of the subject, citing its turn.
    facts = list(client.list_facts(namespace, subject_id="cust-1"))
    language = [f for f in facts if "Portuguese" in f.text]
    assert len(language) == 1, facts
    assert language[0].origin == "extracted"
    assert [(s.session_id, s.seq) for s in language[0].sources] == [("visit-1", 3)]

    # The subject's second session starts with the facts, the episode and the open action.
    second = client.create_session(namespace, "visit-2", subject_id="cust-1")
    bundle = client.get_context_bundle(namespace, second.session_id, 4000)
    assert bundle.token_count <= 4000
    assert any("Portuguese" in f.text for f in bundle.facts) or "Portuguese" in bundle.rendered_text
    assert "Portuguese" in bundle.rendered_text
    assert all(f.subject_id == "cust-1" and f.superseded_by == "" for f in bundle.facts)
    assert [e.session_id for e in bundle.episodes] == ["visit-1"]
    assert "visit-1" in bundle.rendered_text
    carried = [c for c in bundle.carried_actions if "replacement charger" in c.action["action"]]
    assert len(carried) == 1, bundle.rendered_text
    assert isinstance(carried[0], CarriedAction)
    assert (carried[0].ref.session_id, carried[0].ref.action_seq) == ("visit-1", action["evidence_seqs"][0])
    assert REPLACEMENT in bundle.rendered_text
    sections = {e.section for e in bundle.manifest.sections}
    assert {"carried_actions", "facts", "episodes"} <= sections

    # Marked done, the action no longer carries over; setting it again changes nothing more.
    ref = carried[0].ref
    done = client.update_pending_action(namespace, ref.session_id, ref.action_seq, "done")
    assert (done["action"], done["status"]) == (REPLACEMENT, "done")
    assert client.update_pending_action(namespace, ref.session_id, ref.action_seq, "done") == done
    after = client.get_context_bundle(namespace, second.session_id, 4000)
    assert not [c for c in after.carried_actions if c.ref == ref], after.rendered_text
    assert [e.session_id for e in after.episodes] == ["visit-1"]
    assert all("replacement charger" not in a["action"] for e in after.episodes for a in e.pending_actions)
    (episode,) = client.list_episodes(namespace, "cust-1")
    assert all("replacement charger" not in a["action"] for a in episode.pending_actions), episode

    with pytest.raises(NotFound):  # no action was raised at turn 1
        client.update_pending_action(namespace, "visit-1", 1, "done")
    with pytest.raises(ValueError, match="ActionStatus"):  # caught before any call
        client.update_pending_action(namespace, "visit-1", ref.action_seq, "finished")  # type: ignore[arg-type]


def test_fact_extraction_can_be_turned_off(client: MnemoClient, namespace: str) -> None:
    quiet = client.create_session(namespace, subject_id="u9", settings={"fact_extraction": "disabled"})
    assert quiet.settings.fact_extraction == "disabled"
    assert client.get_session(namespace, quiet.session_id).settings.fact_extraction == "disabled"
    client.append_turns(
        namespace,
        quiet.session_id,
        [{"role": "user", "content": "My email is u9@example.com. I prefer mornings."}],
    )
    client.summarize(namespace, quiet.session_id)
    assert list(client.list_facts(namespace, subject_id="u9", include_history=True)) == []


def test_a_bundle_recalls_what_an_earlier_session_said(client: MnemoClient, namespace: str) -> None:
    """The answer to the request, said in the subject's earlier session, is in the new session's bundle."""
    client.create_session(namespace, "trip-1", subject_id="traveller-7")
    client.append_turns(
        namespace,
        "trip-1",
        [
            {"role": "user", "speaker": "maria", "content": "Which gate does the Lisbon ferry leave from?"},
            {"role": "assistant", "speaker": "agent", "content": "The Lisbon ferry leaves from gate 14B at 07:45."},
            {"role": "user", "speaker": "maria", "content": "Thanks, that is all for now."},
        ],
    )
    client.create_session(namespace, "trip-2", subject_id="traveller-7")
    client.append_turns(namespace, "trip-2", [{"role": "user", "speaker": "maria", "content": "Hello again."}])

    def ask() -> Any:
        return client.get_context_bundle(namespace, "trip-2", 1000, query="which gate does the Lisbon ferry use?")

    bundle = poll("the earlier answer recalled", SEARCH_SECONDS, ask, lambda b: "gate 14B" in b.rendered_text)
    recalled = [r for r in bundle.recalled if r.session_id == "trip-1"]
    assert recalled, bundle.rendered_text
    turns = [t for r in recalled for t in r.turns]
    assert any("gate 14B" in t.content for t in turns)
    assert all(r.rank >= 1 for r in bundle.recalled)
    assert bundle.token_count <= 1000
    assert bundle.manifest.section("recalled") is not None

    # Asked to leave retrieval out, the bundle holds only the open session.
    plain = client.get_context_bundle(namespace, "trip-2", 1000, query="Lisbon ferry gate", skip_recall=True)
    assert plain.recalled == [] and "gate 14B" not in plain.rendered_text
