// MnemoClient: a small promise-based wrapper over mnemo's gRPC API.
//
// Methods take and return the plain values of types.ts and reject with
// MnemoError. Every attempt has a deadline. Only calls that are safe to repeat
// are retried, with exponential backoff and jitter, on UNAVAILABLE: reads
// (searches included), appends that carry an idempotency key (the server
// replays those instead of writing twice), fact puts (a repeated put merges
// into the fact the first one stored) and pending-action updates (setting a
// status twice changes nothing more). Everything else, fact deletions
// included, is tried once, so a lost answer surfaces as an error instead of a
// duplicate write.
//
// Every typed method is a few lines over `unary` (one RPC), `page`/`pages` (a
// paginated list) or `serverStream`: option names are the request's field
// names, so they pass through to the request, and codec.ts converts both ways
// from the .proto.

import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { Codec } from './codec';
import { errorFromGrpc } from './errors';
import { SERVICE_NAME, loadContract } from './proto';
import type {
  ActionStatus,
  AppendResult,
  AuditRecord,
  ContextBundle,
  Encoding,
  Episode,
  Fact,
  HandoffResult,
  HealthStatus,
  NewTurn,
  Page,
  PendingAction,
  PendingActionRef,
  PutFactResult,
  ReviewItem,
  SearchKind,
  SearchResult,
  Session,
  SessionSettings,
  SessionState,
  SessionSummary,
  SummaryInfo,
  Turn,
  WatchEvent,
} from './types';

const PACKAGE = SERVICE_NAME.slice(0, SERVICE_NAME.lastIndexOf('.'));
const DEFAULT_ADDRESS = '127.0.0.1:50051';
const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_RETRIES = 3;
const BACKOFF_BASE_MS = 100;
const BACKOFF_MAX_MS = 2_000;
/**
 * Set on the response of every write search can see; sent back on a read,
 * the read sees that write (or fails with UNAVAILABLE naming the lag).
 */
export const CONSISTENCY_TOKEN_HEADER = 'mnemo-consistency-token';
const READS_AFTER_TOKEN = new Set(['Search', 'GetContextBundle']);
// The server bounds a waiting Summarize by its request timeout (30 s by
// default); the client waits a little longer so the server's answer wins.
const SUMMARIZE_WAIT_MS = 35_000;

/** TLS settings. PEM values are the PEM text, its bytes, or the path of a PEM file. */
export interface TlsOptions {
  /** CA certificates to trust instead of the system's. */
  rootCa?: string | Buffer;
  /** Client certificate chain for mutual TLS (with `clientKey`). */
  clientCert?: string | Buffer;
  /** Private key of `clientCert`. */
  clientKey?: string | Buffer;
}

export interface MnemoClientOptions {
  /** Sent as `authorization: Bearer <apiKey>` on every call. */
  apiKey?: string;
  /** TLS (`true`: the system's trust store). An `https://` address implies it. */
  tls?: boolean | TlsOptions;
  /** Deadline of one attempt, in milliseconds (10 s); every method takes a `timeoutMs` override. */
  timeoutMs?: number;
  /** How often an idempotent call is repeated after UNAVAILABLE (3). */
  retries?: number;
  /** The directory holding mnemo/v1/*.proto (default: $MNEMO_PROTO_DIR, else the repository's proto/). */
  protoDir?: string;
  /** Passed to grpc-js, e.g. `{ 'grpc.max_receive_message_length': 8 << 20 }`. */
  channelOptions?: grpc.ChannelOptions;
}

/** Options every method takes. */
export interface CallOptions {
  /** Deadline of each attempt of this call, in milliseconds. */
  timeoutMs?: number;
}

export interface CreateSessionOptions extends CallOptions {
  /** Empty or absent: the server generates a ULID. */
  sessionId?: string;
  subjectId?: string;
  title?: string;
  metadata?: Record<string, string>;
  /** Absent or zero fields take the server's defaults. */
  settings?: Partial<SessionSettings>;
  /** The agent that owns the session at first. */
  ownerAgent?: string;
}

export interface ListSessionsOptions extends CallOptions {
  subjectId?: string;
  /** Only sessions in this state; absent: all. */
  state?: SessionState;
  pageSize?: number;
}

export interface AppendTurnsOptions extends CallOptions {
  /** A repeat with the same key is replayed, not written again; makes the call retryable. */
  idempotencyKey?: string;
  /** Append only if the session's nextSeq is this; else ABORTED. */
  expectedNextSeq?: number;
  /** Fencing: append only if this is the session's leaseEpoch; else FAILED_PRECONDITION naming the owner. */
  leaseEpoch?: number;
}

export interface ListTurnsOptions extends CallOptions {
  /** First seq (0: from the start). */
  fromSeq?: number;
  /** Last seq, inclusive (0: through the newest). */
  toSeq?: number;
  pageSize?: number;
}

export interface SummarizeOptions extends CallOptions {
  /** Wait for the summary to be written and return it (default true). */
  wait?: boolean;
}

export interface GetSummaryOptions extends CallOptions {
  /** A version; 0 or absent: the latest. */
  version?: number;
}

export interface ListReviewItemsOptions extends CallOptions {
  includeResolved?: boolean;
  pageSize?: number;
}

export interface RemoveLastTurnOptions extends CallOptions {
  /** Remove only if the last turn has this seq (ABORTED otherwise). */
  expectedLastSeq?: number;
  /** Fencing: the session's current lease epoch. */
  leaseEpoch?: number;
}

/** What RemoveLastTurn removed. */
export interface RemovedTurn {
  /** The removed turn; null when the session had none. */
  turn: Turn | null;
  /** The session afterwards. */
  session: Session;
  /** The summary version refolded because the latest one covered the turn; 0 when none. */
  refoldedSummaryVersion: number;
}

export interface ContextBundleOptions extends CallOptions {
  /** Tokenizer to measure with; absent: the session's. */
  encoding?: Encoding;
  /**
   * What the agent is about to do: memory bearing on it is retrieved from the session's older turns and the
   * subject's other sessions, facts and episodes, and items sharing words with it are kept first when a section is cut.
   */
  query?: string;
  /** The agent that will read the bundle; its own pending actions are kept first. */
  agentId?: string;
  /** Question/answer interactions kept verbatim (absent: 8). */
  recentInteractions?: number;
  /** Leave out memory retrieved for the request (the RECALLED section). */
  skipRecall?: boolean;
}

export interface HandoffOptions extends CallOptions {
  /** The current owner (any agent when the session is unclaimed). */
  fromAgent: string;
  /** The new owner. */
  toAgent: string;
  /** The session's lease epoch as the caller knows it (Session.leaseEpoch). */
  leaseEpoch: number;
  /** Recorded in the handoff event turn. */
  reason?: string;
  /** Budget of the bundle returned for `toAgent` (absent: 8000 or the session's context limit). */
  budgetTokens?: number;
  /**
   * Makes retries safe: a repeat of a handoff that happened returns its outcome
   * with `replayed: true` and writes nothing. With a key the call is retried on
   * UNAVAILABLE; without one it is not.
   */
  idempotencyKey?: string;
}

export interface WatchOptions {
  /** Replay turns from this seq before the live events (absent or 0: live events only). */
  fromSeq?: number;
  /** Ends the watch: iteration stops quietly. Breaking out of the loop ends it too. */
  signal?: AbortSignal;
  /** A deadline for the whole watch, in milliseconds (absent: none). */
  timeoutMs?: number;
}

export interface PageOptions extends CallOptions {
  pageSize?: number;
}

export interface PutFactOptions extends CallOptions {
  /** `[a-z0-9_.-]`, 1 to 128 characters: a fact with the key of a current fact supersedes it. */
  key?: string;
  /** Where it was stated: a session of the namespace (NOT_FOUND otherwise) and one of its turns (`seq` absent or 0: the whole session). */
  source?: { sessionId: string; seq?: number };
  /** At most 16, each 1 to 64 characters of `[A-Za-z0-9_.:-]`. */
  tags?: string[];
}

export interface ListFactsOptions extends PageOptions {
  /** Only facts about this subject; absent: every subject of the namespace. */
  subjectId?: string;
  /** Only facts with this tag. */
  tag?: string;
  /** Only facts with this key. */
  key?: string;
  /** Superseded versions too; by default only current facts. */
  includeHistory?: boolean;
}

export interface SearchOptions extends CallOptions {
  /** Only this subject's turns, facts and episodes. */
  subjectId?: string;
  /** Only this session's turns (and its episode). */
  sessionId?: string;
  /** What to return; absent or empty: every kind. */
  kinds?: Exclude<SearchKind, 'UNSPECIFIED'>[];
  /** Most hits (absent: 10; at most 100). */
  limit?: number;
}

/** A `pageToken` from the previous page's `nextPageToken`. */
export type WithPageToken<T> = T & { pageToken?: string };

interface Invocation {
  idempotent: boolean;
  timeoutMs?: number | undefined;
}

type WireObject = Record<string, unknown>;

/**
 * A connection to a mnemo daemon.
 *
 * `address` is `host:port`; an `http://` prefix is accepted, `https://`
 * implies TLS. Call `close()` when done. `list*` methods return one page;
 * `iter*` methods return async iterables that fetch page after page, so their
 * errors surface while iterating.
 */
export class MnemoClient {
  readonly address: string;
  readonly timeoutMs: number;
  readonly retries: number;
  private readonly codec: Codec;
  private readonly methods: grpc.ServiceDefinition;
  private readonly channel: grpc.Client;
  private readonly metadata: grpc.Metadata;
  /**
   * The consistency token of this client's last write: sent with every
   * search and bundle, so they see that write whichever daemon answers (a
   * single daemon already answers reads after its own writes).
   */
  consistencyToken: string | undefined;

  constructor(address: string = DEFAULT_ADDRESS, options: MnemoClientOptions = {}) {
    let tls = options.tls ?? false;
    if (address.startsWith('https://')) {
      address = address.slice('https://'.length);
      tls = tls === false ? true : tls;
    } else if (address.startsWith('http://')) {
      address = address.slice('http://'.length);
    }
    address = address.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retries = options.retries ?? DEFAULT_RETRIES;
    if (!(this.timeoutMs > 0)) throw new RangeError('timeoutMs must be positive');
    if (!Number.isInteger(this.retries) || this.retries < 0) throw new RangeError('retries must be an integer >= 0');
    this.address = address;

    const definition = loadContract(options.protoDir);
    this.codec = new Codec(definition);
    this.methods = definition[SERVICE_NAME] as grpc.ServiceDefinition;
    this.channel = new grpc.Client(address, channelCredentials(tls), options.channelOptions ?? {});
    this.metadata = new grpc.Metadata();
    if (options.apiKey) this.metadata.set('authorization', `Bearer ${options.apiKey}`);
  }

  /** Closes the channel; calls in flight are cancelled. */
  close(): void {
    this.channel.close();
  }

  // Health

  /** The standard gRPC health check: '' for the whole daemon, or a service name such as 'mnemo.v1.MemoryService'. */
  async health(service = '', options: CallOptions = {}): Promise<HealthStatus> {
    const check = healthService.Check as grpc.MethodDefinition<{ service: string }, { status: HealthStatus }>;
    const response = await this.withRetries(true, () => this.once(check, { service }, options.timeoutMs));
    return response.status;
  }

  // Sessions

  /** Starts a session; the server generates a ULID when `sessionId` is absent. */
  async createSession(namespace: string, options: CreateSessionOptions = {}): Promise<Session> {
    const { timeoutMs, ...fields } = options;
    const response = await this.unary('CreateSession', { namespace, ...fields }, { idempotent: false, timeoutMs });
    return response.session as Session;
  }

  /** One session with its counters. */
  async getSession(namespace: string, sessionId: string, options: CallOptions = {}): Promise<Session> {
    const response = await this.unary('GetSession', { namespace, sessionId }, { idempotent: true, timeoutMs: options.timeoutMs });
    return response.session as Session;
  }

  /** One page of the namespace's sessions in id order, optionally by subject and state. */
  listSessions(namespace: string, options: WithPageToken<ListSessionsOptions> = {}): Promise<Page<Session>> {
    return this.page('ListSessions', 'sessions', { namespace }, options);
  }

  /** Every session of the namespace in id order, fetched page by page. */
  iterSessions(namespace: string, options: ListSessionsOptions = {}): AsyncIterable<Session> {
    return this.pages('ListSessions', 'sessions', { namespace }, options);
  }

  /** Closes a session (readable, no more appends); closing a closed session returns it unchanged. */
  async closeSession(namespace: string, sessionId: string, options: CallOptions = {}): Promise<Session> {
    const response = await this.unary('CloseSession', { namespace, sessionId }, { idempotent: false, timeoutMs: options.timeoutMs });
    return response.session as Session;
  }

  /** Deletes a session with every turn; resolves to how many turns were removed. */
  async deleteSession(namespace: string, sessionId: string, options: CallOptions = {}): Promise<number> {
    const response = await this.unary('DeleteSession', { namespace, sessionId }, { idempotent: false, timeoutMs: options.timeoutMs });
    return response.deletedTurns as number;
  }

  // Turns

  /**
   * Appends turns atomically; resolves once they are durable. A turn or
   * option the contract does not know throws TypeError before anything is sent.
   */
  async appendTurns(namespace: string, sessionId: string, turns: NewTurn[], options: AppendTurnsOptions = {}): Promise<AppendResult> {
    const { timeoutMs, ...fields } = options;
    const idempotent = Boolean(fields.idempotencyKey);
    return (await this.unary('AppendTurns', { namespace, sessionId, turns, ...fields }, { idempotent, timeoutMs })) as unknown as AppendResult;
  }

  /** One page of turns, oldest first, within `fromSeq`..`toSeq`. */
  listTurns(namespace: string, sessionId: string, options: WithPageToken<ListTurnsOptions> = {}): Promise<Page<Turn>> {
    return this.page('ListTurns', 'turns', { namespace, sessionId }, options);
  }

  /** Every turn within `fromSeq`..`toSeq`, oldest first, fetched page by page. */
  iterTurns(namespace: string, sessionId: string, options: ListTurnsOptions = {}): AsyncIterable<Turn> {
    return this.pages('ListTurns', 'turns', { namespace, sessionId }, options);
  }

  /**
   * Removes the session's last turn atomically and returns it (null when it has none): concurrent
   * calls each remove a different turn, and the seq goes to the next append. `expectedLastSeq`
   * makes it conditional (ABORTED otherwise), `leaseEpoch` fences as for appends. A summary that
   * covered the turn is refolded. Retried only with `expectedLastSeq` (a retry would remove another turn).
   */
  async removeLastTurn(namespace: string, sessionId: string, options: RemoveLastTurnOptions = {}): Promise<RemovedTurn> {
    const { timeoutMs, ...fields } = options;
    const idempotent = Boolean(fields.expectedLastSeq);
    const r = (await this.unary('RemoveLastTurn', { namespace, sessionId, ...fields }, { idempotent, timeoutMs })) as {
      turn: Turn | null;
      session: Session;
      refoldedSummaryVersion: number;
    };
    return { turn: r.turn ?? null, session: r.session, refoldedSummaryVersion: r.refoldedSummaryVersion };
  }

  // Summaries

  /**
   * Folds the turns not yet summarized into a new summary version. With
   * `wait` (the default) resolves to the stored summary; without, to null once
   * the work is queued (or to the latest summary when no turn was new).
   */
  async summarize(namespace: string, sessionId: string, options: SummarizeOptions = {}): Promise<SessionSummary | null> {
    const { timeoutMs, wait = true } = options;
    const deadline = timeoutMs ?? (wait ? Math.max(this.timeoutMs, SUMMARIZE_WAIT_MS) : undefined);
    const response = await this.unary('Summarize', { namespace, sessionId, wait }, { idempotent: false, timeoutMs: deadline });
    return response.summary as SessionSummary | null;
  }

  /** The latest summary (or `version`); rejects with NOT_FOUND when there is none yet. */
  getSummary(namespace: string, sessionId: string, options?: GetSummaryOptions & { format?: 'STRUCTURED' }): Promise<SessionSummary>;
  /** The latest summary (or `version`) rendered by the server as JSON or Markdown text. */
  getSummary(namespace: string, sessionId: string, options: GetSummaryOptions & { format: 'JSON' | 'MARKDOWN' }): Promise<string>;
  async getSummary(
    namespace: string,
    sessionId: string,
    options: GetSummaryOptions & { format?: 'STRUCTURED' | 'JSON' | 'MARKDOWN' } = {},
  ): Promise<SessionSummary | string> {
    const { timeoutMs, format = 'STRUCTURED', ...fields } = options;
    const response = await this.unary('GetSummary', { namespace, sessionId, format, ...fields }, { idempotent: true, timeoutMs });
    return format === 'STRUCTURED' ? (response.summary as SessionSummary) : (response.rendered as string);
  }

  /** One page of the session's summary versions, newest first. */
  listSummaries(namespace: string, sessionId: string, options: WithPageToken<PageOptions> = {}): Promise<Page<SummaryInfo>> {
    return this.page('ListSummaries', 'summaries', { namespace, sessionId }, options);
  }

  /** Every summary version of the session, newest first. */
  iterSummaries(namespace: string, sessionId: string, options: PageOptions = {}): AsyncIterable<SummaryInfo> {
    return this.pages('ListSummaries', 'summaries', { namespace, sessionId }, options);
  }

  /** One page of the session's audit log, oldest first (summary attempts and review resolutions). */
  getAuditLog(namespace: string, sessionId: string, options: WithPageToken<PageOptions> = {}): Promise<Page<AuditRecord>> {
    return this.page('GetAuditLog', 'records', { namespace, sessionId }, options);
  }

  /** The session's whole audit log, oldest first. */
  iterAuditLog(namespace: string, sessionId: string, options: PageOptions = {}): AsyncIterable<AuditRecord> {
    return this.pages('GetAuditLog', 'records', { namespace, sessionId }, options);
  }

  /** One page of the namespace's review queue, oldest first (pending items unless `includeResolved`). */
  listReviewItems(namespace: string, options: WithPageToken<ListReviewItemsOptions> = {}): Promise<Page<ReviewItem>> {
    return this.page('ListReviewItems', 'items', { namespace }, options);
  }

  /** The namespace's whole review queue, oldest first. */
  iterReviewItems(namespace: string, options: ListReviewItemsOptions = {}): AsyncIterable<ReviewItem> {
    return this.pages('ListReviewItems', 'items', { namespace }, options);
  }

  /** Approves or rejects a review item; FAILED_PRECONDITION if it is already resolved. */
  async resolveReviewItem(
    namespace: string,
    reviewId: string,
    status: 'APPROVED' | 'REJECTED',
    reviewer: string,
    options: CallOptions & { comment?: string } = {},
  ): Promise<ReviewItem> {
    const { timeoutMs, ...fields } = options;
    const request = { namespace, reviewId, status, reviewer, ...fields };
    const response = await this.unary('ResolveReviewItem', request, { idempotent: false, timeoutMs });
    return response.item as ReviewItem;
  }

  // Context bundles, handoff and watching

  /** The session rehydrated into a bundle whose `renderedText` fits `budgetTokens` (256 to 1000000). */
  async getContextBundle(namespace: string, sessionId: string, budgetTokens: number, options: ContextBundleOptions = {}): Promise<ContextBundle> {
    const { timeoutMs, ...fields } = options;
    const response = await this.unary('GetContextBundle', { namespace, sessionId, budgetTokens, ...fields }, { idempotent: true, timeoutMs });
    return response.bundle as ContextBundle;
  }

  /**
   * Passes the session from `fromAgent` to `toAgent`: a handoff event turn, a
   * new owner and lease epoch, a HANDOFF summary and the bundle for `toAgent`.
   * Tried once: after a lost answer, read the session to see whether it happened.
   */
  async handoff(namespace: string, sessionId: string, options: HandoffOptions): Promise<HandoffResult> {
    const { timeoutMs, ...fields } = options;
    const idempotent = Boolean(fields.idempotencyKey);
    return (await this.unary('Handoff', { namespace, sessionId, ...fields }, { idempotent, timeoutMs })) as unknown as HandoffResult;
  }

  /**
   * The session's events in order: turns replayed from `fromSeq`, then live
   * turns, summaries, handoffs and state changes. The watch starts when
   * iteration does and is never retried: a watcher that falls behind gets
   * RESOURCE_EXHAUSTED, whose `metadata.get('mnemo-resume-from-seq')` says
   * where to resume; a deleted session ends it with NOT_FOUND, a daemon
   * shutting down with UNAVAILABLE.
   */
  watchSession(namespace: string, sessionId: string, options: WatchOptions = {}): AsyncIterable<WatchEvent> {
    const { timeoutMs, signal, ...fields } = options;
    return this.serverStream<WatchEvent>('WatchSession', { namespace, sessionId, ...fields }, { timeoutMs, signal });
  }

  // Long-term memory: facts, episodes, pending actions and search

  /**
   * Stores a fact about `subjectId` (origin CLIENT); durable on return. With a
   * `key`, it supersedes the current fact with that key (outcome SUPERSEDED,
   * the old version in `superseded`); the same words as a current fact of the
   * subject (same key, or both unkeyed) merge into it (MERGED: sources and tags
   * added); else CREATED. Retried on UNAVAILABLE: a repeat of a put that was
   * stored merges into it, so after a lost answer the outcome says MERGED.
   */
  async putFact(namespace: string, subjectId: string, text: string, options: PutFactOptions = {}): Promise<PutFactResult> {
    const { timeoutMs, ...fields } = options;
    return (await this.unary('PutFact', { namespace, subjectId, text, ...fields }, { idempotent: true, timeoutMs })) as unknown as PutFactResult;
  }

  /** One fact version, current or superseded; NOT_FOUND if absent (or deleted). */
  async getFact(namespace: string, factId: string, options: CallOptions = {}): Promise<Fact> {
    const response = await this.unary('GetFact', { namespace, factId }, { idempotent: true, timeoutMs: options.timeoutMs });
    return response.fact as Fact;
  }

  /** One page of the namespace's (or a subject's) facts, oldest first; current only unless `includeHistory`. */
  listFacts(namespace: string, options: WithPageToken<ListFactsOptions> = {}): Promise<Page<Fact>> {
    return this.page('ListFacts', 'facts', { namespace }, options);
  }

  /** Every fact matching the filters, oldest first, fetched page by page. */
  iterFacts(namespace: string, options: ListFactsOptions = {}): AsyncIterable<Fact> {
    return this.pages('ListFacts', 'facts', { namespace }, options);
  }

  /**
   * Removes one fact version (at once from search results and bundles) and
   * resolves to it. Deleting the current version of a key leaves the key
   * without a current fact. Tried once: a repeat of a deletion that happened
   * gets NOT_FOUND.
   */
  async deleteFact(namespace: string, factId: string, options: CallOptions = {}): Promise<Fact> {
    const response = await this.unary('DeleteFact', { namespace, factId }, { idempotent: false, timeoutMs: options.timeoutMs });
    return response.fact as Fact;
  }

  /** One page of the subject's past sessions, newest first (one episode per session that closed or went idle with a summary). */
  listEpisodes(namespace: string, subjectId: string, options: WithPageToken<PageOptions> = {}): Promise<Page<Episode>> {
    return this.page('ListEpisodes', 'episodes', { namespace, subjectId }, options);
  }

  /** Every past session of the subject, newest first, fetched page by page. */
  iterEpisodes(namespace: string, subjectId: string, options: PageOptions = {}): AsyncIterable<Episode> {
    return this.pages('ListEpisodes', 'episodes', { namespace, subjectId }, options);
  }

  /**
   * Sets the status of a pending action of a session's latest summary (`ref`:
   * the session and the action's first evidence seq, e.g. a CarriedAction's
   * `ref`) and resolves to the action. A DONE action leaves the session's
   * bundles and stops carrying over to the subject's later sessions.
   * NOT_FOUND when the session or the action is unknown.
   */
  async updatePendingAction(
    namespace: string,
    ref: PendingActionRef,
    status: Exclude<ActionStatus, 'UNSPECIFIED'>,
    options: CallOptions = {},
  ): Promise<PendingAction> {
    const request = { namespace, ref: { sessionId: ref.sessionId, actionSeq: ref.actionSeq }, status };
    const response = await this.unary('UpdatePendingAction', request, { idempotent: true, timeoutMs: options.timeoutMs });
    return response.action as PendingAction;
  }

  /**
   * Ranks the namespace's turns, current facts and episodes against `query`
   * (plain words, BM25). The index follows writes shortly after they are
   * acknowledged: `indexLag` counts the writes it had not taken in yet.
   * Retried on UNAVAILABLE, which is also what a rebuilding index answers.
   */
  async search(namespace: string, query: string, options: SearchOptions = {}): Promise<SearchResult> {
    const { timeoutMs, ...fields } = options;
    return (await this.unary('Search', { namespace, query, ...fields }, { idempotent: true, timeoutMs })) as unknown as SearchResult;
  }

  // Any RPC

  /**
   * Calls any unary MemoryService RPC by name with the same conversions as the
   * typed methods (camelCase fields, short enum names, Dates): for an RPC of
   * a newer contract that has no typed method yet. Retried only when
   * `idempotent` is set.
   */
  call(rpc: string, request: WireObject, options: CallOptions & { idempotent?: boolean } = {}): Promise<WireObject> {
    return this.unary(rpc, request, { idempotent: options.idempotent ?? false, timeoutMs: options.timeoutMs });
  }

  // Plumbing

  /** One RPC: request converted and checked, retried when idempotent, response converted. */
  private async unary(rpc: string, request: WireObject, invocation: Invocation): Promise<WireObject> {
    const { method, requestType, responseType } = this.method(rpc, false);
    const wire = this.codec.toWire(requestType, request, rpc);
    const response = await this.withRetries(invocation.idempotent, () => this.once(method, wire, invocation.timeoutMs));
    return this.codec.fromWire(responseType, response) as WireObject;
  }

  /** A server-streaming RPC as an async iterable of converted messages; ending the iteration cancels the call. */
  private async *serverStream<T>(rpc: string, request: WireObject, options: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined }): AsyncGenerator<T> {
    const { method, requestType, responseType } = this.method(rpc, true);
    const wire = this.codec.toWire(requestType, request, rpc);
    const { signal } = options;
    if (signal?.aborted) return;
    const callOptions = options.timeoutMs === undefined ? {} : { deadline: Date.now() + options.timeoutMs };
    const call = this.channel.makeServerStreamRequest(method.path, method.requestSerialize, method.responseDeserialize, wire, this.metadata.clone(), callOptions);
    const cancel = () => call.cancel();
    signal?.addEventListener('abort', cancel);
    try {
      for await (const message of call) yield this.codec.fromWire(responseType, message) as T;
    } catch (e) {
      if (signal?.aborted) return; // the caller ended the watch: not an error
      throw errorFromGrpc(e);
    } finally {
      signal?.removeEventListener('abort', cancel);
      call.cancel(); // a no-op when the stream already ended
    }
  }

  /** The method definition of `rpc` and the full names of its message types. */
  private method(rpc: string, serverStreaming: boolean): { method: grpc.MethodDefinition<object, object>; requestType: string; responseType: string } {
    const method = this.methods[rpc];
    if (method === undefined) throw new TypeError(`${SERVICE_NAME} has no RPC ${rpc} in the loaded contract`);
    if (method.requestStream || method.responseStream !== serverStreaming) {
      throw new TypeError(`${rpc} is ${method.requestStream ? 'client' : method.responseStream ? 'server' : 'not'} streaming`);
    }
    // Request and response messages are top-level in the service's package (buf STANDARD).
    const { requestType, responseType } = method as unknown as { requestType: TypeRef; responseType: TypeRef };
    return { method, requestType: `${PACKAGE}.${requestType.type.name}`, responseType: `${PACKAGE}.${responseType.type.name}` };
  }

  private async page<T>(rpc: string, itemsField: string, request: WireObject, options: CallOptions): Promise<Page<T>> {
    const { timeoutMs, ...fields } = options;
    const response = await this.unary(rpc, { ...request, ...fields }, { idempotent: true, timeoutMs });
    return { items: response[itemsField] as T[], nextPageToken: response.nextPageToken as string };
  }

  /** Follows `nextPageToken` until the server has no more pages (a page may be short with more to come). */
  private async *pages<T>(rpc: string, itemsField: string, request: WireObject, options: CallOptions): AsyncGenerator<T> {
    let pageToken = '';
    do {
      const page = await this.page<T>(rpc, itemsField, request, { ...options, pageToken } as CallOptions);
      yield* page.items;
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  }

  /** Runs `attempt` until it succeeds, fails for good, or, when `idempotent`, UNAVAILABLE outlasts the retries. */
  private async withRetries<T>(idempotent: boolean, attempt: () => Promise<T>): Promise<T> {
    for (let tried = 0; ; tried++) {
      try {
        return await attempt();
      } catch (e) {
        const error = errorFromGrpc(e);
        if (!idempotent || error.code !== 'UNAVAILABLE' || tried >= this.retries) throw error;
        await new Promise((resolve) => setTimeout(resolve, backoffMs(tried)));
      }
    }
  }

  /** One attempt of a unary call with its own deadline and the call metadata. */
  private once<Req, Res>(method: grpc.MethodDefinition<Req, Res>, request: Req, timeoutMs: number | undefined): Promise<Res> {
    const deadline = Date.now() + (timeoutMs ?? this.timeoutMs);
    const metadata = this.metadata.clone();
    const rpc = method.path.slice(method.path.lastIndexOf('/') + 1);
    if (this.consistencyToken !== undefined && READS_AFTER_TOKEN.has(rpc)) {
      metadata.set(CONSISTENCY_TOKEN_HEADER, this.consistencyToken);
    }
    return new Promise((resolve, reject) => {
      const call = this.channel.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        metadata,
        { deadline },
        (error, response) => (error ? reject(error) : resolve(response as Res)),
      );
      call.on('metadata', (headers: grpc.Metadata) => {
        const [token] = headers.get(CONSISTENCY_TOKEN_HEADER);
        if (typeof token === 'string') this.consistencyToken = token;
      });
    });
  }
}

interface TypeRef {
  type: { name: string };
}

/** Exponential backoff with jitter: ~100 ms, 200 ms, 400 ms ... at most 2 s. */
function backoffMs(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function channelCredentials(tls: boolean | TlsOptions): grpc.ChannelCredentials {
  if (tls === false) return grpc.credentials.createInsecure();
  const { rootCa, clientCert, clientKey } = tls === true ? {} : tls;
  if ((clientCert === undefined) !== (clientKey === undefined)) {
    throw new TypeError('tls: clientCert and clientKey go together');
  }
  return grpc.credentials.createSsl(readPem(rootCa), readPem(clientKey), readPem(clientCert));
}

/** PEM bytes from PEM text, bytes or a file path. */
function readPem(value: string | Buffer | undefined): Buffer | null {
  if (value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  return value.includes('-----BEGIN') ? Buffer.from(value) : fs.readFileSync(value);
}
