// mnemo-client: the TypeScript/Node client for mnemo, a persistent memory daemon for AI agents.
//
//   import { MnemoClient } from 'mnemo-client';
//   const mnemo = new MnemoClient('127.0.0.1:50051');
//   const s = await mnemo.createSession('support', { subjectId: 'customer:42' });
//   await mnemo.appendTurns('support', s.sessionId, [{ role: 'USER', content: 'Hi' }]);
//   mnemo.close();
//
// The contract is read from the repository's proto/ at run time (proto.ts);
// `MnemoClient` is the supported interface.

export { MnemoClient } from './client';
export type {
  AppendTurnsOptions,
  CallOptions,
  CreateSessionOptions,
  GetSummaryOptions,
  ListFactsOptions,
  ListReviewItemsOptions,
  ListSessionsOptions,
  ListTurnsOptions,
  RemoveLastTurnOptions,
  RemovedTurn,
  MnemoClientOptions,
  PageOptions,
  PutFactOptions,
  SearchOptions,
  SummarizeOptions,
  TlsOptions,
  WithPageToken,
} from './client';
export { MnemoError } from './errors';
export type { StatusCodeName } from './errors';
export { resolveProtoDir } from './proto';
export { anthropicSystem, bundleParts, systemMessage, textBlocks } from './prompt';
export type { TextBlock } from './prompt';
export * from './types'; // types only
