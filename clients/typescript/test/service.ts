/**
 * The real service for the tests: the binary named by `AGENT_SESSIONS_BIN` on a fresh
 * SQLite file, or on the Postgres database `AGENT_SESSIONS_DATABASE_URL` names, its runs
 * answered by a fake OpenAI-compatible LLM in this process (the only fake), which
 * streams `echo: <the last user message>` a word at a time.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Service {
  url: string;
  /** The database it runs on, for another process of the service to share. */
  databaseUrl: string;
  /** Stops the process and removes its SQLite file, unless `keepDatabase`. */
  stop(options?: { keepDatabase?: boolean }): Promise<void>;
}

export interface ServiceOptions {
  /** Run on this database (one an earlier process used) instead of a fresh one. */
  databaseUrl?: string;
  /** Turns authentication on: tenants' keys are made with this admin key. */
  adminKey?: string;
}

/** Milliseconds between two streamed words. */
export const WORD_DELAY_MS = 30;

export async function startService(options: ServiceOptions = {}): Promise<Service> {
  const binary = process.env.AGENT_SESSIONS_BIN;
  if (!binary) throw new Error('set AGENT_SESSIONS_BIN to the agent-sessions binary');
  const llm = await startFakeLlm();
  const dir = mkdtempSync(join(tmpdir(), 'agent-sessions-ts-'));
  const databaseUrl =
    options.databaseUrl ??
    process.env.AGENT_SESSIONS_DATABASE_URL ??
    `sqlite://${join(dir, 'service.db')}`;
  const port = await freePort();
  const child = spawn(binary, [], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      ...(options.adminKey ? { ADMIN_API_KEY: options.adminKey } : {}),
      LISTEN_ADDR: `127.0.0.1:${port}`,
      LLM_BASE_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`,
      LLM_MODEL: 'fake-model',
      LLM_MAX_RETRIES: '0',
      SHUTDOWN_DELAY_SECS: '0',
      RUST_LOG: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const spawned = new Promise<never>((_, reject) => child.once('error', reject));
  const url = `http://127.0.0.1:${port}`;
  await Promise.race([waitReady(url, child), spawned]);
  return {
    url,
    databaseUrl,
    async stop({ keepDatabase = false } = {}) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await new Promise((resolve) => llm.close(resolve));
      if (!keepDatabase) rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the service never got ready');
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function startFakeLlm(): Promise<Server> {
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', async () => {
      const { model, messages } = JSON.parse(body) as {
        model: string;
        messages: { role: string; content: string }[];
      };
      const said = messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (delta: object, finish: string | null = null) =>
        response.write(
          `data: ${JSON.stringify({ model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
        );
      const words = `echo: ${said}`.split(' ');
      for (const [n, word] of words.entries()) {
        send({ content: n === 0 ? word : ` ${word}` });
        await new Promise((resolve) => setTimeout(resolve, WORD_DELAY_MS));
      }
      send({}, 'stop');
      const usage = { prompt_tokens: 5, completion_tokens: words.length, total_tokens: 5 + words.length };
      response.end(`data: ${JSON.stringify({ model, choices: [], usage })}\n\ndata: [DONE]\n\n`);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
