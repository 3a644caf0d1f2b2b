// types.ts must mirror the contract in proto/: a field or enum value added to a
// message there must be added to its interface here too. Each `Record<keyof X, true>`
// below is checked against the interface by the compiler and against the
// parsed .proto by the test, so neither side can drift unnoticed.

import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import { MnemoClient } from '../src';
import { Codec } from '../src/codec';
import { loadContract, resolveProtoDir } from '../src/proto';
import type * as T from '../src/types';

type Fields<X> = Record<keyof X, true>;

const session: Fields<T.Session> = {
  namespace: true, sessionId: true, subjectId: true, title: true, metadata: true, settings: true, state: true,
  turnCount: true, nextSeq: true, totalTokens: true, createTime: true, updateTime: true, summaryVersion: true,
  summarizedThroughSeq: true, ownerAgent: true, leaseEpoch: true, lastActiveTime: true, turnsRemoved: true,
};
const settings: Fields<T.SessionSettings> = {
  summaryEveryTurns: true, contextLimitTokens: true, idleTimeoutSeconds: true, encoding: true, riskLevel: true,
  factExtraction: true,
};
const toolCall: Fields<T.ToolCall> = { toolName: true, argumentsJson: true, result: true, status: true, errorDetails: true };
const newToolCall: Fields<T.NewToolCall> = { toolName: true, argumentsJson: true, result: true, status: true, errorDetails: true };
const turn: Fields<T.Turn> = {
  seq: true, role: true, speaker: true, content: true, clientTime: true, serverTime: true, toolCall: true, metadata: true,
  tokenCount: true,
};
const newTurn: Fields<T.NewTurn> = { role: true, speaker: true, content: true, clientTime: true, toolCall: true, metadata: true };
const appendResult: Fields<T.AppendResult> = { firstSeq: true, lastSeq: true, tokenCounts: true, totalTokens: true, replayed: true };
const decision: Fields<T.Decision> = { decision: true, rationale: true, agreedBy: true, evidenceSeqs: true, requiresHumanReview: true };
const pendingAction: Fields<T.PendingAction> = {
  action: true, owner: true, deadline: true, status: true, dependsOn: true, priority: true, evidenceSeqs: true,
  requiresHumanReview: true,
};
const openQuestion: Fields<T.OpenQuestion> = { question: true, askedBy: true, status: true, evidenceSeqs: true };
const keyFact: Fields<T.KeyFact> = { fact: true, statedBy: true, evidenceSeqs: true };
const toolCallEntry: Fields<T.ToolCallEntry> = {
  toolName: true, argumentsJson: true, resultSummary: true, status: true, errorDetails: true, seq: true, requiresHumanReview: true,
};
const artifact: Fields<T.Artifact> = { artifactId: true, sourceTool: true, summary: true, seq: true, expirySeq: true };
const contextHealth: Fields<T.ContextHealth> = { staleArtifacts: true, missingDependencies: true, budgetRemainingTokens: true };
const anomaly: Fields<T.Anomaly> = { description: true, severity: true, seq: true };
const conflict: Fields<T.Conflict> = { description: true, conflictingSeqs: true };
const participant: Fields<T.Participant> = { speaker: true, role: true };
const topicSegment: Fields<T.TopicSegment> = { firstSeq: true, lastSeq: true, topic: true, keyPoints: true, evidenceSeqs: true };
const sessionSummary: Fields<T.SessionSummary> = {
  userIntent: true, topic: true, outcome: true, decisions: true, pendingActions: true, openQuestions: true, keyFacts: true,
  toolCalls: true, artifacts: true, contextHealth: true, truncated: true, errorsAndAnomalies: true, unresolvedConflicts: true,
  participants: true, topics: true, prose: true, coversThroughSeq: true, version: true, trigger: true, createdAt: true,
  durationSeconds: true, totalTurns: true, requiresHumanReview: true, userIntentSeq: true,
};
const summaryInfo: Fields<T.SummaryInfo> = {
  version: true, coversThroughSeq: true, trigger: true, createTime: true, decisions: true, pendingActions: true, openQuestions: true,
};
const auditRecord: Fields<T.AuditRecord> = {
  auditSeq: true, kind: true, createTime: true, summaryVersion: true, trigger: true, coversThroughSeq: true,
  preSummaryTokens: true, postSummaryTokens: true, compressionRatio: true, summarizer: true, coveredTurnsSha256: true,
  validationPassed: true, validationErrors: true, decisions: true, pendingActions: true, openQuestions: true, healthFlags: true,
  reviewId: true, reviewStatus: true, reviewer: true, comment: true, reviewerKey: true,
};
const reviewItem: Fields<T.ReviewItem> = {
  reviewId: true, namespace: true, sessionId: true, summaryVersion: true, items: true, status: true, reviewer: true,
  comment: true, createTime: true, resolveTime: true, reviewerKey: true,
};

const seqRange: Fields<T.SeqRange> = { firstSeq: true, lastSeq: true };
const manifestEntry: Fields<T.ManifestEntry> = {
  section: true, available: true, included: true, shortened: true, omitted: true, includedSeqs: true, shortenedSeqs: true,
  omittedSeqs: true, tokens: true,
};
const bundleManifest: Fields<T.BundleManifest> = {
  sections: true, summaryVersion: true, summarized: true, complete: true, recalledLeftOut: true, transcript: true,
  turnsRemoved: true, layout: true,
};
const recalledRef: Fields<T.RecalledRef> = { sessionId: true, seq: true, factId: true, rank: true };
const recalledMemory: Fields<T.RecalledMemory> = { sessionId: true, turns: true, hitSeq: true, fact: true, episode: true, rank: true };
const compressedTurn: Fields<T.CompressedTurn> = { seq: true, role: true, speaker: true, text: true, shortened: true };
const contextBundle: Fields<T.ContextBundle> = {
  namespace: true, sessionId: true, subjectId: true, state: true, ownerAgent: true, leaseEpoch: true, asOfSeq: true,
  encoding: true, budgetTokens: true, tokenCount: true, renderedText: true, userIntent: true, prose: true,
  pendingActions: true, openQuestions: true, decisions: true, keyFacts: true, recentTurns: true, earlierTurns: true,
  manifest: true, carriedActions: true, facts: true, episodes: true, recalled: true,
  stableEndTokens: true, stableEndBytes: true, logEndTokens: true, logEndBytes: true,
};
const handoffResult: Fields<T.HandoffResult> = { session: true, leaseEpoch: true, eventSeq: true, summary: true, bundle: true, replayed: true };
const summaryWritten: Fields<T.SummaryWritten> = { version: true, coversThroughSeq: true, trigger: true };
const handoffEvent: Fields<T.HandoffEvent> = { fromAgent: true, toAgent: true, reason: true, leaseEpoch: true, seq: true };
const stateChanged: Fields<T.StateChanged> = { state: true, atSeq: true };
const factSource: Fields<T.FactSource> = { sessionId: true, seq: true, turnRemoved: true };
const fact: Fields<T.Fact> = {
  namespace: true, factId: true, subjectId: true, key: true, text: true, sources: true, tags: true, origin: true,
  supersedes: true, supersededBy: true, createTime: true, updateTime: true,
};
const putFactResult: Fields<T.PutFactResult> = { fact: true, outcome: true, superseded: true };
const episode: Fields<T.Episode> = {
  namespace: true, episodeId: true, subjectId: true, sessionId: true, startTime: true, endTime: true, topic: true,
  outcome: true, prose: true, userIntent: true, decisions: true, pendingActions: true, summaryVersion: true, lastSeq: true,
  endedAs: true,
  turnsRemoved: true,
};
const pendingActionRef: Fields<T.PendingActionRef> = { sessionId: true, actionSeq: true };
const carriedAction: Fields<T.CarriedAction> = { ref: true, action: true };
const searchHit: Fields<T.SearchHit> = {
  kind: true, score: true, snippet: true, subjectId: true, sessionId: true, seq: true, factId: true, episodeId: true, role: true,
};
const searchResult: Fields<T.SearchResult> = { hits: true, indexLag: true };
// The members of the oneof `event`, which WatchEvent's discriminant names.
const watchEvent: Record<T.WatchEvent['event'], true> = { turn: true, summaryWritten: true, handoff: true, stateChanged: true };

const MESSAGES: [string, object][] = [
  ['Session', session], ['SessionSettings', settings], ['ToolCall', toolCall], ['ToolCall', newToolCall], ['Turn', turn],
  ['NewTurn', newTurn], ['AppendTurnsResponse', appendResult], ['Decision', decision], ['PendingAction', pendingAction],
  ['OpenQuestion', openQuestion], ['KeyFact', keyFact], ['ToolCallEntry', toolCallEntry], ['Artifact', artifact],
  ['ContextHealth', contextHealth], ['Anomaly', anomaly], ['Conflict', conflict], ['Participant', participant],
  ['TopicSegment', topicSegment], ['SessionSummary', sessionSummary], ['SummaryInfo', summaryInfo],
  ['AuditRecord', auditRecord], ['ReviewItem', reviewItem], ['SeqRange', seqRange], ['ManifestEntry', manifestEntry],
  ['BundleManifest', bundleManifest], ['CompressedTurn', compressedTurn], ['ContextBundle', contextBundle],
  ['HandoffResponse', handoffResult], ['SummaryWritten', summaryWritten], ['HandoffEvent', handoffEvent],
  ['StateChanged', stateChanged], ['WatchSessionResponse', watchEvent], ['FactSource', factSource], ['Fact', fact],
  ['PutFactResponse', putFactResult], ['Episode', episode], ['PendingActionRef', pendingActionRef],
  ['CarriedAction', carriedAction], ['SearchHit', searchHit], ['SearchResponse', searchResult],
  ['RecalledRef', recalledRef], ['RecalledMemory', recalledMemory],
];

type Values<E extends string> = Record<E, true>;
const ENUMS: [string, object][] = [
  ['SessionState', { UNSPECIFIED: true, ACTIVE: true, IDLE: true, CLOSED: true } satisfies Values<T.SessionState>],
  ['Encoding', { UNSPECIFIED: true, CL100K_BASE: true, O200K_BASE: true } satisfies Values<T.Encoding>],
  ['RiskLevel', { UNSPECIFIED: true, NORMAL: true, HIGH: true } satisfies Values<T.RiskLevel>],
  ['Role', { UNSPECIFIED: true, USER: true, ASSISTANT: true, SYSTEM: true, TOOL: true } satisfies Values<T.Role>],
  ['ToolCallStatus', { UNSPECIFIED: true, SUCCESS: true, FAILURE: true, TIMEOUT: true, PENDING: true, UNKNOWN: true } satisfies Values<T.ToolCallStatus>],
  ['Outcome', { UNSPECIFIED: true, IN_PROGRESS: true, RESOLVED: true, UNRESOLVED_FOLLOW_UP: true, COMPLETED: true } satisfies Values<T.Outcome>],
  ['SummaryTrigger', {
    UNSPECIFIED: true, EVERY_N_TURNS: true, TOKEN_THRESHOLD: true, HANDOFF: true, IDLE_TIMEOUT: true, CLOSE: true, REQUESTED: true,
  } satisfies Values<T.SummaryTrigger>],
  ['ActionStatus', { UNSPECIFIED: true, PENDING: true, IN_PROGRESS: true, DONE: true } satisfies Values<T.ActionStatus>],
  ['ActionPriority', { UNSPECIFIED: true, HIGH: true, MEDIUM: true, LOW: true } satisfies Values<T.ActionPriority>],
  ['QuestionStatus', { UNSPECIFIED: true, UNANSWERED: true, PARTIALLY_ANSWERED: true } satisfies Values<T.QuestionStatus>],
  ['Severity', { UNSPECIFIED: true, BLOCKING: true, DEGRADED: true, WARNING: true } satisfies Values<T.Severity>],
  ['AuditKind', { UNSPECIFIED: true, SUMMARY_ATTEMPT: true, REVIEW_RESOLVED: true } satisfies Values<T.AuditKind>],
  ['ReviewStatus', { UNSPECIFIED: true, PENDING: true, APPROVED: true, REJECTED: true } satisfies Values<T.ReviewStatus>],
  ['SummaryFormat', { UNSPECIFIED: true, STRUCTURED: true, JSON: true, MARKDOWN: true } satisfies Values<T.SummaryFormat>],
  ['BundleSection', {
    UNSPECIFIED: true, HEADER: true, PENDING_ACTIONS: true, OPEN_QUESTIONS: true, DECISIONS: true, SUMMARY: true,
    KEY_FACTS: true, RECENT_TURNS: true, EARLIER_TURNS: true, CARRIED_ACTIONS: true, FACTS: true, EPISODES: true,
    RECALLED: true,
  } satisfies Values<T.BundleSection>],
  ['FactExtraction', { UNSPECIFIED: true, ENABLED: true, DISABLED: true } satisfies Values<T.FactExtraction>],
  ['FactOrigin', { UNSPECIFIED: true, CLIENT: true, EXTRACTED: true } satisfies Values<T.FactOrigin>],
  ['PutFactOutcome', { UNSPECIFIED: true, CREATED: true, SUPERSEDED: true, MERGED: true } satisfies Values<T.PutFactOutcome>],
  ['SearchKind', { UNSPECIFIED: true, TURN: true, FACT: true, EPISODE: true } satisfies Values<T.SearchKind>],
  ['BundleLayout', { UNSPECIFIED: true, STATE: true, REQUEST: true } satisfies Values<T.BundleLayout>],
];

const codec = new Codec(loadContract());

/** What one side has and the other lacks, for a readable failure. */
function difference(ours: string[], theirs: string[]): { onlyInTypesTs: string[]; onlyInProto: string[] } {
  return { onlyInTypesTs: ours.filter((x) => !theirs.includes(x)), onlyInProto: theirs.filter((x) => !ours.includes(x)) };
}

for (const [message, mirror] of MESSAGES) {
  test(`types.ts mirrors message mnemo.v1.${message}`, () => {
    const diff = difference(Object.keys(mirror), codec.fieldNames(`mnemo.v1.${message}`));
    assert.deepEqual(diff, { onlyInTypesTs: [], onlyInProto: [] });
  });
}

for (const [name, mirror] of ENUMS) {
  test(`types.ts mirrors enum mnemo.v1.${name}`, () => {
    const diff = difference(Object.keys(mirror), codec.enumValues(`mnemo.v1.${name}`));
    assert.deepEqual(diff, { onlyInTypesTs: [], onlyInProto: [] });
  });
}

test('types.ts has a union type for every enum of the contract', () => {
  const contractEnums = Object.entries(loadContract())
    .filter(([name, entry]) => name.startsWith('mnemo.') && (entry as { format?: string }).format?.includes('EnumDescriptorProto'))
    .map(([name]) => name.slice('mnemo.v1.'.length));
  assert.deepEqual(contractEnums.sort(), ENUMS.map(([name]) => name).sort());
});

test('the proto directory comes from the option, else MNEMO_PROTO_DIR, else the repository', () => {
  const repository = path.resolve(__dirname, '..', '..', '..', '..', 'proto');
  const saved = process.env.MNEMO_PROTO_DIR;
  try {
    delete process.env.MNEMO_PROTO_DIR;
    assert.equal(resolveProtoDir(), repository);
    process.env.MNEMO_PROTO_DIR = '/nonexistent/proto';
    assert.throws(() => resolveProtoDir(), /no mnemo\/v1\/memory_service\.proto under \/nonexistent\/proto \(from MNEMO_PROTO_DIR\)/);
    assert.throws(() => new MnemoClient('127.0.0.1:1'), /MNEMO_PROTO_DIR/);
    assert.equal(resolveProtoDir(repository), repository); // the option wins over the environment
    assert.throws(() => new MnemoClient('127.0.0.1:1', { protoDir: '/nonexistent' }), /from the protoDir option/);
  } finally {
    if (saved === undefined) delete process.env.MNEMO_PROTO_DIR;
    else process.env.MNEMO_PROTO_DIR = saved;
  }
});
