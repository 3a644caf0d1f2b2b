// The plain values MnemoClient takes and returns.
//
// Each interface mirrors one message of proto/mnemo/v1/ field for field, so the
// comments there document them: camelCase names (session_id -> sessionId), enum
// values without their prefix (ROLE_USER -> 'USER'), timestamps as Dates (null
// when unset), 64-bit integers as numbers. test/contract.test.ts fails when a
// message or enum of the contract and its mirror here differ. Types only: the
// conversion is codec.ts's, driven by the parsed .proto.

// Enums: every value of the proto enum, 'UNSPECIFIED' being its zero value.

/** mnemo.v1.SessionState */
export type SessionState = 'UNSPECIFIED' | 'ACTIVE' | 'IDLE' | 'CLOSED';
/** mnemo.v1.Encoding */
export type Encoding = 'UNSPECIFIED' | 'CL100K_BASE' | 'O200K_BASE';
/** mnemo.v1.RiskLevel */
export type RiskLevel = 'UNSPECIFIED' | 'NORMAL' | 'HIGH';
/** mnemo.v1.Role */
export type Role = 'UNSPECIFIED' | 'USER' | 'ASSISTANT' | 'SYSTEM' | 'TOOL';
/** mnemo.v1.ToolCallStatus */
export type ToolCallStatus = 'UNSPECIFIED' | 'SUCCESS' | 'FAILURE' | 'TIMEOUT' | 'PENDING' | 'UNKNOWN';
/** mnemo.v1.Outcome */
export type Outcome = 'UNSPECIFIED' | 'IN_PROGRESS' | 'RESOLVED' | 'UNRESOLVED_FOLLOW_UP' | 'COMPLETED';
/** mnemo.v1.SummaryTrigger */
export type SummaryTrigger = 'UNSPECIFIED' | 'EVERY_N_TURNS' | 'TOKEN_THRESHOLD' | 'HANDOFF' | 'IDLE_TIMEOUT' | 'CLOSE' | 'REQUESTED';
/** mnemo.v1.ActionStatus */
export type ActionStatus = 'UNSPECIFIED' | 'PENDING' | 'IN_PROGRESS' | 'DONE';
/** mnemo.v1.ActionPriority */
export type ActionPriority = 'UNSPECIFIED' | 'HIGH' | 'MEDIUM' | 'LOW';
/** mnemo.v1.QuestionStatus */
export type QuestionStatus = 'UNSPECIFIED' | 'UNANSWERED' | 'PARTIALLY_ANSWERED';
/** mnemo.v1.Severity */
export type Severity = 'UNSPECIFIED' | 'BLOCKING' | 'DEGRADED' | 'WARNING';
/** mnemo.v1.AuditKind */
export type AuditKind = 'UNSPECIFIED' | 'SUMMARY_ATTEMPT' | 'REVIEW_RESOLVED';
/** mnemo.v1.ReviewStatus */
export type ReviewStatus = 'UNSPECIFIED' | 'PENDING' | 'APPROVED' | 'REJECTED';
/** mnemo.v1.SummaryFormat */
export type SummaryFormat = 'UNSPECIFIED' | 'STRUCTURED' | 'JSON' | 'MARKDOWN';
/** mnemo.v1.BundleSection */
export type BundleSection =
  | 'UNSPECIFIED'
  | 'HEADER'
  | 'PENDING_ACTIONS'
  | 'OPEN_QUESTIONS'
  | 'DECISIONS'
  | 'SUMMARY'
  | 'KEY_FACTS'
  | 'RECENT_TURNS'
  | 'EARLIER_TURNS'
  | 'CARRIED_ACTIONS'
  | 'FACTS'
  | 'EPISODES'
  | 'RECALLED';
/** mnemo.v1.FactExtraction */
export type FactExtraction = 'UNSPECIFIED' | 'ENABLED' | 'DISABLED';
/** mnemo.v1.FactOrigin */
export type FactOrigin = 'UNSPECIFIED' | 'CLIENT' | 'EXTRACTED';
/** mnemo.v1.PutFactOutcome */
export type PutFactOutcome = 'UNSPECIFIED' | 'CREATED' | 'SUPERSEDED' | 'MERGED';
/** mnemo.v1.SearchKind */
export type SearchKind = 'UNSPECIFIED' | 'TURN' | 'FACT' | 'EPISODE';

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

// Sessions and turns (session.proto).

/** mnemo.v1.SessionSettings: as returned, with the server's defaults filled in. */
export interface SessionSettings {
  summaryEveryTurns: number;
  contextLimitTokens: number;
  idleTimeoutSeconds: number;
  encoding: Encoding;
  riskLevel: RiskLevel;
  factExtraction: FactExtraction;
}

/** mnemo.v1.Session */
export interface Session {
  namespace: string;
  sessionId: string;
  subjectId: string;
  title: string;
  metadata: Record<string, string>;
  settings: SessionSettings;
  state: SessionState;
  turnCount: number;
  nextSeq: number;
  totalTokens: number;
  createTime: Date | null;
  updateTime: Date | null;
  summaryVersion: number;
  summarizedThroughSeq: number;
  ownerAgent: string;
  leaseEpoch: number;
  lastActiveTime: Date | null;
  /** Set by getSession and listSessions when a retention policy removed the session's first turns. */
  turnsRemoved: TurnsRemoved | null;
}

/** mnemo.v1.ToolCall as stored; `argumentsJson` is the exact text that was sent. */
export interface ToolCall {
  toolName: string;
  argumentsJson: string;
  result: string;
  status: ToolCallStatus;
  errorDetails: string;
}

/** mnemo.v1.Turn: a stored turn. */
export interface Turn {
  seq: number;
  role: Role;
  speaker: string;
  content: string;
  clientTime: Date | null;
  serverTime: Date | null;
  toolCall: ToolCall | null;
  metadata: Record<string, string>;
  tokenCount: number;
}

/** mnemo.v1.ToolCall as sent: only `toolName` is required. */
export interface NewToolCall {
  toolName: string;
  /** JSON text, stored verbatim; must parse as JSON when non-empty. */
  argumentsJson?: string;
  result?: string;
  /** Unset is stored as 'UNKNOWN'. */
  status?: Exclude<ToolCallStatus, 'UNSPECIFIED'>;
  errorDetails?: string;
}

/** mnemo.v1.NewTurn: a turn to append. */
export interface NewTurn {
  role: Exclude<Role, 'UNSPECIFIED'>;
  speaker?: string;
  content?: string;
  clientTime?: Date;
  toolCall?: NewToolCall;
  metadata?: Record<string, string>;
}

/** mnemo.v1.AppendTurnsResponse: what an append wrote (or, `replayed`, what an earlier one with its key wrote). */
export interface AppendResult {
  firstSeq: number;
  lastSeq: number;
  tokenCounts: number[];
  totalTokens: number;
  replayed: boolean;
}

// Summaries, audit log and review queue (summary.proto).

/** mnemo.v1.Decision */
export interface Decision {
  decision: string;
  rationale: string;
  agreedBy: string[];
  evidenceSeqs: number[];
  requiresHumanReview: boolean;
}

/** mnemo.v1.PendingAction */
export interface PendingAction {
  action: string;
  owner: string;
  deadline: string;
  status: ActionStatus;
  dependsOn: string[];
  priority: ActionPriority;
  evidenceSeqs: number[];
  requiresHumanReview: boolean;
}

/** mnemo.v1.OpenQuestion */
export interface OpenQuestion {
  question: string;
  askedBy: string;
  status: QuestionStatus;
  evidenceSeqs: number[];
}

/** mnemo.v1.KeyFact */
export interface KeyFact {
  fact: string;
  statedBy: string;
  evidenceSeqs: number[];
}

/** mnemo.v1.ToolCallEntry */
export interface ToolCallEntry {
  toolName: string;
  argumentsJson: string;
  resultSummary: string;
  status: ToolCallStatus;
  errorDetails: string;
  seq: number;
  requiresHumanReview: boolean;
}

/** mnemo.v1.Artifact */
export interface Artifact {
  artifactId: string;
  sourceTool: string;
  summary: string;
  seq: number;
  expirySeq: number;
}

/** mnemo.v1.ContextHealth */
export interface ContextHealth {
  staleArtifacts: string[];
  missingDependencies: string[];
  budgetRemainingTokens: number;
}

/** mnemo.v1.Anomaly */
export interface Anomaly {
  description: string;
  severity: Severity;
  seq: number;
}

/** mnemo.v1.Conflict */
export interface Conflict {
  description: string;
  conflictingSeqs: number[];
}

/** mnemo.v1.Participant */
export interface Participant {
  speaker: string;
  role: Role;
}

/** mnemo.v1.TopicSegment */
export interface TopicSegment {
  firstSeq: number;
  lastSeq: number;
  topic: string;
  keyPoints: string[];
  evidenceSeqs: number[];
}

/** mnemo.v1.SessionSummary: the structured running summary of a session. */
export interface SessionSummary {
  userIntent: string;
  topic: string;
  outcome: Outcome;
  decisions: Decision[];
  pendingActions: PendingAction[];
  openQuestions: OpenQuestion[];
  keyFacts: KeyFact[];
  toolCalls: ToolCallEntry[];
  artifacts: Artifact[];
  contextHealth: ContextHealth | null;
  truncated: string;
  errorsAndAnomalies: Anomaly[];
  unresolvedConflicts: Conflict[];
  participants: Participant[];
  topics: TopicSegment[];
  prose: string;
  coversThroughSeq: number;
  version: number;
  trigger: SummaryTrigger;
  createdAt: Date | null;
  durationSeconds: number;
  totalTurns: number;
  requiresHumanReview: boolean;
  userIntentSeq: number;
}

/** mnemo.v1.SummaryInfo: metadata of one stored summary version. */
export interface SummaryInfo {
  version: number;
  coversThroughSeq: number;
  trigger: SummaryTrigger;
  createTime: Date | null;
  decisions: number;
  pendingActions: number;
  openQuestions: number;
}

/** mnemo.v1.AuditRecord: a summary attempt or a review resolution. */
export interface AuditRecord {
  auditSeq: number;
  kind: AuditKind;
  createTime: Date | null;
  summaryVersion: number;
  trigger: SummaryTrigger;
  coversThroughSeq: number;
  preSummaryTokens: number;
  postSummaryTokens: number;
  compressionRatio: number;
  summarizer: string;
  coveredTurnsSha256: string;
  validationPassed: boolean;
  validationErrors: string[];
  decisions: number;
  pendingActions: number;
  openQuestions: number;
  healthFlags: string[];
  reviewId: string;
  reviewStatus: ReviewStatus;
  reviewer: string;
  comment: string;
  /** The name of the API key that resolved it ("anyone" without auth); unlike `reviewer`, not the caller's choice. */
  reviewerKey: string;
}

/** mnemo.v1.ReviewItem: a high-risk summary waiting for (or having had) human review. */
export interface ReviewItem {
  reviewId: string;
  namespace: string;
  sessionId: string;
  summaryVersion: number;
  items: string[];
  status: ReviewStatus;
  reviewer: string;
  comment: string;
  createTime: Date | null;
  resolveTime: Date | null;
  /** The name of the API key that resolved it (see AuditRecord.reviewerKey). */
  reviewerKey: string;
}

// Context bundles, handoff and watching (context.proto).

/** mnemo.v1.SeqRange: an inclusive range of turn seqs. */
export interface SeqRange {
  firstSeq: number;
  lastSeq: number;
}

/** mnemo.v1.ManifestEntry */
export interface ManifestEntry {
  section: BundleSection;
  available: number;
  included: number;
  shortened: number;
  omitted: number;
  includedSeqs: SeqRange[];
  shortenedSeqs: SeqRange[];
  omittedSeqs: SeqRange[];
  tokens: number;
}

/** mnemo.v1.BundleManifest */
export interface BundleManifest {
  sections: ManifestEntry[];
  summaryVersion: number;
  summarized: SeqRange | null;
  complete: boolean;
  /** Memory retrieved for the request that did not fit. */
  recalledLeftOut: RecalledRef[];
  /** True when the whole session fitted: the bundle is its transcript, verbatim, under a one-line header. */
  transcript: boolean;
  /** Set when a retention policy removed the session's first turns. */
  turnsRemoved: TurnsRemoved | null;
  /** How the budget was split: STATE (no query) or REQUEST (a query); bundles of one layout share their beginning. */
  layout: BundleLayout;
}

/** mnemo.v1.BundleLayout */
export type BundleLayout = 'UNSPECIFIED' | 'STATE' | 'REQUEST';

/** mnemo.v1.TurnsRemoved: turns a retention policy removed from the start of a closed session (seqs 1..throughSeq). */
export interface TurnsRemoved {
  throughSeq: number;
  count: number;
  removeTime: Date | null;
}

/** mnemo.v1.RecalledRef: retrieved memory that did not fit (a turn, an episode's session or a fact). */
export interface RecalledRef {
  /** The session of a turn or episode; empty for a fact. */
  sessionId: string;
  /** The seq of a turn; 0 otherwise. */
  seq: number;
  /** The id of a fact; empty otherwise. */
  factId: string;
  /** Its rank among what was retrieved, from 1. */
  rank: number;
}

/**
 * mnemo.v1.RecalledMemory: memory retrieved for the bundle's request, verbatim:
 * turns of this or an earlier session of the subject, a current fact or an episode.
 */
export interface RecalledMemory {
  /** The turns' or the episode's session; empty for a fact. */
  sessionId: string;
  /** The turn that matched and, where it fitted, the neighbour completing its question/answer pair, oldest first. */
  turns: Turn[];
  /** The seq of the turn that matched; 0 for a fact or an episode. */
  hitSeq: number;
  fact: Fact | null;
  episode: Episode | null;
  /** Its rank among what was retrieved, from 1. */
  rank: number;
}

/** mnemo.v1.CompressedTurn */
export interface CompressedTurn {
  seq: number;
  role: Role;
  speaker: string;
  text: string;
  shortened: boolean;
}

/** mnemo.v1.ContextBundle: what an agent needs to continue a session, within a token budget. */
export interface ContextBundle {
  namespace: string;
  sessionId: string;
  subjectId: string;
  state: SessionState;
  ownerAgent: string;
  leaseEpoch: number;
  asOfSeq: number;
  encoding: Encoding;
  budgetTokens: number;
  tokenCount: number;
  renderedText: string;
  userIntent: string;
  prose: string;
  pendingActions: PendingAction[];
  openQuestions: OpenQuestion[];
  decisions: Decision[];
  keyFacts: KeyFact[];
  recentTurns: Turn[];
  earlierTurns: CompressedTurn[];
  manifest: BundleManifest | null;
  /** Pending actions of the subject's past sessions that nobody marked done. */
  carriedActions: CarriedAction[];
  /** The subject's current facts that fit. */
  facts: Fact[];
  /** The subject's past sessions that fit. */
  episodes: Episode[];
  /** Memory retrieved for the request (its query; none without one), best first. */
  recalled: RecalledMemory[];
  /**
   * `renderedText` runs from the most stable to the most volatile: (1) header, the subject's
   * memory and the summary (the same until a fold or a change of the subject's memory), (2) the
   * turns since the fold, append-only, (3) what the request decided. Where parts 1 and 2 end, in
   * tokens of `encoding` (exact) and in UTF-8 bytes; `bundleParts` and `anthropicSystem` use them.
   */
  stableEndTokens: number;
  stableEndBytes: number;
  logEndTokens: number;
  logEndBytes: number;
}

/** mnemo.v1.HandoffResponse */
export interface HandoffResult {
  session: Session;
  leaseEpoch: number;
  eventSeq: number;
  /** null when validation refused the handoff summary (see the audit log). */
  summary: SessionSummary | null;
  bundle: ContextBundle | null;
  /** True when this answers a retry with the same idempotencyKey: nothing was written. */
  replayed: boolean;
}

/** mnemo.v1.SummaryWritten */
export interface SummaryWritten {
  version: number;
  coversThroughSeq: number;
  trigger: SummaryTrigger;
}

/** mnemo.v1.HandoffEvent */
export interface HandoffEvent {
  fromAgent: string;
  toAgent: string;
  reason: string;
  leaseEpoch: number;
  seq: number;
}

/** mnemo.v1.StateChanged */
export interface StateChanged {
  state: SessionState;
  atSeq: number;
}

/**
 * mnemo.v1.WatchSessionResponse: one event of a watched session. The proto's
 * oneof `event` becomes the discriminant: `event` names the one field present.
 */
export type WatchEvent =
  | { event: 'turn'; turn: Turn }
  | { event: 'summaryWritten'; summaryWritten: SummaryWritten }
  | { event: 'handoff'; handoff: HandoffEvent }
  | { event: 'stateChanged'; stateChanged: StateChanged };

// Long-term memory: facts, episodes, carried actions and search (knowledge.proto).

/** mnemo.v1.FactSource: where a fact was stated (`seq` 0: the session as a whole). */
export interface FactSource {
  sessionId: string;
  seq: number;
  /** Set by getFact and listFacts when a retention policy removed the cited turn. */
  turnRemoved: boolean;
}

/** mnemo.v1.Fact: a fact about a subject; a new version with the same key supersedes it. */
export interface Fact {
  namespace: string;
  factId: string;
  subjectId: string;
  /** '' for an unkeyed fact. */
  key: string;
  text: string;
  sources: FactSource[];
  tags: string[];
  origin: FactOrigin;
  /** The version this one replaced; '' for a first version. */
  supersedes: string;
  /** The version that replaced this one; '' while it is current. */
  supersededBy: string;
  createTime: Date | null;
  updateTime: Date | null;
}

/** mnemo.v1.PutFactResponse: what putFact did. */
export interface PutFactResult {
  /** The fact as stored now (for MERGED, the existing fact). */
  fact: Fact;
  outcome: PutFactOutcome;
  /** For SUPERSEDED: the previous version, now with `supersededBy` set; else null. */
  superseded: Fact | null;
}

/** mnemo.v1.Episode: a past session of a subject, as its final summary left it. */
export interface Episode {
  namespace: string;
  /** The session id (one episode per session). */
  episodeId: string;
  subjectId: string;
  sessionId: string;
  startTime: Date | null;
  endTime: Date | null;
  topic: string;
  outcome: Outcome;
  prose: string;
  userIntent: string;
  decisions: Decision[];
  /** The actions still pending (those marked done since are left out). */
  pendingActions: PendingAction[];
  summaryVersion: number;
  lastSeq: number;
  /** CLOSED or IDLE. */
  endedAs: SessionState;
  /** Set when a retention policy removed turns of the episode's session. */
  turnsRemoved: TurnsRemoved | null;
}

/** mnemo.v1.PendingActionRef: a pending action, named by its session and the seq of the turn that raised it. */
export interface PendingActionRef {
  sessionId: string;
  actionSeq: number;
}

/** mnemo.v1.CarriedAction: a pending action carried over from a past session of the subject. */
export interface CarriedAction {
  /** Pass it to updatePendingAction. */
  ref: PendingActionRef;
  action: PendingAction;
}

/** mnemo.v1.SearchHit: one search result; which ids are set depends on `kind`. */
export interface SearchHit {
  kind: SearchKind;
  /** BM25 relevance; comparable within one response only. */
  score: number;
  snippet: string;
  subjectId: string;
  /** TURN and EPISODE: the session; FACT: the session it was extracted from. */
  sessionId: string;
  /** TURN: the turn's seq; FACT: the turn it was extracted from. */
  seq: number;
  factId: string;
  episodeId: string;
  /** TURN: who produced it. */
  role: Role;
}

/** mnemo.v1.SearchResponse */
export interface SearchResult {
  /** Best first. */
  hits: SearchHit[];
  /** Writes not yet in the index when the search ran (0: up to date). Deleted sessions and facts never appear. */
  indexLag: number;
}

/** One page of a paginated list; pass `nextPageToken` as `pageToken` for the next ('' = no more). */
export interface Page<T> {
  items: T[];
  nextPageToken: string;
}
