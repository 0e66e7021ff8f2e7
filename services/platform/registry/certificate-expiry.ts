import type { Logger } from '../logger/logger';
import { credentialCertificates, daysToExpiry, holdsCertificates, isReadable, type CertificateRole } from './certificate-facts';
import type { CredentialSealer } from './credential-crypto';
import type { Registry } from './registry';

/**
 * The certificates of the registry's credentials, watched by a running service: what the
 * `ingress.certificate.days_to_expiry` gauge reports, and a check once a day (the first shortly after
 * start) that logs a warning for each certificate with fewer than `warningDays` days left
 * (`certificate.expiring`) and an error for each one past its notAfter (`certificate.expired`).
 *
 * The credentials are read (listed, opened with the sealer, their certificates parsed) at most once per
 * `refreshMs`, not at every metric collection; days to expiry are computed from the clock at each read.
 * The timers are unref'd: the watch never keeps the process alive. Clock and timers are collaborators,
 * so tests need no real waiting.
 */
export interface WatchedCertificate {
  credentialId: string;
  role: CertificateRole;
  field: string;
  subject: string;
  fingerprint: string;
  notAfter: string;
  daysToExpiry: number;
}

export interface CertificateExpiryWatch {
  /** Every readable certificate with its days to expiry now (cached read of the registry). */
  certificates(): Promise<WatchedCertificate[]>;
  /** Read the registry now and log what expires or has expired; what the daily timer runs. */
  check(): Promise<void>;
  /** Start the daily check: the first after `firstCheckMs`, then every `intervalMs`. */
  start(): void;
  stop(): void;
}

export interface Timers {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export interface CertificateExpiryOptions {
  registry: Pick<Registry, 'credentials'>;
  sealer: CredentialSealer;
  logger: Logger;
  /** Warn when fewer than this many days are left (CERT_EXPIRY_WARNING_DAYS); 0: only expired certificates are logged. */
  warningDays: number;
  clock?: () => number;
  timers?: Timers;
  /** Delay of the first check after start (default 10 s: after start-up's own log lines). */
  firstCheckMs?: number;
  /** Between checks (default 24 h). */
  intervalMs?: number;
  /** After a check that could not read the registry, the next try (default 1 h). */
  retryMs?: number;
  /** How long one read of the credentials serves the gauge (default 60 s). */
  refreshMs?: number;
}

const unrefTimers: Timers = {
  set: (run, ms) => setTimeout(run, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface Snapshot { at: number; entries: Entry[]; unreadable: { credentialId: string; field: string; why: string }[] }
interface Entry { credentialId: string; role: CertificateRole; field: string; subject: string; fingerprint: string; notAfter: Date }

export function watchCertificateExpiry(options: CertificateExpiryOptions): CertificateExpiryWatch {
  const clock = options.clock ?? Date.now;
  const timers = options.timers ?? unrefTimers;
  const firstCheckMs = options.firstCheckMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 86_400_000;
  const retryMs = options.retryMs ?? 3_600_000;
  const refreshMs = options.refreshMs ?? 60_000;
  const logger = options.logger;

  let snapshot: Snapshot | null = null;
  let reading: Promise<Snapshot> | null = null;
  let timer: unknown = null;
  let stopped = false;

  async function readRegistry(): Promise<Snapshot> {
    const entries: Entry[] = [];
    const unreadable: { credentialId: string; field: string; why: string }[] = [];
    for (const stored of await options.registry.credentials.list()) {
      // The type is stored in clear: credentials without certificates are never opened.
      if (!holdsCertificates(stored.type)) continue;
      let facts;
      try {
        facts = credentialCertificates(options.sealer.open(stored), clock()) ?? [];
      } catch {
        unreadable.push({ credentialId: stored.id, field: '*', why: 'the credential cannot be opened with INGRESS_ENCRYPTION_KEY' });
        continue;
      }
      for (const fact of facts) {
        if (!isReadable(fact)) { unreadable.push({ credentialId: stored.id, field: fact.field, why: fact.error }); continue; }
        entries.push({ credentialId: stored.id, role: fact.role, field: fact.field, subject: fact.subject, fingerprint: fact.fingerprint, notAfter: new Date(fact.notAfter) });
      }
    }
    return { at: clock(), entries, unreadable };
  }

  function read(fresh: boolean): Promise<Snapshot> {
    if (!fresh && snapshot && clock() - snapshot.at < refreshMs) return Promise.resolve(snapshot);
    const pending = reading ?? (reading = readRegistry().then((read) => (snapshot = read)).finally(() => { reading = null; }));
    return pending;
  }

  const withDays = (entries: Entry[]): WatchedCertificate[] => {
    const now = clock();
    return entries.map(({ notAfter, ...rest }) => ({ ...rest, notAfter: notAfter.toISOString(), daysToExpiry: daysToExpiry(notAfter, now) }));
  };

  async function check(): Promise<void> {
    const { entries, unreadable } = await read(true);
    for (const c of withDays(entries)) {
      const fields = { credentialId: c.credentialId, role: c.role, field: c.field, subject: c.subject, fingerprint: c.fingerprint, notAfter: c.notAfter, daysToExpiry: c.daysToExpiry };
      if (c.daysToExpiry < 0) logger.error('certificate expired', { event: 'certificate.expired', ...fields });
      else if (c.daysToExpiry < options.warningDays) logger.warn('certificate expires soon', { event: 'certificate.expiring', warningDays: options.warningDays, ...fields });
    }
    for (const u of unreadable) logger.warn('certificate cannot be read', { event: 'certificate.unreadable', credentialId: u.credentialId, field: u.field, reason: u.why });
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = timers.set(() => {
      timer = null;
      check().then(
        () => schedule(intervalMs),
        (error: unknown) => {
          logger.warn('certificate expiry check failed; trying again later', { event: 'certificate.check-failed', error, retryMs });
          schedule(retryMs);
        },
      );
    }, ms);
  }

  return {
    async certificates() {
      return withDays((await read(false)).entries);
    },
    check,
    start() {
      if (timer === null && !stopped) schedule(firstCheckMs);
    },
    stop() {
      stopped = true;
      if (timer !== null) timers.clear(timer);
      timer = null;
    },
  };
}
