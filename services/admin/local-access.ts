import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { prepareDataDir } from '../platform/config/data-dir';
import { LOCAL_CLI_TOKEN_NAME, type AdminToken } from '../platform/config/admin-settings';
import { isAlive } from '../platform/files/pid-lock';
import { listenUrl } from '../platform/net/listen-url';
import { STALE_TEMP_MS, sweepStaleTemps, writeFileAtomically } from '../platform/registry/atomic-file';

/**
 * How the CLI on this machine finds the running service: while it runs, the service keeps
 * `DATA_DIR/admin-api.json` (mode 0600: readable by the user the service runs as, like the data beside it)
 * holding its pid, its admin URL and a token of its own, made at start, valid only for this run, with the
 * full scope. Whoever can read DATA_DIR can already change the registry and the log under it directly, so the
 * file gives no one more than they had; and ADMIN_TOKENS need not be set for `npm start` + `npx ingress`.
 */
export const LOCAL_ACCESS_FILE = 'admin-api.json';

export { LOCAL_CLI_TOKEN_NAME };

export interface LocalAccess {
  pid: number;
  url: string;
  token: string;
  /** The base of the service's hook URLs (its PUBLIC_BASE_URL, or where its receiver listens), null when it has none. */
  hookBaseUrl?: string | null;
}

export interface LocalAccessHandle {
  token: AdminToken;
  /** Remove the file, if it is still this process's. */
  remove(): Promise<void>;
}

/** The file is another running process's: the CLI on this machine keeps finding that one. */
export class LocalAccessTaken extends Error {
  constructor(readonly file: string, readonly pid: number) {
    super(`${file} belongs to process ${pid}, which is running`);
    this.name = 'LocalAccessTaken';
  }
}

/**
 * What a process says when another running process keeps the file. With the file registry or the filesystem
 * store, DATA_DIR holds the registry or the objects, so every process of the deployment must share it: then the
 * first one keeping the file is how it works, and advice to give each process its own DATA_DIR would split the
 * registry (a decoder that never sees the workflows the receiver accepts for). Only with Cosmos DB and Azure Blob
 * Storage is a DATA_DIR of its own for each process the way out.
 */
export function localAccessTakenNotice(pid: number, dataDirShared: boolean): { level: 'info' | 'warn'; message: string } {
  const reach = 'To reach this process, set ADMIN_URL to its admin port and ADMIN_TOKEN to a token of ADMIN_TOKENS';
  if (dataDirShared) {
    return { level: 'info', message: `DATA_DIR/admin-api.json is kept by another running process (pid ${pid}) on this DATA_DIR, which the processes share for the file registry or the filesystem store: the CLI on this machine finds that one. ${reach}` };
  }
  return { level: 'warn', message: `DATA_DIR/admin-api.json is kept by another running process (pid ${pid}) on this DATA_DIR: the CLI on this machine finds that one. ${reach}, or give each process its own DATA_DIR` };
}

/**
 * Throws LocalAccessTaken when the file names another live process: several processes on one DATA_DIR
 * (on Kafka nothing else stops them) would each replace it, and the CLI would reach whichever started last.
 * The first keeps it. (Two starting in the same instant may still both write: the check is not a lock.)
 */
export async function writeLocalAccess(dataDir: string, host: string, port: number, hookBaseUrl: string | null = null, alive: (pid: number) => boolean = isAlive): Promise<LocalAccessHandle> {
  // A connecting CLI's URL: 127.0.0.1 for a wildcard, which reaches a service listening on :: too (dual-stack).
  const url = listenUrl(host, port, '127.0.0.1');
  const existing = await readLocalAccess(dataDir);
  // A file naming the address this process now listens on is stale, whatever its pid: its writer cannot be
  // listening there (a process killed with -9 leaves its file, and its pid may have been reused since).
  if (existing && existing.pid !== process.pid && existing.url !== url && alive(existing.pid)) throw new LocalAccessTaken(path.join(dataDir, LOCAL_ACCESS_FILE), existing.pid);
  const token = randomBytes(32).toString('base64url');
  const access: LocalAccess = { pid: process.pid, url, token, hookBaseUrl };
  const file = path.join(dataDir, LOCAL_ACCESS_FILE);
  await prepareDataDir(dataDir);
  // Created 0600 from the first byte (not chmod'ed after), then moved into place; what a kill -9 mid-write left
  // of an earlier start's is swept first.
  await sweepStaleTemps(dataDir);
  await sweepEarlierTemps(dataDir, alive);
  await writeFileAtomically(file, JSON.stringify(access));
  return {
    token: { name: LOCAL_CLI_TOKEN_NAME, scope: 'full', token },
    async remove() {
      const current = await readLocalAccess(dataDir);
      if (current?.pid === process.pid && current.token === token) await fsp.rm(file, { force: true });
    },
  };
}

/** The temp file releases before writeFileAtomically wrote the file through: `admin-api.json.<pid>.tmp`. */
const EARLIER_TEMP = /^admin-api\.json\.(\d+)\.tmp$/;

/**
 * Remove the temp files earlier releases left (a kill -9 between their open and their rename, once per kill): one
 * whose pid no longer runs, or is this process's (this release never writes that name: it is a former life's,
 * as it always is for PID 1 in a container), or older than STALE_TEMP_MS (its pid reused since). Not every one
 * but this process's: an earlier release may still be starting on this DATA_DIR, between its open and its
 * rename, and its start would fail. Never throws, as sweepStaleTemps.
 */
async function sweepEarlierTemps(dataDir: string, alive: (pid: number) => boolean = isAlive, now = Date.now()): Promise<void> {
  const names = await fsp.readdir(dataDir).catch(() => [] as string[]);
  for (const name of names) {
    const pid = EARLIER_TEMP.exec(name)?.[1];
    if (pid === undefined) continue;
    const file = path.join(dataDir, name);
    const stat = await fsp.lstat(file).catch(() => null);
    if (!stat?.isFile()) continue;
    const abandoned = Number(pid) === process.pid || !alive(Number(pid)) || now - stat.mtimeMs > STALE_TEMP_MS;
    if (abandoned) await fsp.rm(file, { force: true }).catch(() => undefined);
  }
}

export async function readLocalAccess(dataDir: string): Promise<LocalAccess | null> {
  try {
    const parsed = JSON.parse(await fsp.readFile(path.join(dataDir, LOCAL_ACCESS_FILE), 'utf8')) as Partial<LocalAccess>;
    if (typeof parsed.pid !== 'number' || typeof parsed.url !== 'string' || typeof parsed.token !== 'string') return null;
    return parsed as LocalAccess;
  } catch {
    return null;
  }
}
