// The real `mnemo serve` for the tests: a free port, a temporary data directory.
//
// Nothing is built here: the binary comes from $MNEMO_BIN (default
// target/debug/mnemo in the repository; CI runs `cargo build` first).

import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';

// Compiled, this file is build/test/daemon.js: the repository is four levels up.
const REPO_ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const STARTUP_MS = 30_000;
const SHUTDOWN_MS = 20_000;
const KEPT_LOG_LINES = 200; // the tail shown when the daemon misbehaves
const LISTENING = /mnemo listening on (\S+:\d+)/;
const ANSI = /\x1b\[[0-9;]*m/g;

export function mnemoBinary(): string {
  const binary = path.resolve(REPO_ROOT, process.env.MNEMO_BIN || path.join('target', 'debug', 'mnemo'));
  try {
    fs.accessSync(binary, fs.constants.X_OK);
  } catch {
    throw new Error(`no mnemo binary at ${binary}: run \`cargo build\` or set MNEMO_BIN`);
  }
  return binary;
}

/** A running `mnemo serve` and the tail of what it wrote to stderr. */
export class Daemon {
  private constructor(
    readonly address: string,
    /** The last lines the daemon wrote to stderr, without colours. */
    readonly log: string[],
    private readonly process: ChildProcess,
    private readonly dataDir: string,
    private readonly exited: Promise<number | null>,
  ) {}

  /** Starts the daemon, with extra `mnemo serve` arguments such as `['--config', file]`, and resolves once it announces its address. */
  static async start(args: string[] = []): Promise<Daemon> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mnemo-node-test-'));
    const env: NodeJS.ProcessEnv = { ...process.env, MNEMO_LOG: 'info' }; // the address is announced at info level
    delete env.MNEMO_CONFIG;
    delete env.MNEMO_STORE;
    const child = spawn(mnemoBinary(), ['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
    // If the test process dies without stopping it, the daemon goes too.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    const exited = new Promise<number | null>((resolve) => {
      child.once('exit', (code) => {
        process.removeListener('exit', killOnExit);
        resolve(code);
      });
    });

    const log: string[] = [];
    const address = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`mnemo was silent for ${STARTUP_MS} ms:\n${log.slice(-20).join('\n')}`)), STARTUP_MS);
      // Reading stderr for the daemon's whole life keeps the pipe from filling and blocking it.
      readline.createInterface({ input: child.stderr! }).on('line', (raw) => {
        const line = raw.replace(ANSI, '');
        log.push(line);
        if (log.length > KEPT_LOG_LINES) log.shift();
        const match = LISTENING.exec(line);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`mnemo exited with ${code} before announcing its address:\n${log.slice(-20).join('\n')}`));
      });
    }).catch((e: unknown) => {
      child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw e;
    });

    return new Daemon(address, log, child, dataDir, exited);
  }

  /** SIGTERM, then waits; the daemon drains, syncs and exits 0. Resolves to its exit code. */
  async stop(): Promise<number | null> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill('SIGTERM');
      const timer = setTimeout(() => this.process.kill('SIGKILL'), SHUTDOWN_MS);
      await this.exited;
      clearTimeout(timer);
    }
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    return this.exited;
  }
}
