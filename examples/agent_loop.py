#!/usr/bin/env python3
"""An agent loop that keeps its memory in mnemo: a scripted walk-through.

Two support agents serve one customer. agent-a owns the session, appends
every turn with its lease epoch and counts the tokens mnemo reports for
them against the small context window it pretends to have; when the window
is 80% full it replaces its context with a mnemo context bundle. It then
hands the session to agent-b, which continues from the handoff bundle alone,
and agent-a's late append is fenced off.

Nothing here calls a model or any network besides the daemon: the customer's
messages, the agents' replies and the tool results are a fixed script, so a
run is a check of mnemo's contract. Exits 1 when an expectation fails.

    python examples/agent_loop.py --addr 127.0.0.1:50051
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mnemo_client import AppendResult, ContextBundle, FailedPrecondition, MnemoClient, MnemoError

# The context window the agents pretend their model has, and the share of it
# after which an agent swaps its context for a bundle.
WINDOW_TOKENS = 600
RESET_AT = 0.8
# Bundles are asked for half the window, so an agent has room to keep
# talking after it loads one (mnemo's smallest budget is 256).
BUNDLE_BUDGET = WINDOW_TOKENS // 2

CUSTOMER = "customer:4711"
ORDER_ID = "ORD-7731"
AMOUNT = "$84.50"

Turn = Mapping[str, Any]


class ExpectationFailed(Exception):
    """mnemo did not do what the walk-through relies on."""


def expect(condition: object, what: str) -> None:
    # Not `assert`: `python -O` would skip the checks this script exists for.
    if not condition:
        raise ExpectationFailed(what)


def customer(text: str) -> Turn:
    return {"role": "user", "speaker": CUSTOMER, "content": text}


def reply(agent: str, text: str, **extra: Any) -> Turn:
    return {"role": "assistant", "speaker": agent, "content": text, **extra}


def tool_call(agent: str, text: str, name: str, arguments: dict[str, Any], result: Any) -> Turn:
    call = {
        "tool_name": name,
        "arguments_json": json.dumps(arguments),
        "result": json.dumps(result),
        "status": "success",
    }
    return reply(agent, text, tool_call=call)


# agent-a's part of the conversation: one exchange per append. The chores
# it finishes come before the refund it promises, and nothing agent-a says
# afterwards reports work done. mnemo's summarizer would otherwise mark the
# refund done: a completion statement that matches no open action ("Sent:
# the gift receipt...") closes the speaker's latest open action, and a
# successful changing tool call closes every open action naming an object
# of its arguments (send_gift_receipt with the same order id).
SCRIPT_A: list[list[Turn]] = [
    [
        customer(
            "Hi, I moved last month. Please change the shipping address for my future orders "
            "to 12 Elm Street, Springfield."
        ),
        tool_call(
            "agent-a",
            "Updating your address.",
            "update_address",
            {"customer_id": CUSTOMER, "address": "12 Elm Street, Springfield"},
            {"ok": True},
        ),
        reply("agent-a", "Done: future orders will ship to 12 Elm Street, Springfield."),
    ],
    [
        customer(
            "Thanks. My last parcel also came without the gift receipt I asked for. Could you "
            "email one to jane.doe@example.com? The mugs are a present for my sister."
        ),
        tool_call(
            "agent-a",
            "Sending the gift receipt.",
            "send_gift_receipt",
            {"customer_id": CUSTOMER, "email": "jane.doe@example.com"},
            {"sent": True, "message_id": "msg_3381"},
        ),
        reply("agent-a", "Sent: the gift receipt is on its way to jane.doe@example.com."),
    ],
    [
        customer(
            f"One more thing, and it's the big one: I was charged twice for that order, "
            f"{ORDER_ID}. My bank statement shows two charges of {AMOUNT} from your shop on "
            f"the same day, and I only placed one order."
        ),
        tool_call(
            "agent-a",
            f"Looking up {ORDER_ID}.",
            "lookup_order",
            {"order_id": ORDER_ID},
            {
                "order_id": ORDER_ID,
                "status": "delivered",
                "placed": "2026-11-28",
                "items": [
                    {"sku": "MUG-0042", "name": "Stoneware mug, blue", "qty": 2, "price": "$24.00"},
                    {"sku": "TEA-0107", "name": "Sencha green tea, 250 g", "qty": 1, "price": "$36.50"},
                ],
                "charges": [
                    {"charge_id": "ch_9f2a", "amount": AMOUNT, "card": "visa-4242"},
                    {"charge_id": "ch_9f2b", "amount": AMOUNT, "card": "visa-4242"},
                ],
            },
        ),
        reply(
            "agent-a",
            f"I can confirm it: charge ch_9f2b of {AMOUNT} on {ORDER_ID} duplicates charge ch_9f2a. "
            f"I'll refund the duplicate {AMOUNT} charge on {ORDER_ID} once billing approves it.",
            # Tells mnemo's summarizer that this turn is a pending action,
            # instead of leaving it to its heuristics.
            metadata={"mnemo.annotation": "pending_action"},
        ),
    ],
    [
        customer("Thank you. How long does a refund usually take to show up on my card?"),
        reply(
            "agent-a",
            "Once it is approved, a refund usually shows up within 5 to 7 business days, "
            "depending on your bank.",
        ),
    ],
    [
        customer("Should I also file a dispute with my bank about the double charge, just in case?"),
        reply(
            "agent-a",
            "Please don't: a dispute can freeze the charge while the bank investigates, which "
            "would only delay your refund.",
        ),
    ],
    [
        customer("Good to know. Will the refund go back to the same Visa card ending in 4242?"),
        reply(
            "agent-a",
            "Yes, refunds always go back to the card that was charged, here the one ending in 4242.",
        ),
    ],
    [
        customer("Can you tell me when billing will approve it? I would like this sorted out today."),
        reply(
            "agent-a",
            "Approving refunds is up to our billing team, so I'm handing your case to a billing "
            "specialist who can approve it right away.",
        ),
    ],
]

# agent-b's part, after the handoff.
SCRIPT_B: list[list[Turn]] = [
    [
        reply(
            "agent-b",
            f"Hello, this is the billing team. I have approved the refund of the duplicate "
            f"{AMOUNT} charge on {ORDER_ID}.",
        ),
        tool_call(
            "agent-b",
            f"Refunding charge ch_9f2b on {ORDER_ID}.",
            "issue_refund",
            {"order_id": ORDER_ID, "charge_id": "ch_9f2b", "amount": AMOUNT},
            {"refund_id": "re_55c1", "status": "issued"},
        ),
    ],
    [
        customer("Perfect, thank you both!"),
        reply("agent-b", "You're welcome. The refund re_55c1 is on its way to your card."),
    ],
]


class Agent:
    """One agent: what it is allowed to append with, and what is in its context.

    The context is what the agent would send its model: the turns it saw
    since its last reset, or the bundle it reset to, plus the turns after.
    Its size is the sum of the token counts mnemo returned for those turns
    (plus the bundle's own count), never a local estimate.
    """

    def __init__(self, mnemo: MnemoClient, namespace: str, session_id: str, name: str, epoch: int) -> None:
        self.mnemo = mnemo
        self.namespace = namespace
        self.session_id = session_id
        self.name = name
        self.epoch = epoch
        self.context: list[str] = []
        self.used = 0
        self.resets = 0

    def say(self, turns: Sequence[Turn], key: str) -> AppendResult:
        """Appends one exchange, fenced by this agent's epoch, and adds it to the context."""
        result = self.mnemo.append_turns(
            self.namespace, self.session_id, turns, lease_epoch=self.epoch, idempotency_key=key
        )
        expect(
            len(result.token_counts) == len(turns) and all(n > 0 for n in result.token_counts),
            f"append {key}: one positive token count per turn, got {result.token_counts}",
        )
        expect(
            result.last_seq - result.first_seq + 1 == len(turns),
            f"append {key}: seqs {result.first_seq}..{result.last_seq} for {len(turns)} turns",
        )
        added = sum(result.token_counts)
        self.context.extend(t["content"] for t in turns)
        self.used += added
        first = turns[0]
        who = "customer" if first["role"] == "user" else first["speaker"]
        seqs = f"{result.first_seq}-{result.last_seq}" if len(turns) > 1 else f"{result.first_seq}"
        print(
            f"[{self.name}] seq {seqs:<5} +{added:>3} tokens, "
            f"context {self.used:>3}/{WINDOW_TOKENS} ({self.used * 100 // WINDOW_TOKENS:>2}%)  "
            f"{who}: {_clip(first['content'], 48)}"
        )
        if self.used > RESET_AT * WINDOW_TOKENS:
            self.reset(query=turns[-1]["content"])
        return result

    def reset(self, query: str) -> None:
        """Replaces the context with a bundle of at most BUNDLE_BUDGET tokens."""
        before = self.used
        # A bundle carries summary items (pending actions, facts...) only for
        # turns a summary covers, and the background summarizer may not have
        # caught up with the last appends: fold them first, so the reset
        # does not depend on timing.
        summary = self.mnemo.summarize(self.namespace, self.session_id, wait=True)
        expect(summary is not None, "summarize(wait=True) returned a summary")
        bundle = self.mnemo.get_context_bundle(
            self.namespace, self.session_id, BUNDLE_BUDGET, agent_id=self.name, query=query
        )
        expect(
            0 < bundle.token_count <= BUNDLE_BUDGET,
            f"bundle of {bundle.token_count} tokens within its {BUNDLE_BUDGET}-token budget",
        )
        self.load(bundle)
        self.resets += 1
        print(
            f"[{self.name}] context passed {RESET_AT:.0%} of the window ({before}/{WINDOW_TOKENS}): "
            f"summarized, reset to a bundle of {bundle.token_count} tokens ({describe(bundle)})"
        )

    def load(self, bundle: ContextBundle) -> None:
        self.context = [bundle.rendered_text]
        self.used = bundle.token_count


def describe(bundle: ContextBundle) -> str:
    recent = bundle.manifest.section("recent_turns")
    earlier = bundle.manifest.section("earlier_turns")
    parts = [
        f"summary v{bundle.manifest.summary_version} through seq "
        f"{bundle.manifest.summarized.last_seq if bundle.manifest.summarized else 0}",
        f"{len(bundle.pending_actions)} pending action(s)",
        f"{len(bundle.key_facts)} key fact(s)",
        f"{recent.included if recent else 0} recent turn(s) verbatim",
    ]
    if earlier:
        parts.append(f"{earlier.included + earlier.shortened} earlier turn(s) shortened")
    left_out = sum(e.omitted for e in (recent, earlier) if e)
    if left_out:
        parts.append(f"{left_out} turn(s) left out")
    return ", ".join(parts)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def run(mnemo: MnemoClient, namespace: str, show_bundle: bool) -> None:
    # 1. agent-a opens the session and owns it at epoch 1.
    session = mnemo.create_session(
        namespace,
        subject_id=CUSTOMER,
        title=f"Double charge on {ORDER_ID}",
        owner_agent="agent-a",
        settings={"context_limit_tokens": WINDOW_TOKENS},
    )
    expect(session.owner_agent == "agent-a", f"new session owned by agent-a, not {session.owner_agent!r}")
    expect(session.lease_epoch == 1, f"new session at epoch 1, not {session.lease_epoch}")
    sid = session.session_id
    print(f"[agent-a] opened session {sid} in {namespace!r} (owner agent-a, epoch {session.lease_epoch})")

    # 2-3. agent-a plays its part, resetting its context when it fills up.
    a = Agent(mnemo, namespace, sid, "agent-a", session.lease_epoch)
    for i, exchange in enumerate(SCRIPT_A):
        a.say(exchange, key=f"{sid}-a-{i}")
    expect(a.resets >= 1, f"agent-a reset its context at least once (window {WINDOW_TOKENS} tokens)")
    expect(a.used <= WINDOW_TOKENS, f"agent-a's context {a.used} fits its {WINDOW_TOKENS}-token window")

    # 4. agent-a hands off; agent-b knows nothing but the bundle it gets back.
    handed = mnemo.handoff(
        namespace,
        sid,
        "agent-a",
        "agent-b",
        a.epoch,
        reason="refund needs billing approval",
        budget_tokens=BUNDLE_BUDGET,
    )
    expect(
        handed.lease_epoch == a.epoch + 1,
        f"the handoff moved the epoch to {a.epoch + 1}, not {handed.lease_epoch}",
    )
    expect(
        handed.session.owner_agent == "agent-b",
        f"agent-b owns the session, not {handed.session.owner_agent!r}",
    )
    expect(handed.summary is not None, "the handoff wrote a summary (see GetAuditLog if not)")
    bundle = handed.bundle
    print(
        f"[agent-b] took over at epoch {handed.lease_epoch} (handoff event seq {handed.event_seq}); "
        f"starts from a bundle of {bundle.token_count} tokens ({describe(bundle)})"
    )
    if show_bundle:
        print("\n".join("    | " + line for line in bundle.rendered_text.splitlines()))
    expect(
        bundle.owner_agent == "agent-b" and bundle.lease_epoch == handed.lease_epoch,
        "the handoff bundle names agent-b and the new epoch",
    )
    expect(
        ORDER_ID in bundle.rendered_text and AMOUNT in bundle.rendered_text,
        f"the handoff bundle's text mentions {ORDER_ID} and {AMOUNT}",
    )
    pending = [p for p in bundle.pending_actions if ORDER_ID in p.get("action", "")]
    expect(pending, f"the handoff bundle lists the pending refund on {ORDER_ID}: {bundle.pending_actions}")
    expect(AMOUNT in pending[0]["action"], f"the pending refund names {AMOUNT}: {pending[0]}")
    print(f"[agent-b] pending from the bundle: {pending[0]['action']} (owner {pending[0].get('owner', '?')})")

    b = Agent(mnemo, namespace, sid, "agent-b", handed.lease_epoch)
    b.load(bundle)
    for i, exchange in enumerate(SCRIPT_B):
        b.say(exchange, key=f"{sid}-b-{i}")

    # 5. agent-a, unaware, tries to append with its old epoch: fenced off.
    before = mnemo.get_session(namespace, sid)
    late = [reply("agent-a", f"One more thing about {ORDER_ID}...")]
    try:
        mnemo.append_turns(namespace, sid, late, lease_epoch=a.epoch)
    except FailedPrecondition as e:
        expect("agent-b" in e.message, f"the rejection names the current owner agent-b: {e.message!r}")
        print(f"[agent-a] late append at epoch {a.epoch} rejected: {e}")
    else:
        raise ExpectationFailed(f"agent-a's append at stale epoch {a.epoch} was accepted")
    after = mnemo.get_session(namespace, sid)
    expect(
        (after.next_seq, after.turn_count) == (before.next_seq, before.turn_count),
        "the rejected append stored nothing",
    )
    print(
        f"done: {after.turn_count} turns, owner {after.owner_agent} at epoch {after.lease_epoch}, "
        f"{after.total_tokens} tokens stored"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Plays a scripted two-agent support conversation against a mnemo daemon "
        "and checks what mnemo answers; exits 1 when an expectation fails."
    )
    parser.add_argument("--addr", default="127.0.0.1:50051", help="the daemon's host:port")
    parser.add_argument(
        "--namespace",
        default=None,
        help="namespace to create the session in (default: a new examples-<random> one)",
    )
    parser.add_argument("--show-bundle", action="store_true", help="print agent-b's bundle text")
    args = parser.parse_args(argv)
    namespace = args.namespace or f"examples-{uuid.uuid4().hex[:8]}"
    try:
        with MnemoClient(args.addr) as mnemo:
            run(mnemo, namespace, args.show_bundle)
    except ExpectationFailed as e:
        print(f"FAILED: expected {e}", file=sys.stderr)
        return 1
    except MnemoError as e:
        print(f"FAILED: mnemo at {args.addr}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
