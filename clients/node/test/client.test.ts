// End-to-end tests of MnemoClient against the real `mnemo` daemon.
//
// They drive what the daemon offers today: sessions, appends with a tool call,
// pagination, idempotent retries, optimistic concurrency, summaries with their
// audit log and review queue, context bundles, handoff, watching, health, and
// the mapping of status codes to MnemoError. Each test works in a namespace of
// its own.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { MnemoClient, MnemoError, anthropicSystem, bundleParts, systemMessage, type NewTurn, type SessionSummary, type WatchEvent } from '../src';
import { Daemon } from './daemon';

let daemon: Daemon;
let client: MnemoClient;

before(async () => {
  daemon = await Daemon.start();
  client = new MnemoClient(daemon.address, { timeoutMs: 10_000 });
});

after(async () => {
  client?.close();
  if (daemon !== undefined) {
    const code = await daemon.stop();
    assert.equal(code, 0, `mnemo did not exit cleanly on SIGTERM:\n${daemon.log.slice(-20).join('\n')}`);
  }
});

/** A namespace of its own for each test, so tests cannot see each other's sessions. */
function freshNamespace(): string {
  return `node-${randomUUID().slice(0, 12)}`;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Asserts that `promise` rejects with a MnemoError of `code` and returns it. */
async function rejectsWith(promise: Promise<unknown>, code: string): Promise<MnemoError> {
  let caught: unknown;
  await assert.rejects(promise, (e: unknown) => {
    caught = e;
    return e instanceof MnemoError && e.code === code;
  });
  return caught as MnemoError;
}

// The arguments exactly as the agent sent them: odd spacing, key order and
// non-ASCII must all survive the round trip byte for byte.
const LOOKUP_ARGS = '{"order_id": "ORD-9921",  "include":["payments"], "note":"naïve café"}';
const LOOKUP_RESULT = '{"order_id": "ORD-9921", "charges": [49.99, 49.99]}';
const CLIENT_TIME = new Date('2026-12-01T09:30:00.123Z');

const SUPPORT_TURNS: NewTurn[] = [
  {
    role: 'USER',
    speaker: 'customer:42',
    content: 'I was charged twice for ORD-9921 ($49.99). Please refund the duplicate charge.',
    clientTime: CLIENT_TIME,
    metadata: { channel: 'chat' },
  },
  { role: 'ASSISTANT', speaker: 'agent-a', content: "I'll check the payment log." },
  {
    role: 'ASSISTANT',
    speaker: 'agent-a',
    content: 'Looking up the order.',
    toolCall: { toolName: 'lookup_order', argumentsJson: LOOKUP_ARGS, result: LOOKUP_RESULT, status: 'SUCCESS' },
  },
  { role: 'ASSISTANT', speaker: 'agent-a', content: 'Confirmed: ORD-9921 was charged twice. I will refund $49.99 by 2026-12-05.' },
  { role: 'USER', speaker: 'customer:42', content: 'Will I get an email confirmation?' },
];

test('health check reports SERVING for the daemon and for MemoryService', async () => {
  assert.equal(await client.health(), 'SERVING');
  assert.equal(await client.health('mnemo.v1.MemoryService'), 'SERVING');
  await rejectsWith(client.health('no.such.Service'), 'NOT_FOUND');
});

test('session lifecycle: create, get, list with pages and filters, close, delete', async () => {
  const ns = freshNamespace();
  const created = await client.createSession(ns, {
    subjectId: 'customer:42',
    title: 'Double charge',
    metadata: { ticket: 'T-1' },
    settings: { summaryEveryTurns: 50, encoding: 'O200K_BASE' },
  });
  assert.match(created.sessionId, /^[0-9A-Z]{26}$/); // a server-generated ULID
  assert.deepEqual([created.namespace, created.subjectId, created.title], [ns, 'customer:42', 'Double charge']);
  assert.deepEqual(created.metadata, { ticket: 'T-1' });
  assert.equal(created.state, 'ACTIVE');
  assert.deepEqual([created.turnCount, created.nextSeq, created.totalTokens], [0, 1, 0]);
  assert.equal(created.settings.summaryEveryTurns, 50);
  assert.equal(created.settings.encoding, 'O200K_BASE');
  assert.equal(created.settings.contextLimitTokens, 128000); // default filled in
  assert.equal(created.settings.riskLevel, 'NORMAL');
  assert.ok(created.createTime instanceof Date && Math.abs(created.createTime.getTime() - Date.now()) < 60_000);

  assert.deepEqual(await client.getSession(ns, created.sessionId), created);

  for (const id of ['s-0', 's-1', 's-2']) await client.createSession(ns, { sessionId: id, subjectId: 'customer:7' });
  // pageSize 1 makes the iterator follow nextPageToken across pages.
  const listed = (await collect(client.iterSessions(ns, { pageSize: 1 }))).map((s) => s.sessionId);
  assert.deepEqual(listed.sort(), [created.sessionId, 's-0', 's-1', 's-2'].sort());
  const first = await client.listSessions(ns, { pageSize: 2 });
  assert.ok(first.items.length <= 2 && first.nextPageToken !== '');
  const rest = await collect(client.iterSessions(ns, { pageSize: 2 }));
  assert.equal(rest.length, 4);
  const bySubject = (await collect(client.iterSessions(ns, { subjectId: 'customer:7' }))).map((s) => s.sessionId);
  assert.deepEqual(bySubject, ['s-0', 's-1', 's-2']);

  const closed = await client.closeSession(ns, 's-1');
  assert.equal(closed.state, 'CLOSED');
  assert.equal((await client.closeSession(ns, 's-1')).state, 'CLOSED'); // a no-op the second time
  const closedIds = (await collect(client.iterSessions(ns, { state: 'CLOSED' }))).map((s) => s.sessionId);
  assert.deepEqual(closedIds, ['s-1']);
  const error = await rejectsWith(client.appendTurns(ns, 's-1', [{ role: 'USER', content: 'too late' }]), 'FAILED_PRECONDITION');
  assert.match(error.details, /closed/i);
  assert.equal(error.reason, 'SESSION_CLOSED');
  assert.equal((await client.getSession(ns, 's-1')).turnCount, 0); // nothing written

  await client.appendTurns(ns, 's-2', [
    { role: 'USER', content: 'a' },
    { role: 'USER', content: 'b' },
  ]);
  assert.equal(await client.deleteSession(ns, 's-2'), 2);
  await rejectsWith(client.getSession(ns, 's-2'), 'NOT_FOUND');
  await rejectsWith(client.deleteSession(ns, 's-2'), 'NOT_FOUND');
});

test('appended turns, with a tool call, list back exactly and page by page', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  const result = await client.appendTurns(ns, sessionId, SUPPORT_TURNS);
  assert.deepEqual([result.firstSeq, result.lastSeq, result.replayed], [1, SUPPORT_TURNS.length, false]);
  assert.equal(result.tokenCounts.length, SUPPORT_TURNS.length);
  assert.ok(result.tokenCounts.every((n) => n > 0));
  assert.equal(result.totalTokens, result.tokenCounts.reduce((a, b) => a + b, 0));

  const turns = await collect(client.iterTurns(ns, sessionId, { pageSize: 2 })); // three pages
  assert.deepEqual(turns.map((t) => t.seq), [1, 2, 3, 4, 5]);
  turns.forEach((stored, i) => {
    const sent = SUPPORT_TURNS[i]!;
    assert.equal(stored.role, sent.role);
    assert.equal(stored.speaker, sent.speaker);
    assert.equal(stored.content, sent.content);
    assert.deepEqual(stored.metadata, sent.metadata ?? {});
    assert.deepEqual(stored.clientTime, sent.clientTime ?? null);
    assert.ok(stored.serverTime instanceof Date);
    assert.equal(stored.tokenCount, result.tokenCounts[i]);
  });
  assert.deepEqual(turns[2]!.toolCall, {
    toolName: 'lookup_order',
    argumentsJson: LOOKUP_ARGS, // verbatim, not re-serialized
    result: LOOKUP_RESULT,
    status: 'SUCCESS',
    errorDetails: '',
  });
  assert.ok(turns.every((t, i) => i === 2 || t.toolCall === null));

  // The same pages by hand.
  const page1 = await client.listTurns(ns, sessionId, { pageSize: 2 });
  assert.deepEqual(page1.items.map((t) => t.seq), [1, 2]);
  const page2 = await client.listTurns(ns, sessionId, { pageSize: 2, pageToken: page1.nextPageToken });
  assert.deepEqual(page2.items.map((t) => t.seq), [3, 4]);
  const page3 = await client.listTurns(ns, sessionId, { pageSize: 2, pageToken: page2.nextPageToken });
  assert.deepEqual(page3.items.map((t) => t.seq), [5]);
  assert.equal(page3.nextPageToken, '');

  const window = await collect(client.iterTurns(ns, sessionId, { fromSeq: 2, toSeq: 3 }));
  assert.deepEqual(window.map((t) => t.seq), [2, 3]);

  // A failed tool call keeps its status and error text.
  await client.appendTurns(ns, sessionId, [
    {
      role: 'TOOL',
      speaker: 'payments',
      toolCall: { toolName: 'refund', argumentsJson: '{"amount": 49.99}', status: 'FAILURE', errorDetails: 'gateway timeout (504)' },
    },
  ]);
  const [failed] = await collect(client.iterTurns(ns, sessionId, { fromSeq: 6 }));
  assert.deepEqual([failed!.role, failed!.toolCall?.status, failed!.toolCall?.errorDetails], ['TOOL', 'FAILURE', 'gateway timeout (504)']);
});

test('an append repeated with its idempotency key is replayed and writes nothing', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  const turn: NewTurn[] = [{ role: 'USER', speaker: 'customer:42', content: 'Any news?' }];
  const first = await client.appendTurns(ns, sessionId, turn, { idempotencyKey: 'retry-1' });
  const again = await client.appendTurns(ns, sessionId, turn, { idempotencyKey: 'retry-1' });
  assert.equal(first.replayed, false);
  assert.equal(again.replayed, true);
  assert.deepEqual([again.firstSeq, again.lastSeq], [1, 1]);
  assert.deepEqual({ ...again, replayed: false }, first);
  assert.equal((await client.getSession(ns, sessionId)).turnCount, 1);

  // The same key for different turns is refused, and nothing is written.
  await rejectsWith(client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'other' }], { idempotencyKey: 'retry-1' }), 'FAILED_PRECONDITION');
  assert.deepEqual((await collect(client.iterTurns(ns, sessionId))).map((t) => t.content), ['Any news?']);
});

test('expectedNextSeq conflicts reject with ABORTED naming the current seq', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 2), { expectedNextSeq: 1 });
  const conflict = await rejectsWith(client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'stale' }], { expectedNextSeq: 1 }), 'ABORTED');
  assert.match(conflict.details, /3/); // the server says what next_seq is now
  assert.equal((await client.getSession(ns, sessionId)).nextSeq, 3); // nothing was written
  const ok = await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'fresh' }], { expectedNextSeq: 3 });
  assert.equal(ok.firstSeq, 3);
});

function evidenceSeqs(summary: SessionSummary): number[] {
  return [
    ...summary.decisions.flatMap((d) => d.evidenceSeqs),
    ...summary.pendingActions.flatMap((a) => a.evidenceSeqs),
    ...summary.openQuestions.flatMap((q) => q.evidenceSeqs),
    ...summary.keyFacts.flatMap((f) => f.evidenceSeqs),
    ...summary.toolCalls.map((c) => c.seq),
  ];
}

test('summarize with wait, then the summary structured, as Markdown and as JSON, its versions and audit log', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { subjectId: 'customer:42' });
  await rejectsWith(client.summarize(ns, sessionId), 'FAILED_PRECONDITION'); // nothing to summarize yet
  await rejectsWith(client.getSummary(ns, sessionId), 'NOT_FOUND');
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS);
  const n = SUPPORT_TURNS.length;

  const summary = await client.summarize(ns, sessionId, { wait: true });
  assert.ok(summary !== null);
  assert.deepEqual([summary.version, summary.coversThroughSeq, summary.totalTurns, summary.trigger], [1, n, n, 'REQUESTED']);
  assert.ok(summary.createdAt instanceof Date);
  // The tool log is exact.
  assert.deepEqual(
    summary.toolCalls.map((c) => [c.toolName, c.argumentsJson, c.seq, c.status]),
    [['lookup_order', LOOKUP_ARGS, 3, 'SUCCESS']],
  );
  // Identifiers and amounts come through verbatim, and every cited seq is a real turn.
  assert.ok(summary.keyFacts.some((f) => f.fact.includes('ORD-9921')));
  const seqs = evidenceSeqs(summary);
  assert.ok(seqs.length > 0 && seqs.every((s) => s >= 1 && s <= n));
  assert.deepEqual(summary.participants.map((p) => [p.speaker, p.role]).sort(), [
    ['agent-a', 'ASSISTANT'],
    ['customer:42', 'USER'],
  ]);
  assert.ok(summary.contextHealth !== null);

  assert.deepEqual(await client.getSummary(ns, sessionId), summary);
  assert.deepEqual(await client.getSummary(ns, sessionId, { version: 1, format: 'STRUCTURED' }), summary);
  const markdown = await client.getSummary(ns, sessionId, { format: 'MARKDOWN' });
  assert.equal(typeof markdown, 'string');
  for (const section of ['Issues Reported', 'Decisions Made', 'Actions Taken', 'Pending Follow-Up', 'Open Questions']) {
    assert.ok(markdown.includes(section), `Markdown lacks ${section}:\n${markdown}`);
  }
  assert.ok(markdown.includes('ORD-9921'));
  const rendered = JSON.parse(await client.getSummary(ns, sessionId, { format: 'JSON' })) as { tool_calls: { arguments_json: string }[] };
  assert.equal(rendered.tool_calls[0]!.arguments_json, LOOKUP_ARGS);
  await rejectsWith(client.getSummary(ns, sessionId, { version: 7 }), 'NOT_FOUND');

  // Nothing new: the latest summary comes back unchanged.
  assert.equal((await client.summarize(ns, sessionId))!.version, 1);
  const infos = await collect(client.iterSummaries(ns, sessionId));
  assert.deepEqual(infos.map((i) => [i.version, i.coversThroughSeq, i.trigger]), [[1, n, 'REQUESTED']]);
  assert.equal((await client.getSession(ns, sessionId)).summaryVersion, 1);

  const records = await collect(client.iterAuditLog(ns, sessionId));
  const stored = records.filter((r) => r.kind === 'SUMMARY_ATTEMPT' && r.summaryVersion === 1);
  assert.equal(stored.length, 1);
  const record = stored[0]!;
  assert.equal(record.validationPassed, true);
  assert.deepEqual(record.validationErrors, []);
  assert.equal(record.coversThroughSeq, n);
  assert.equal(record.preSummaryTokens, (await client.getSession(ns, sessionId)).totalTokens);
  assert.ok(record.postSummaryTokens > 0 && record.compressionRatio > 0);
  assert.match(record.coveredTurnsSha256, /^[0-9a-f]{64}$/);
  assert.deepEqual((await client.getAuditLog(ns, sessionId, { pageSize: 1 })).items.length, 1);
});

test('removeLastTurn takes a different turn for each concurrent call and reuses the seq', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  const items: NewTurn[] = Array.from({ length: 12 }, (_, i) => ({ role: 'USER', content: `item ${i + 1}` }));
  await client.appendTurns(ns, sessionId, items);
  const removed = await Promise.all(Array.from({ length: 10 }, () => client.removeLastTurn(ns, sessionId)));
  const seqs = removed.map((r) => r.turn!.seq).sort((a, b) => a - b);
  assert.deepEqual(seqs, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  const conflict = await rejectsWith(client.removeLastTurn(ns, sessionId, { expectedLastSeq: 1 }), 'ABORTED');
  assert.match(conflict.details, /ends at seq 2/);
  const last = await client.removeLastTurn(ns, sessionId, { expectedLastSeq: 2 });
  assert.equal(last.turn?.content, 'item 2');
  assert.equal(last.session.nextSeq, 2);
  const again = await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'again' }]);
  assert.equal(again.firstSeq, 2);
  await client.removeLastTurn(ns, sessionId);
  await client.removeLastTurn(ns, sessionId);
  assert.equal((await client.removeLastTurn(ns, sessionId)).turn, null);
});

test('summarize without wait queues the work', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 2));
  const queued = await client.summarize(ns, sessionId, { wait: false });
  assert.equal(queued, null);
});

test('a high-risk summary goes through the review queue', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { settings: { riskLevel: 'HIGH' } });
  await client.appendTurns(ns, sessionId, [
    { role: 'USER', speaker: 'customer:42', content: 'I was charged twice for ORD-9921.' },
    {
      role: 'ASSISTANT',
      speaker: 'agent-a',
      content: 'I will refund $49.99 to the card used for ORD-9921.',
      // An explicit annotation wins over the heuristics.
      metadata: { 'mnemo.annotation': 'pending_action' },
    },
  ]);
  const summary = await client.summarize(ns, sessionId);
  assert.ok(summary !== null && summary.requiresHumanReview);

  const pending = (await collect(client.iterReviewItems(ns))).filter((i) => i.sessionId === sessionId);
  assert.equal(pending.length, 1);
  assert.equal(pending[0]!.status, 'PENDING');
  assert.equal(pending[0]!.summaryVersion, summary.version);
  assert.equal(pending[0]!.resolveTime, null);
  const item = await client.resolveReviewItem(ns, pending[0]!.reviewId, 'APPROVED', 'ops:alice', { comment: 'refund ok' });
  assert.deepEqual([item.status, item.reviewer, item.comment], ['APPROVED', 'ops:alice', 'refund ok']);
  assert.ok(item.resolveTime instanceof Date);
  const twice = await rejectsWith(client.resolveReviewItem(ns, item.reviewId, 'REJECTED', 'ops:bob'), 'FAILED_PRECONDITION');
  assert.equal(twice.reason, 'ALREADY_RESOLVED');

  assert.deepEqual((await client.listReviewItems(ns)).items, []);
  const resolved = await collect(client.iterReviewItems(ns, { includeResolved: true }));
  assert.deepEqual(resolved.map((i) => i.reviewId), [item.reviewId]);
  const audit = (await collect(client.iterAuditLog(ns, sessionId))).filter((r) => r.kind === 'REVIEW_RESOLVED');
  assert.deepEqual(audit.map((r) => [r.reviewStatus, r.reviewer, r.comment]), [['APPROVED', 'ops:alice', 'refund ok']]);
});

test('a context bundle fits its budget and carries the summary and the recent turns', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { subjectId: 'customer:42', ownerAgent: 'agent-a' });
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS);
  await client.summarize(ns, sessionId);
  const bundle = await client.getContextBundle(ns, sessionId, 2000, { agentId: 'agent-b', query: 'refund' });
  assert.deepEqual([bundle.namespace, bundle.sessionId, bundle.subjectId, bundle.ownerAgent], [ns, sessionId, 'customer:42', 'agent-a']);
  assert.deepEqual([bundle.state, bundle.encoding, bundle.leaseEpoch, bundle.asOfSeq], ['ACTIVE', 'CL100K_BASE', 1, SUPPORT_TURNS.length]);
  assert.equal(bundle.budgetTokens, 2000);
  assert.ok(bundle.tokenCount > 0 && bundle.tokenCount <= 2000);
  assert.ok(bundle.renderedText.includes('ORD-9921'));
  // The whole session fits 2000 tokens: the bundle is its transcript, every turn verbatim, no summary items.
  assert.ok(bundle.manifest !== null);
  assert.equal(bundle.manifest.transcript, true);
  assert.deepEqual(bundle.recentTurns.map((t) => t.seq), SUPPORT_TURNS.map((_, i) => i + 1));
  assert.ok(bundle.recentTurns.every((t) => t.serverTime instanceof Date));
  assert.deepEqual(bundle.keyFacts, []);
  assert.ok(bundle.manifest.sections.some((s) => s.section === 'HEADER'));

  // Below the transcript's size, the summary covers what the recent turns leave out.
  const small = await client.getContextBundle(ns, sessionId, 256, { encoding: 'O200K_BASE', recentInteractions: 1 });
  assert.equal(small.encoding, 'O200K_BASE');
  assert.ok(small.tokenCount <= 256);
  assert.ok(small.manifest !== null && !small.manifest.transcript);
  assert.equal(small.manifest.summaryVersion, 1);
  assert.deepEqual(small.manifest.summarized, { firstSeq: 1, lastSeq: SUPPORT_TURNS.length });
  const tooSmall = await rejectsWith(client.getContextBundle(ns, sessionId, 10), 'INVALID_ARGUMENT');
  assert.match(tooSmall.details, /budget/);
  await rejectsWith(client.getContextBundle(ns, 'no-such-session', 1000), 'NOT_FOUND');
});

test('a bundle leads the prompt: its stable part and log are cache breakpoints that the next bundle keeps', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { settings: { summaryEveryTurns: 10_000 } });
  for (let i = 0; i < 15; i++) {
    await client.appendTurns(ns, sessionId, [
      { role: 'USER', content: `Question ${i}: where is order ORD-${100 + i}? ${'context '.repeat(80)}` },
      { role: 'ASSISTANT', content: `Order ORD-${100 + i} ships on day ${i}. ${'detail '.repeat(80)}` },
    ]);
  }
  await client.summarize(ns, sessionId);
  await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'And the next one?' }]);
  const first = await client.getContextBundle(ns, sessionId, 2000);
  const [stable, log, request] = bundleParts(first);
  assert.ok(stable.startsWith('# Context bundle'));
  assert.ok(log.startsWith('## Conversation since summary v1') && log.includes('And the next one?'));
  assert.ok(request.includes('As of turn 31'));
  assert.ok(first.stableEndTokens > 0 && first.stableEndTokens < first.logEndTokens && first.logEndTokens <= first.tokenCount);
  const blocks = anthropicSystem(first);
  assert.equal(blocks.map((b) => b.text).join(''), first.renderedText);
  assert.deepEqual(blocks.map((b) => b.cache_control ?? null), [{ type: 'ephemeral' }, { type: 'ephemeral' }, null]);
  assert.deepEqual(systemMessage(first), { role: 'system', content: first.renderedText });
  await client.appendTurns(ns, sessionId, [{ role: 'ASSISTANT', content: 'It ships tomorrow.' }]);
  const second = await client.getContextBundle(ns, sessionId, 2000);
  assert.deepEqual(anthropicSystem(second)[0], blocks[0]);
  assert.ok(bundleParts(second)[1].startsWith(log));
  // Requests whose queries retrieve memory share their blocks with each other
  // (the stable part and the log give way to the request's memory in one fixed
  // step, see docs/prompt-caching.md).
  const asked = await client.getContextBundle(ns, sessionId, 2000, { query: 'shipping' });
  await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'Thanks, and ORD-101?' }]);
  const again = await client.getContextBundle(ns, sessionId, 2000, { query: 'order ORD-101' });
  assert.deepEqual(anthropicSystem(again)[0], anthropicSystem(asked)[0]);
  assert.ok(bundleParts(again)[1].startsWith(bundleParts(asked)[1]));
});

test('a handoff moves ownership and fences appends of the old owner', async () => {
  const ns = freshNamespace();
  const created = await client.createSession(ns, { ownerAgent: 'agent-a' });
  const { sessionId } = created;
  assert.deepEqual([created.ownerAgent, created.leaseEpoch], ['agent-a', 1]);
  assert.ok(created.lastActiveTime instanceof Date);
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 2), { leaseEpoch: 1 });

  const handed = await client.handoff(ns, sessionId, { fromAgent: 'agent-a', toAgent: 'agent-b', leaseEpoch: 1, reason: 'shift change' });
  assert.equal(handed.leaseEpoch, 2);
  assert.deepEqual([handed.session.ownerAgent, handed.session.leaseEpoch], ['agent-b', 2]);
  assert.equal(handed.eventSeq, 3);
  assert.ok(handed.summary !== null);
  assert.deepEqual([handed.summary.trigger, handed.summary.coversThroughSeq], ['HANDOFF', 3]);
  assert.ok(handed.bundle !== null && handed.bundle.ownerAgent === 'agent-b');
  const [event] = await collect(client.iterTurns(ns, sessionId, { fromSeq: 3 }));
  assert.equal(event!.role, 'SYSTEM');
  assert.ok(event!.content.includes('shift change'));

  const fenced = await rejectsWith(client.appendTurns(ns, sessionId, [{ role: 'ASSISTANT', content: 'late reply' }], { leaseEpoch: 1 }), 'FAILED_PRECONDITION');
  assert.match(fenced.details, /agent-b/);
  assert.equal(fenced.reason, 'STALE_LEASE_EPOCH');
  assert.equal(handed.replayed, false);
  await rejectsWith(client.handoff(ns, sessionId, { fromAgent: 'agent-a', toAgent: 'agent-c', leaseEpoch: 1 }), 'FAILED_PRECONDITION');
  assert.equal((await client.appendTurns(ns, sessionId, [{ role: 'ASSISTANT', content: 'on it' }], { leaseEpoch: 2 })).firstSeq, 4);
  assert.ok(!(await collect(client.iterTurns(ns, sessionId))).some((t) => t.content === 'late reply'));
});

test('a handoff retried with its idempotency key is replayed, not repeated', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { ownerAgent: 'agent-a' });
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 2), { leaseEpoch: 1 });
  const request = { fromAgent: 'agent-a', toAgent: 'agent-b', leaseEpoch: 1, idempotencyKey: 'shift-1' };
  const first = await client.handoff(ns, sessionId, request);
  const again = await client.handoff(ns, sessionId, request);
  assert.deepEqual([first.replayed, again.replayed], [false, true]);
  assert.deepEqual([again.leaseEpoch, again.eventSeq], [first.leaseEpoch, first.eventSeq]);
  assert.equal((await client.getSession(ns, sessionId)).turnCount, 3);
  const reused = await rejectsWith(client.handoff(ns, sessionId, { ...request, toAgent: 'agent-c' }), 'FAILED_PRECONDITION');
  assert.equal(reused.reason, 'IDEMPOTENCY_KEY_REUSED');
});

test('watchSession replays from a seq, follows live events in order, and ends on abort', { timeout: 30_000 }, async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { ownerAgent: 'agent-a', settings: { summaryEveryTurns: 10_000 } });
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 3));
  const controller = new AbortController();
  const events = client.watchSession(ns, sessionId, { fromSeq: 2, signal: controller.signal })[Symbol.asyncIterator]();
  const next = async (): Promise<WatchEvent> => {
    const result = await events.next();
    assert.ok(!result.done, 'the watch ended early');
    return result.value;
  };
  const turnSeq = (e: WatchEvent) => (e.event === 'turn' ? e.turn.seq : -1);

  assert.deepEqual([turnSeq(await next()), turnSeq(await next())], [2, 3]); // replayed
  const replayed = await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'live' }]);
  const live = await next();
  assert.ok(live.event === 'turn');
  assert.deepEqual([live.turn.seq, live.turn.content, live.turn.role], [replayed.firstSeq, 'live', 'USER']);
  assert.deepEqual(Object.keys(live).sort(), ['event', 'turn']); // only the member that is present

  await client.handoff(ns, sessionId, { fromAgent: 'agent-a', toAgent: 'agent-b', leaseEpoch: 1, reason: 'lunch' });
  const handoffTurn = await next();
  assert.ok(handoffTurn.event === 'turn' && handoffTurn.turn.role === 'SYSTEM' && handoffTurn.turn.seq === 5);
  const handoff = await next();
  assert.ok(handoff.event === 'handoff');
  assert.deepEqual(handoff.handoff, { fromAgent: 'agent-a', toAgent: 'agent-b', reason: 'lunch', leaseEpoch: 2, seq: 5 });
  const summary = await next();
  assert.ok(summary.event === 'summaryWritten');
  assert.deepEqual(summary.summaryWritten, { version: 1, coversThroughSeq: 5, trigger: 'HANDOFF' });

  await client.closeSession(ns, sessionId);
  const state = await next();
  assert.ok(state.event === 'stateChanged');
  assert.deepEqual(state.stateChanged, { state: 'CLOSED', atSeq: 5 });

  controller.abort();
  assert.deepEqual(await events.next(), { done: true, value: undefined }); // ends quietly
});

test('a watch ends with NOT_FOUND when its session is deleted, and when breaking out of the loop', { timeout: 30_000 }, async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns);
  await client.appendTurns(ns, sessionId, SUPPORT_TURNS.slice(0, 2));
  for await (const event of client.watchSession(ns, sessionId, { fromSeq: 1 })) {
    assert.equal(event.event, 'turn');
    break; // cancels the call
  }
  const events = client.watchSession(ns, sessionId, { fromSeq: 1 })[Symbol.asyncIterator]();
  assert.equal((await events.next()).value?.event, 'turn');
  assert.equal((await events.next()).value?.event, 'turn');
  await client.deleteSession(ns, sessionId);
  await rejectsWith(events.next(), 'NOT_FOUND');
  await rejectsWith(client.watchSession(ns, 'no-such-session')[Symbol.asyncIterator]().next(), 'NOT_FOUND');
});

test('failures reject with MnemoError carrying the status code name and the server message', async () => {
  const ns = freshNamespace();
  const missing = await rejectsWith(client.getSession(ns, 'no-such-session'), 'NOT_FOUND');
  assert.ok(missing instanceof Error);
  assert.equal(missing.name, 'MnemoError');
  assert.equal(missing.grpcCode, 5);
  assert.ok(missing.details.length > 0);
  assert.equal(missing.message, `NOT_FOUND: ${missing.details}`);

  const empty = await rejectsWith(client.createSession(''), 'INVALID_ARGUMENT');
  assert.match(empty.details, /namespace/);
  const bad = await rejectsWith(client.createSession('no spaces allowed!'), 'INVALID_ARGUMENT');
  assert.match(bad.details, /namespace/);

  await client.createSession(ns, { sessionId: 'dup' });
  await rejectsWith(client.createSession(ns, { sessionId: 'dup' }), 'ALREADY_EXISTS');
  // arguments_json must parse as JSON.
  await rejectsWith(client.appendTurns(ns, 'dup', [{ role: 'ASSISTANT', toolCall: { toolName: 't', argumentsJson: '{' } }]), 'INVALID_ARGUMENT');
  await rejectsWith(collect(client.iterTurns(ns, 'no-such-session')), 'NOT_FOUND');
  await rejectsWith(client.appendTurns(ns, 'no-such-session', [{ role: 'USER', content: 'x' }]), 'NOT_FOUND');
  assert.equal((await client.getSession(ns, 'dup')).turnCount, 0); // nothing was written
});

test('mistakes the client can see itself throw TypeError before any call', async () => {
  const ns = freshNamespace();
  await client.createSession(ns, { sessionId: 's' });
  const untyped = (turns: unknown) => client.appendTurns(ns, 's', turns as NewTurn[]);
  await assert.rejects(untyped([{ role: 'ROBOT', content: 'x' }]), { name: 'TypeError', message: /turns\[0\]\.role: "ROBOT" is not one of .*USER/ });
  await assert.rejects(untyped([{ role: 'user', content: 'x' }]), TypeError); // names are upper case, as in the proto
  await assert.rejects(untyped([{ role: 'USER', text: 'x' }]), { name: 'TypeError', message: /turns\[0\]\.text: .*no field text/ });
  await assert.rejects(untyped([{ role: 'ASSISTANT', toolCall: { tool: 't' } }]), { name: 'TypeError', message: /toolCall\.tool/ });
  await assert.rejects(untyped([{ role: 'USER', clientTime: '2026-01-01' }]), { name: 'TypeError', message: /clientTime: expected a valid Date/ });
  await assert.rejects(untyped([{ role: 'USER', content: 42 }]), { name: 'TypeError', message: /content: 42 is not a valid string/ });
  await assert.rejects(untyped({ role: 'USER' }), { name: 'TypeError', message: /turns: expected an array/ });
  assert.equal((await client.getSession(ns, 's')).turnCount, 0);
});

test('any RPC can be called by name with the same conversions', async () => {
  const ns = freshNamespace();
  await client.createSession(ns, { sessionId: 'raw' });
  const response = await client.call('GetSession', { namespace: ns, sessionId: 'raw' }, { idempotent: true });
  const session = response.session as { sessionId: string; state: string; createTime: unknown };
  assert.deepEqual([session.sessionId, session.state], ['raw', 'ACTIVE']);
  assert.ok(session.createTime instanceof Date);
  await assert.rejects(client.call('NoSuchRpc', {}), { name: 'TypeError', message: /no RPC NoSuchRpc/ });
});

test('an API key and an http:// address are accepted', async () => {
  // A loopback daemon with no keys configured checks none; the header must not break anything.
  const keyed = new MnemoClient(`http://${daemon.address}`, { apiKey: 'secret-key' });
  try {
    const ns = freshNamespace();
    assert.equal((await keyed.createSession(ns, { sessionId: 'k' })).sessionId, 'k');
  } finally {
    keyed.close();
  }
});

test('an unreachable daemon rejects with UNAVAILABLE after the retries', async () => {
  const nowhere = new MnemoClient('127.0.0.1:1', { timeoutMs: 1_000, retries: 1 });
  try {
    await rejectsWith(nowhere.getSession('ns', 's'), 'UNAVAILABLE');
  } finally {
    nowhere.close();
  }
});
