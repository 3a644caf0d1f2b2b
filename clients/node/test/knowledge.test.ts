// End-to-end tests of long-term memory against the real `mnemo` daemon: facts,
// search, episodes, and what a subject's next session starts with.
//
// The search index and the episodes are written in the background shortly
// after the write that feeds them, so those tests poll with a deadline instead
// of sleeping; deletions, on the other hand, must be invisible at once.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { MnemoClient, MnemoError, type NewTurn, type SearchHit } from '../src';
import { Daemon } from './daemon';

const SEARCH_MS = 10_000; // the index catches up within about a second
const EPISODE_MS = 15_000; // the close's summary, then the episode, are written in the background

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

function freshNamespace(): string {
  return `node-${randomUUID().slice(0, 12)}`;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<MnemoError> {
  let caught: unknown;
  await assert.rejects(promise, (e: unknown) => {
    caught = e;
    return e instanceof MnemoError && e.code === code;
  });
  return caught as MnemoError;
}

/** Calls `attempt` until `done` holds of its result; fails with the last result after `ms`. */
async function poll<T>(what: string, ms: number, attempt: () => Promise<T>, done: (result: T) => boolean): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const result = await attempt();
    if (done(result)) return result;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms} ms; last result: ${JSON.stringify(result)}`);
    await sleep(50);
  }
}

test('facts: put, supersede with history, merge, list with filters and pages, delete', async () => {
  const ns = freshNamespace();
  const first = await client.putFact(ns, 'cust-1', 'Prefers Spanish.', { key: 'preferred_language', tags: ['lang'] });
  assert.equal(first.outcome, 'CREATED');
  assert.equal(first.superseded, null);
  const f1 = first.fact;
  assert.deepEqual(
    [f1.namespace, f1.subjectId, f1.key, f1.text, f1.origin, f1.tags, f1.sources, f1.supersedes, f1.supersededBy],
    [ns, 'cust-1', 'preferred_language', 'Prefers Spanish.', 'CLIENT', ['lang'], [], '', ''],
  );
  assert.ok(f1.createTime instanceof Date);

  // The same key supersedes; the old version stays readable.
  const second = await client.putFact(ns, 'cust-1', 'Prefers English since May.', { key: 'preferred_language' });
  assert.equal(second.outcome, 'SUPERSEDED');
  const f2 = second.fact;
  assert.deepEqual([second.superseded?.factId, second.superseded?.supersededBy], [f1.factId, f2.factId]);
  assert.deepEqual([f2.supersedes, f2.supersededBy], [f1.factId, '']);
  const old = await client.getFact(ns, f1.factId);
  assert.deepEqual([old.text, old.supersededBy], ['Prefers Spanish.', f2.factId]);
  assert.deepEqual(await client.getFact(ns, f2.factId), f2);

  // A repeated put (what a retry after a lost answer sends) merges into the fact it stored.
  const again = await client.putFact(ns, 'cust-1', 'Prefers English since May.', { key: 'preferred_language' });
  assert.deepEqual([again.outcome, again.fact.factId, again.superseded], ['MERGED', f2.factId, null]);

  // Unkeyed facts with the same normalized words merge, tags included.
  const dogs = await client.putFact(ns, 'cust-1', 'Has two dogs, Rex and Bo.', { tags: ['pets'] });
  const merged = await client.putFact(ns, 'cust-1', 'has two dogs rex and bo', { tags: ['family'] });
  assert.deepEqual([merged.outcome, merged.fact.factId], ['MERGED', dogs.fact.factId]);
  assert.deepEqual([...merged.fact.tags].sort(), ['family', 'pets']);

  const current = await collect(client.iterFacts(ns, { subjectId: 'cust-1' }));
  assert.deepEqual(current.map((f) => f.factId), [f2.factId, dogs.fact.factId]); // oldest first, current only
  const history = await collect(client.iterFacts(ns, { subjectId: 'cust-1', includeHistory: true, pageSize: 1 }));
  assert.deepEqual(history.map((f) => f.factId).sort(), [f1.factId, f2.factId, dogs.fact.factId].sort());
  const page = await client.listFacts(ns, { includeHistory: true, pageSize: 2 });
  assert.ok(page.items.length <= 2 && page.nextPageToken !== '');
  assert.deepEqual((await collect(client.iterFacts(ns, { tag: 'family' }))).map((f) => f.text), ['Has two dogs, Rex and Bo.']);
  assert.deepEqual((await collect(client.iterFacts(ns, { key: 'preferred_language' }))).map((f) => f.factId), [f2.factId]);
  assert.deepEqual(await collect(client.iterFacts(ns, { subjectId: 'cust-2' })), []);

  // Deleting the current version leaves the key without a current fact; history stays.
  assert.equal((await client.deleteFact(ns, f2.factId)).factId, f2.factId);
  await rejectsWith(client.getFact(ns, f2.factId), 'NOT_FOUND');
  await rejectsWith(client.deleteFact(ns, f2.factId), 'NOT_FOUND'); // why deleteFact is not retried
  assert.deepEqual((await collect(client.iterFacts(ns, { subjectId: 'cust-1' }))).map((f) => f.key), ['']);
  assert.equal((await client.getFact(ns, f1.factId)).text, 'Prefers Spanish.');
  assert.equal((await client.putFact(ns, 'cust-1', 'Prefers French.', { key: 'preferred_language' })).outcome, 'CREATED');
});

test('fact requests are validated', async () => {
  const ns = freshNamespace();
  const bad = await rejectsWith(client.putFact(ns, 'cust-1', 'x', { key: 'Bad Key' }), 'INVALID_ARGUMENT');
  assert.match(bad.details, /key/);
  await rejectsWith(client.putFact(ns, 'cust-1', 'x', { tags: ['a b'] }), 'INVALID_ARGUMENT');
  await rejectsWith(client.putFact(ns, 'cust-1', 'x', { source: { sessionId: 'no-such-session' } }), 'NOT_FOUND');
  assert.deepEqual(await collect(client.iterFacts(ns, { includeHistory: true })), []); // nothing stored

  const { sessionId } = await client.createSession(ns, { subjectId: 'cust-1' });
  await client.appendTurns(ns, sessionId, [{ role: 'USER', content: 'I have a cat.' }]);
  await rejectsWith(client.putFact(ns, 'cust-1', 'Has a cat.', { source: { sessionId, seq: 2 } }), 'INVALID_ARGUMENT');
  const stated = await client.putFact(ns, 'cust-1', 'Has a cat.', { source: { sessionId, seq: 1 } });
  assert.deepEqual(stated.fact.sources, [{ sessionId, seq: 1, turnRemoved: false }]);
  await rejectsWith(client.getFact(ns, 'no-such-fact'), 'NOT_FOUND');
});

test('search finds an appended turn and a fact, within scope, and forgets deletions at once', async () => {
  const ns = freshNamespace();
  const { sessionId } = await client.createSession(ns, { subjectId: 'cust-9' });
  await client.appendTurns(ns, sessionId, [
    { role: 'USER', speaker: 'cust-9', content: 'The espresso machine leaks water from the boiler.' },
    { role: 'ASSISTANT', speaker: 'agent-a', content: 'I will book a technician for Monday.' },
  ]);
  const search = (query: string, done: (hits: SearchHit[]) => boolean) =>
    poll(`search ${JSON.stringify(query)}`, SEARCH_MS, async () => (await client.search(ns, query)).hits, done);
  const [top] = await search('boiler leaking', (hits) => hits.length > 0);
  assert.deepEqual([top!.kind, top!.sessionId, top!.seq, top!.role, top!.subjectId], ['TURN', sessionId, 1, 'USER', 'cust-9']);
  assert.match(top!.snippet, /boiler/);
  assert.ok(top!.score > 0);

  const { fact } = await client.putFact(ns, 'cust-9', 'Warranty runs until March 2027.', { key: 'warranty' });
  const hits = await search('warranty', (h) => h.some((x) => x.kind === 'FACT'));
  assert.deepEqual(hits.map((h) => [h.kind, h.factId]), [['FACT', fact.factId]]);

  // Scope: kinds, subject, session, limit; everything is indexed by now.
  const all = await client.search(ns, 'boiler warranty technician', { limit: 100 });
  assert.equal(all.indexLag, 0);
  assert.deepEqual(new Set(all.hits.map((h) => h.kind)), new Set(['TURN', 'FACT']));
  const onlyFacts = await client.search(ns, 'boiler warranty technician', { kinds: ['FACT'] });
  assert.deepEqual(onlyFacts.hits.map((h) => h.factId), [fact.factId]);
  assert.deepEqual((await client.search(ns, 'boiler warranty', { subjectId: 'cust-other' })).hits, []);
  const inSession = await client.search(ns, 'boiler technician', { sessionId });
  assert.deepEqual(new Set(inSession.hits.map((h) => h.sessionId)), new Set([sessionId]));
  assert.equal((await client.search(ns, 'boiler technician', { limit: 1 })).hits.length, 1);
  await rejectsWith(client.search(ns, ' '), 'INVALID_ARGUMENT');
  await rejectsWith(client.search(ns, 'x', { limit: 101 }), 'INVALID_ARGUMENT');

  // Deleted sessions and facts never appear, whatever the index lag.
  await client.deleteSession(ns, sessionId);
  const afterDelete = await client.search(ns, 'boiler espresso technician');
  assert.deepEqual(afterDelete.hits.filter((h) => h.kind !== 'FACT'), []);
  await client.deleteFact(ns, fact.factId);
  assert.deepEqual((await client.search(ns, 'warranty')).hits, []);
});

const REPLACEMENT = 'I will send the replacement charger by 2026-12-20.';
const FIRST_VISIT: NewTurn[] = [
  { role: 'USER', speaker: 'cust-1', content: 'Hi, the charger I bought with order ORD-77120 stopped working.' },
  { role: 'ASSISTANT', speaker: 'agent-a', content: 'Sorry about that. Let me check the order.' },
  { role: 'USER', speaker: 'cust-1', content: 'My preferred language is Portuguese.' },
  { role: 'ASSISTANT', speaker: 'agent-a', content: REPLACEMENT },
  { role: 'USER', speaker: 'cust-1', content: 'Thank you.' },
];

test('a closed session becomes an episode, and the next session of the subject starts with it', { timeout: 60_000 }, async () => {
  const ns = freshNamespace();
  const first = await client.createSession(ns, { sessionId: 'visit-1', subjectId: 'cust-1' });
  assert.equal(first.settings.factExtraction, 'ENABLED'); // the default, filled in
  await client.appendTurns(ns, 'visit-1', FIRST_VISIT);
  await client.closeSession(ns, 'visit-1');

  const episodes = await poll('the episode of visit-1', EPISODE_MS, () => collect(client.iterEpisodes(ns, 'cust-1')), (eps) => eps.length === 1);
  const episode = episodes[0]!;
  assert.deepEqual(
    [episode.episodeId, episode.sessionId, episode.subjectId, episode.endedAs, episode.lastSeq],
    ['visit-1', 'visit-1', 'cust-1', 'CLOSED', FIRST_VISIT.length],
  );
  assert.ok(episode.startTime instanceof Date && episode.endTime instanceof Date && episode.startTime <= episode.endTime);
  const pending = episode.pendingActions.filter((a) => a.action.includes('replacement charger'));
  assert.equal(pending.length, 1, `the summarizer found no pending replacement in ${JSON.stringify(episode)}`);
  assert.deepEqual([pending[0]!.deadline, pending[0]!.status, pending[0]!.evidenceSeqs[0]], ['2026-12-20', 'PENDING', 4]);
  assert.deepEqual((await client.listEpisodes(ns, 'cust-1', { pageSize: 1 })).items.map((e) => e.episodeId), ['visit-1']);

  // The next session's bundle carries the extracted fact, the episode and the open action.
  await client.createSession(ns, { sessionId: 'visit-2', subjectId: 'cust-1' });
  const bundle = await client.getContextBundle(ns, 'visit-2', 4000);
  assert.ok(bundle.facts.some((f) => f.text.includes('Portuguese') && f.origin === 'EXTRACTED'), bundle.renderedText);
  assert.match(bundle.renderedText, /Portuguese/);
  assert.deepEqual(bundle.episodes.map((e) => e.sessionId), ['visit-1']);
  const carried = bundle.carriedActions.find((c) => c.action.action === REPLACEMENT);
  assert.ok(carried !== undefined, bundle.renderedText);
  assert.deepEqual(carried.ref, { sessionId: 'visit-1', actionSeq: 4 });
  const sections = new Set(bundle.manifest?.sections.map((e) => e.section));
  for (const section of ['CARRIED_ACTIONS', 'FACTS', 'EPISODES'] as const) assert.ok(sections.has(section), section);

  // Marked done, it no longer carries over.
  const done = await client.updatePendingAction(ns, carried.ref, 'DONE');
  assert.deepEqual([done.action, done.status], [REPLACEMENT, 'DONE']);
  const later = await client.getContextBundle(ns, 'visit-2', 4000);
  assert.ok(!later.carriedActions.some((c) => c.action.action === REPLACEMENT), later.renderedText);
  await rejectsWith(client.updatePendingAction(ns, { sessionId: 'visit-1', actionSeq: 1 }, 'DONE'), 'NOT_FOUND');
});

test('fact extraction can be turned off per session', async () => {
  const ns = freshNamespace();
  const quiet = await client.createSession(ns, { subjectId: 'u9', settings: { factExtraction: 'DISABLED' } });
  assert.equal(quiet.settings.factExtraction, 'DISABLED');
  await client.appendTurns(ns, quiet.sessionId, [{ role: 'USER', content: 'My email is u9@example.com. I prefer mornings.' }]);
  await client.summarize(ns, quiet.sessionId);
  assert.deepEqual(await collect(client.iterFacts(ns, { subjectId: 'u9', includeHistory: true })), []);
});

test("a bundle recalls the answer an earlier session of the subject gave", async () => {
  const ns = freshNamespace();
  await client.createSession(ns, { sessionId: 'trip-1', subjectId: 'traveller-7' });
  await client.appendTurns(ns, 'trip-1', [
    { role: 'USER', speaker: 'maria', content: 'Which gate does the Lisbon ferry leave from?' },
    { role: 'ASSISTANT', speaker: 'agent', content: 'The Lisbon ferry leaves from gate 14B at 07:45.' },
    { role: 'USER', speaker: 'maria', content: 'Thanks, that is all for now.' },
  ]);
  await client.createSession(ns, { sessionId: 'trip-2', subjectId: 'traveller-7' });
  await client.appendTurns(ns, 'trip-2', [{ role: 'USER', speaker: 'maria', content: 'Hello again.' }]);

  const bundle = await poll(
    'the earlier answer recalled',
    SEARCH_MS,
    () => client.getContextBundle(ns, 'trip-2', 1000, { query: 'which gate does the Lisbon ferry use?' }),
    (b) => b.renderedText.includes('gate 14B'),
  );
  const fromTrip1 = bundle.recalled.filter((r) => r.sessionId === 'trip-1');
  assert.ok(fromTrip1.some((r) => r.turns.some((t) => t.content.includes('gate 14B'))), bundle.renderedText);
  assert.ok(bundle.recalled.every((r) => r.rank >= 1));
  assert.ok(bundle.tokenCount <= 1000);
  assert.ok(bundle.manifest?.sections.some((s) => s.section === 'RECALLED'));

  const plain = await client.getContextBundle(ns, 'trip-2', 1000, { query: 'Lisbon ferry gate', skipRecall: true });
  assert.deepEqual(plain.recalled, []);
  assert.ok(!plain.renderedText.includes('gate 14B'));
});
