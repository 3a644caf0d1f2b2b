// API keys and TLS, end to end against the real `mnemo` daemon.
//
// Each test starts a daemon of its own with a config file: API keys made by
// `mnemo key create`, and certificates made with the openssl command (a private
// CA, a server certificate for localhost and a client certificate, all signed
// by it).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import { MnemoClient, MnemoError, type MnemoClientOptions, type NewTurn } from '../src';
import { Daemon, mnemoBinary } from './daemon';

const TURNS: NewTurn[] = [
  { role: 'USER', speaker: 'customer:42', content: 'Where is my refund?' },
  { role: 'ASSISTANT', speaker: 'agent-a', content: 'It was sent on Monday.' },
];
// Well formed, but no daemon was ever told about it.
const UNKNOWN_KEY = `mnemo_${'0'.repeat(64)}`;

let dir: string;
let made: Certificates | undefined; // by the first test that needs them

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mnemo-node-auth-'));
});

after(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
});

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** PEM file paths: a private CA, and a server and a client certificate it signed. */
interface Certificates {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

function certificates(): Certificates {
  made ??= makeCertificates(fs.mkdtempSync(path.join(dir, 'pki-')));
  return made;
}

function makeCertificates(into: string): Certificates {
  const file = (name: string) => path.join(into, name);
  const openssl = (...args: string[]) => {
    try {
      execFileSync('openssl', args, { stdio: 'pipe' });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw code === 'ENOENT' ? new Error('the TLS tests need the openssl command to make their certificates') : e;
    }
  };
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(
    'req', '-x509', ...newKey, '-days', '1', '-subj', '/CN=mnemo test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign',
    '-keyout', file('ca.key'), '-out', file('ca.pem'),
  );
  const extensions: [string, string][] = [
    ['server', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'],
    ['client', 'extendedKeyUsage=clientAuth\n'],
  ];
  extensions.forEach(([name, ext], i) => {
    fs.writeFileSync(file(`${name}.ext`), ext);
    openssl('req', '-new', ...newKey, '-subj', `/CN=${name}`, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`));
    openssl(
      'x509', '-req', '-in', file(`${name}.csr`), '-days', '1', '-set_serial', String(i + 1),
      '-CA', file('ca.pem'), '-CAkey', file('ca.key'), '-extfile', file(`${name}.ext`), '-out', file(`${name}.pem`),
    );
  });
  return {
    ca: file('ca.pem'),
    serverCert: file('server.pem'),
    serverKey: file('server.key'),
    clientCert: file('client.pem'),
    clientKey: file('client.key'),
  };
}

/** An API key made by `mnemo key create`, and the `[[auth.keys]]` lines that make a daemon's config accept it. */
function makeKey(namespace: string, role: 'read' | 'write' | 'admin'): { key: string; config: string } {
  const out = execFileSync(mnemoBinary(), ['key', 'create', '--namespace', namespace, '--role', role, '--name', `${role}@${namespace}`], {
    encoding: 'utf8',
  });
  const key = /\bmnemo_[0-9a-f]{64}\b/.exec(out);
  const at = out.indexOf('[[auth.keys]]');
  assert.ok(key !== null && at >= 0, `unexpected \`mnemo key create\` output:\n${out}`);
  return { key: key[0], config: out.slice(at) };
}

/** The config's [tls] section; with `mutual`, clients need a certificate the CA signed. */
function tlsSection(mutual = false): string {
  const { serverCert, serverKey, ca } = certificates();
  const files: Record<string, string> = { cert: serverCert, key: serverKey };
  if (mutual) files.client_ca = ca;
  // A JSON string is a TOML basic string.
  return `[tls]\n${Object.entries(files).map(([name, p]) => `${name} = ${JSON.stringify(p)}\n`).join('')}`;
}

/** A daemon of the test's own with a config file of `sections` (TOML); it must exit cleanly when the test ends. */
async function startDaemon(...sections: string[]): Promise<Daemon> {
  const config = fs.mkdtempSync(path.join(dir, 'config-'));
  fs.writeFileSync(path.join(config, 'mnemo.toml'), sections.join('\n'));
  const daemon = await Daemon.start(['--config', path.join(config, 'mnemo.toml')]);
  cleanups.push(async () => {
    const code = await daemon.stop();
    assert.equal(code, 0, `mnemo did not exit cleanly on SIGTERM:\n${daemon.log.slice(-20).join('\n')}`);
  });
  return daemon;
}

function connect(address: string, options: MnemoClientOptions = {}): MnemoClient {
  const client = new MnemoClient(address, options);
  cleanups.push(() => client.close());
  return client;
}

/** `localhost:<port>` of a daemon: the name its certificate carries. */
function localhost(daemon: Daemon): string {
  return `localhost:${daemon.address.slice(daemon.address.lastIndexOf(':') + 1)}`;
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

test('API keys are checked by namespace and role', async () => {
  const writeKey = makeKey('a', 'write');
  const readKey = makeKey('a', 'read');
  const daemon = await startDaemon(writeKey.config, readKey.config);

  // No key, or one the daemon does not know: nothing is allowed, reads and watches included.
  for (const apiKey of [undefined, UNKNOWN_KEY]) {
    const stranger = connect(daemon.address, { apiKey });
    const refused = await rejectsWith(stranger.createSession('a'), 'UNAUTHENTICATED');
    assert.equal(refused.grpcCode, 16);
    assert.ok(refused.details.length > 0);
    await rejectsWith(stranger.getSession('a', 's1'), 'UNAUTHENTICATED');
    await rejectsWith(stranger.watchSession('a', 's1', { fromSeq: 1, timeoutMs: 5_000 })[Symbol.asyncIterator]().next(), 'UNAUTHENTICATED');
    // The health check needs no key.
    assert.equal(await stranger.health(), 'SERVING');
  }

  const writer = connect(daemon.address, { apiKey: writeKey.key });
  assert.equal((await writer.createSession('a', { sessionId: 's1' })).sessionId, 's1');
  const appended = await writer.appendTurns('a', 's1', TURNS);
  assert.deepEqual([appended.firstSeq, appended.lastSeq], [1, 2]);
  assert.deepEqual((await writer.listTurns('a', 's1')).items.map((t) => t.content), TURNS.map((t) => t.content));
  const denied = await rejectsWith(writer.createSession('b'), 'PERMISSION_DENIED'); // another namespace
  assert.equal(denied.grpcCode, 7);
  assert.ok(denied.details.length > 0);
  await rejectsWith(writer.getSession('b', 's1'), 'PERMISSION_DENIED');
  await rejectsWith(writer.deleteSession('a', 's1'), 'PERMISSION_DENIED'); // deleting a session takes an admin key

  const reader = connect(daemon.address, { apiKey: readKey.key });
  assert.equal((await reader.getSession('a', 's1')).turnCount, 2);
  assert.deepEqual((await reader.listTurns('a', 's1')).items.map((t) => t.seq), [1, 2]);
  for await (const event of reader.watchSession('a', 's1', { fromSeq: 1, timeoutMs: 5_000 })) {
    assert.equal(event.event, 'turn');
    assert.equal(event.turn?.seq, 1);
    break;
  }
  await rejectsWith(reader.createSession('a'), 'PERMISSION_DENIED');
  await rejectsWith(reader.appendTurns('a', 's1', TURNS), 'PERMISSION_DENIED');
  await rejectsWith(reader.getSession('b', 's1'), 'PERMISSION_DENIED');
  assert.equal((await reader.getSession('a', 's1')).turnCount, 2); // nothing was written
});

test('TLS with a private CA', async () => {
  const pki = certificates();
  const daemon = await startDaemon(tlsSection());
  const address = localhost(daemon);

  const trusting = connect(address, { tls: { rootCa: pki.ca } });
  assert.equal((await trusting.createSession('ns', { sessionId: 's1' })).sessionId, 's1');
  assert.equal((await trusting.appendTurns('ns', 's1', TURNS)).lastSeq, 2);
  const https = connect(`https://${address}`, { tls: { rootCa: fs.readFileSync(pki.ca) } });
  assert.equal((await https.getSession('ns', 's1')).turnCount, 2);

  // Plaintext against the TLS port, and TLS that does not trust the CA, fail at once.
  for (const tls of [false, true]) {
    const wrong = connect(address, { tls, timeoutMs: 3_000, retries: 0 });
    const started = Date.now();
    await assert.rejects(wrong.getSession('ns', 's1'), (e: unknown) => e instanceof MnemoError && ['UNAVAILABLE', 'DEADLINE_EXCEEDED'].includes(e.code));
    assert.ok(Date.now() - started < 5_000);
  }
});

test('mutual TLS with an API key', async () => {
  const pki = certificates();
  const { key, config } = makeKey('*', 'write');
  const daemon = await startDaemon(tlsSection(true), config);
  const address = localhost(daemon);
  const tls = { rootCa: pki.ca, clientCert: pki.clientCert, clientKey: fs.readFileSync(pki.clientKey, 'utf8') }; // paths or PEM

  const client = connect(address, { apiKey: key, tls });
  assert.equal((await client.createSession('ns', { sessionId: 's1' })).sessionId, 's1');
  assert.equal((await client.appendTurns('ns', 's1', TURNS)).lastSeq, 2);
  // The certificate proves the machine, not the caller: the key is still needed.
  const keyless = connect(address, { tls });
  await rejectsWith(keyless.getSession('ns', 's1'), 'UNAUTHENTICATED');
  // Without a client certificate the handshake fails.
  const anonymous = connect(address, { apiKey: key, tls: { rootCa: pki.ca }, timeoutMs: 3_000, retries: 0 });
  await rejectsWith(anonymous.getSession('ns', 's1'), 'UNAVAILABLE');
});
