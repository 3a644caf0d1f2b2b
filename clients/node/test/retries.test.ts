// The client's retry policy, deadlines, call metadata, paging and TLS, against a scripted server.
//
// The real daemon cannot be made to fail on cue, so a small grpc-js server
// serving the same contract (parsed from the same proto/) answers with the
// status codes each test scripts, and records what every call carried.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { MnemoClient, MnemoError, type MnemoClientOptions } from '../src';
import { SERVICE_NAME, loadContract } from '../src/proto';

type Handler = (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => void;

class ScriptedServer {
  /** Status codes the next calls fail with, in order; then calls succeed. */
  failures: grpc.status[] = [];
  delayMs = 0;
  readonly calls: { rpc: string; authorization: string | undefined; request: any }[] = [];
  private constructor(
    private readonly server: grpc.Server,
    readonly port: number,
  ) {}

  static async start(credentials = grpc.ServerCredentials.createInsecure()): Promise<ScriptedServer> {
    const service = loadContract()[SERVICE_NAME] as grpc.ServiceDefinition; // before binding: a throw leaks nothing
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', credentials, (error, p) => (error ? reject(error) : resolve(p))),
    );
    const scripted = new ScriptedServer(server, port);
    server.addService(service, {
      GetSession: scripted.handler('GetSession', (request) => ({ session: { namespace: request.namespace, sessionId: request.sessionId } })),
      AppendTurns: scripted.handler('AppendTurns', (request) => ({ firstSeq: 1, lastSeq: request.turns.length })),
      // Page 1 is empty but not the last: a short page says nothing about what follows.
      ListSessions: scripted.handler('ListSessions', (request) => {
        const pages: Record<string, [string[], string]> = { '': [[], 'p2'], p2: [['a', 'b'], 'p3'], p3: [['c'], ''] };
        const [ids, next] = pages[request.pageToken as string]!;
        return { sessions: ids.map((sessionId) => ({ namespace: request.namespace, sessionId })), nextPageToken: next };
      }),
      PutFact: scripted.handler('PutFact', (request) => ({ fact: { factId: 'f1', text: request.text }, outcome: 'PUT_FACT_OUTCOME_CREATED' })),
      DeleteFact: scripted.handler('DeleteFact', (request) => ({ fact: { factId: request.factId } })),
      UpdatePendingAction: scripted.handler('UpdatePendingAction', (request) => ({ action: { action: 'ship it', status: request.status } })),
      Search: scripted.handler('Search', () => ({ hits: [{ kind: 'SEARCH_KIND_FACT', factId: 'f1', score: 1.5 }], indexLag: 2 })),
    });
    return scripted;
  }

  private handler(rpc: string, answer: (request: any) => object): Handler {
    return (call, callback) => {
      const [authorization] = call.metadata.get('authorization');
      this.calls.push({ rpc, authorization: authorization?.toString(), request: call.request });
      const failure = this.failures.shift();
      setTimeout(() => {
        if (failure !== undefined) callback({ code: failure, details: `scripted failure of ${rpc}` });
        else callback(null, answer(call.request));
      }, this.delayMs);
    };
  }

  stop(): void {
    this.server.forceShutdown();
  }
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

async function scripted(credentials?: grpc.ServerCredentials): Promise<ScriptedServer> {
  const server = await ScriptedServer.start(credentials);
  cleanups.push(() => server.stop());
  return server;
}

function connect(address: string, options: MnemoClientOptions = {}): MnemoClient {
  const client = new MnemoClient(address, { timeoutMs: 2_000, retries: 2, ...options });
  cleanups.push(() => client.close());
  return client;
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<MnemoError> {
  let caught: unknown;
  await assert.rejects(promise, (e: unknown) => {
    caught = e;
    return e instanceof MnemoError && e.code === code;
  });
  return caught as MnemoError;
}

const TURN = [{ role: 'USER' as const, content: 'hello' }];

test('reads are retried on UNAVAILABLE', async () => {
  const server = await scripted();
  server.failures = [grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE];
  const client = connect(`127.0.0.1:${server.port}`);
  assert.equal((await client.getSession('ns', 's')).sessionId, 's');
  assert.equal(server.calls.length, 3);
});

test('retries are bounded', async () => {
  const server = await scripted();
  server.failures = Array(5).fill(grpc.status.UNAVAILABLE);
  const client = connect(`127.0.0.1:${server.port}`);
  const error = await rejectsWith(client.getSession('ns', 's'), 'UNAVAILABLE');
  assert.equal(error.details, 'scripted failure of GetSession');
  assert.equal(server.calls.length, 3); // one try and retries: 2
});

test('other codes are not retried, DEADLINE_EXCEEDED included', async () => {
  const server = await scripted();
  const client = connect(`127.0.0.1:${server.port}`);
  for (const [code, name] of [
    [grpc.status.NOT_FOUND, 'NOT_FOUND'],
    [grpc.status.DEADLINE_EXCEEDED, 'DEADLINE_EXCEEDED'],
    [grpc.status.INTERNAL, 'INTERNAL'],
  ] as const) {
    server.calls.length = 0;
    server.failures = [code];
    await rejectsWith(client.getSession('ns', 's'), name);
    assert.equal(server.calls.length, 1, name);
  }
});

test('appends without an idempotency key are not retried', async () => {
  const server = await scripted();
  server.failures = [grpc.status.UNAVAILABLE];
  const client = connect(`127.0.0.1:${server.port}`);
  await rejectsWith(client.appendTurns('ns', 's', TURN), 'UNAVAILABLE');
  assert.equal(server.calls.length, 1);
});

test('appends with an idempotency key are retried with the same key', async () => {
  const server = await scripted();
  server.failures = [grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE];
  const client = connect(`127.0.0.1:${server.port}`);
  assert.equal((await client.appendTurns('ns', 's', TURN, { idempotencyKey: 'k1' })).lastSeq, 1);
  assert.deepEqual(server.calls.map((c) => c.request.idempotencyKey), ['k1', 'k1', 'k1']);
});

test('fact puts, pending-action updates and searches are retried; fact deletions are not', async () => {
  const server = await scripted();
  const client = connect(`127.0.0.1:${server.port}`);
  server.failures = [grpc.status.UNAVAILABLE, grpc.status.UNAVAILABLE];
  const put = await client.putFact('ns', 'u1', 'Prefers tea.', { key: 'drink', source: { sessionId: 's', seq: 3 }, tags: ['vip'] });
  assert.deepEqual([put.fact.factId, put.outcome, put.superseded], ['f1', 'CREATED', null]);
  assert.equal(server.calls.length, 3);
  const sent = server.calls[2]!.request;
  assert.deepEqual([sent.subjectId, sent.key, sent.text, sent.tags], ['u1', 'drink', 'Prefers tea.', ['vip']]);
  assert.deepEqual(sent.source, { sessionId: 's', seq: 3, turnRemoved: false });

  server.calls.length = 0;
  server.failures = [grpc.status.UNAVAILABLE];
  const action = await client.updatePendingAction('ns', { sessionId: 's', actionSeq: 4 }, 'IN_PROGRESS');
  assert.equal(action.status, 'IN_PROGRESS');
  assert.deepEqual(server.calls.map((c) => [c.rpc, c.request.ref, c.request.status]), [
    ['UpdatePendingAction', { sessionId: 's', actionSeq: 4 }, 'ACTION_STATUS_IN_PROGRESS'],
    ['UpdatePendingAction', { sessionId: 's', actionSeq: 4 }, 'ACTION_STATUS_IN_PROGRESS'],
  ]);

  server.calls.length = 0;
  server.failures = [grpc.status.UNAVAILABLE]; // also what a rebuilding index answers
  const result = await client.search('ns', 'tea', { kinds: ['FACT', 'EPISODE'], limit: 5 });
  assert.deepEqual([result.indexLag, result.hits.map((h) => [h.kind, h.factId])], [2, [['FACT', 'f1']]]);
  assert.deepEqual(server.calls[1]!.request.kinds, ['SEARCH_KIND_FACT', 'SEARCH_KIND_EPISODE']);
  assert.equal(server.calls.length, 2);

  // A repeat of a deletion that happened would get NOT_FOUND.
  server.calls.length = 0;
  server.failures = [grpc.status.UNAVAILABLE];
  await rejectsWith(client.deleteFact('ns', 'f1'), 'UNAVAILABLE');
  assert.equal(server.calls.length, 1);
});

test('every attempt has a deadline, overridable per call', async () => {
  const server = await scripted();
  server.delayMs = 600;
  const client = connect(`127.0.0.1:${server.port}`, { timeoutMs: 150 });
  const started = Date.now();
  await rejectsWith(client.getSession('ns', 's'), 'DEADLINE_EXCEEDED');
  assert.ok(Date.now() - started < 550, `took ${Date.now() - started} ms`);
  assert.equal((await client.getSession('ns', 's', { timeoutMs: 5_000 })).sessionId, 's');
});

test('the API key is sent as a bearer token on every call, and nothing without one', async () => {
  const server = await scripted();
  const keyed = connect(`127.0.0.1:${server.port}`, { apiKey: 'k-123' });
  await keyed.getSession('ns', 's');
  await keyed.appendTurns('ns', 's', TURN);
  await keyed.listSessions('ns');
  const anonymous = connect(`127.0.0.1:${server.port}`);
  await anonymous.getSession('ns', 's');
  assert.deepEqual(server.calls.map((c) => c.authorization), ['Bearer k-123', 'Bearer k-123', 'Bearer k-123', undefined]);
});

test('iterators follow nextPageToken past a short page', async () => {
  const server = await scripted();
  const client = connect(`127.0.0.1:${server.port}`);
  const ids: string[] = [];
  for await (const session of client.iterSessions('ns', { pageSize: 2 })) ids.push(session.sessionId);
  assert.deepEqual(ids, ['a', 'b', 'c']);
  assert.deepEqual(server.calls.map((c) => [c.request.pageToken, c.request.pageSize]), [['', 2], ['p2', 2], ['p3', 2]]);
});

function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A self-signed certificate for localhost and 127.0.0.1 (its own CA). */
function makeCertificate(): { key: string; cert: string; certPath: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mnemo-node-tls-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const keyPath = path.join(dir, 'key.pem');
  const certPath = path.join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', keyPath, '-out', certPath,
  ], { stdio: 'ignore' });
  return { key: fs.readFileSync(keyPath, 'utf8'), cert: fs.readFileSync(certPath, 'utf8'), certPath };
}

test('TLS with a private root CA, given as a path, PEM text or bytes', { skip: !opensslAvailable() && 'needs openssl' }, async () => {
  const { key, cert, certPath } = makeCertificate();
  const server = await scripted(grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(key), cert_chain: Buffer.from(cert) }]));
  for (const rootCa of [certPath, cert, Buffer.from(cert)]) {
    const client = connect(`localhost:${server.port}`, { tls: { rootCa } });
    assert.equal((await client.getSession('ns', 's')).sessionId, 's');
  }
  const https = connect(`https://localhost:${server.port}`, { tls: { rootCa: cert } });
  assert.equal((await https.getSession('ns', 's')).sessionId, 's');
  // Without the private root the server is not trusted.
  const untrusting = connect(`localhost:${server.port}`, { tls: true, retries: 0 });
  await rejectsWith(untrusting.getSession('ns', 's'), 'UNAVAILABLE');
});

test('mutual TLS with a client certificate', { skip: !opensslAvailable() && 'needs openssl' }, async () => {
  const { key, cert } = makeCertificate();
  const pair = { private_key: Buffer.from(key), cert_chain: Buffer.from(cert) };
  const server = await scripted(grpc.ServerCredentials.createSsl(Buffer.from(cert), [pair], true));
  const client = connect(`localhost:${server.port}`, { tls: { rootCa: cert, clientCert: cert, clientKey: key } });
  assert.equal((await client.getSession('ns', 's')).sessionId, 's');
  const anonymous = connect(`localhost:${server.port}`, { tls: { rootCa: cert }, retries: 0 });
  await rejectsWith(anonymous.getSession('ns', 's'), 'UNAVAILABLE');
  assert.throws(() => new MnemoClient(`localhost:${server.port}`, { tls: { clientCert: cert } }), /clientCert and clientKey/);
});
