// The one error class a failed call rejects with, and its mapping from grpc-js errors.
//
// Callers branch on `code` (the gRPC status name); the server's `details` name
// the field, the limit or the current next_seq. What to retry is the client's
// decision, not this module's.

import { Metadata, status } from '@grpc/grpc-js';

/** A gRPC status code name, e.g. 'NOT_FOUND' or 'FAILED_PRECONDITION'. */
export type StatusCodeName = Exclude<keyof typeof status, number>;

export class MnemoError extends Error {
  /** The gRPC status code name, e.g. 'NOT_FOUND'. */
  readonly code: StatusCodeName;
  /** The numeric gRPC status code. */
  readonly grpcCode: status;
  /** The server's message (or the transport's, for UNAVAILABLE and DEADLINE_EXCEEDED). */
  readonly details: string;
  /** Trailing metadata of the failed call, when there was a call. */
  readonly metadata: Metadata | undefined;
  /**
   * Why a FAILED_PRECONDITION, for programs (the `mnemo-reason` trailer):
   * 'STALE_LEASE_EPOCH', 'LEASE_EPOCH_AHEAD', 'NOT_OWNER', 'SESSION_CLOSED',
   * 'IDEMPOTENCY_KEY_REUSED', 'NO_TURNS' or 'ALREADY_RESOLVED'; undefined otherwise.
   */
  readonly reason: string | undefined;

  constructor(grpcCode: status, details: string, options: { metadata?: Metadata; cause?: unknown } = {}) {
    const code = (status[grpcCode] ?? 'UNKNOWN') as StatusCodeName;
    const text = details || code.toLowerCase().replace(/_/g, ' ');
    super(`${code}: ${text}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'MnemoError';
    this.code = code;
    this.grpcCode = status[code];
    this.details = text;
    this.metadata = options.metadata;
    const reason = options.metadata?.get('mnemo-reason')[0];
    this.reason = typeof reason === 'string' ? reason : undefined;
  }
}

interface ServiceErrorLike {
  code?: unknown;
  details?: unknown;
  metadata?: unknown;
  message?: unknown;
}

/** The MnemoError for what a grpc-js call rejected with (a ServiceError, or anything else as UNKNOWN). */
export function errorFromGrpc(error: unknown): MnemoError {
  if (error instanceof MnemoError) return error;
  const e = (typeof error === 'object' && error !== null ? error : {}) as ServiceErrorLike;
  const code = typeof e.code === 'number' && e.code in status ? (e.code as status) : status.UNKNOWN;
  const details = typeof e.details === 'string' ? e.details : typeof e.message === 'string' ? e.message : String(error);
  const metadata = e.metadata instanceof Metadata ? e.metadata : undefined;
  return new MnemoError(code, details, { metadata, cause: error });
}
