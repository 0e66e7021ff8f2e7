import { createIsbotFromList, list as isbotList } from 'isbot';
import { BROWSERS, WEBHOOK_CLIENTS } from './webhook-callers';

/**
 * "Ignore Bots" (SPEC §2.1) is meant for link previewers, crawlers and URL scanners. isbot also
 * flags HTTP client libraries, command-line tools and AS2 servers, which are exactly the machines
 * that call webhooks, so the matcher is isbot's own pattern list minus every pattern that matches one of
 * those callers or a browser (webhook-callers.ts), plus EXTRA_PATTERNS (DESIGN §6).
 *
 * The removal is by behaviour, not by pattern text: isbot rewrites its patterns between releases (5.2
 * turned `(?<!(?:lib))http` into `(?<!lib)http`, and `node` into `node\b`), and a list of texts to remove
 * silently stopped removing them, making aiohttp, Go, Java and .NET clients bots. What 5.1.28 removed, for
 * the record: the generic "http" token (Go-http-client, okhttp, Apache-HttpClient, HTTPie, httpx, aiohttp,
 * System.Net.Http, the URLs node-fetch and got put in their User-Agent); the bare "Product/1.2.3" shape
 * (axios, undici, curl, python-requests, Postman, OpenAS2, pyas2, "AS2 Gateway"); "Word/token" (Guzzle 7);
 * ".com" (node-fetch 2, got, mendelson); "url" (curl, Python-urllib); "java"; "perl" (LWP); "node"; "server"
 * (mendelson, OpenAS2); "^wget"; "^python"; "^postman"; "^rest" (RestSharp, rest-client); "^rss" (CData);
 * "^zoom marketplace/"; "proxy" (Twilio; EXTRA_PATTERNS puts back a narrower one).
 * The unit test fails when an isbot upgrade makes any caller a bot, or lets a known bot through.
 */
const MUST_PASS: readonly string[] = [...WEBHOOK_CLIENTS, ...BROWSERS].map(([, userAgent]) => userAgent);

/** The patterns of `list` that match any of `userAgents` (case-insensitively, as isbot matches). */
export function patternsMatching(list: readonly string[], userAgents: readonly string[]): string[] {
  return list.filter((pattern) => {
    const regex = new RegExp(pattern, 'i');
    return userAgents.some((userAgent) => regex.test(userAgent));
  });
}

/** isbot's patterns that match a caller that must pass, as isbot spells them in the installed version. */
export const REMOVED_PATTERNS: readonly string[] = Object.freeze(patternsMatching(isbotList, MUST_PASS));

/**
 * Previewers, crawlers and scanners the reduced list (or isbot itself) would miss.
 */
export const EXTRA_PATTERNS: readonly string[] = Object.freeze([
  // The crawler convention "Mozilla/5.0 (compatible; Name/1.0; +http://info-url)". Without the
  // generic "http" and ".com" patterns, previewers such as Embedly and vkShare and crawlers such as
  // Yahoo! Slurp, Qwantify and Naver Yeti would no longer match; no HTTP client library uses
  // "compatible;" together with a URL.
  // (Bounded: with `[^)]*`, a user agent repeating "compatible; " cost time quadratic in its length.)
  '\\bcompatible;[^)]{0,256}\\bhttps?://',
  // Iframely link previews: "Iframely/1.3.1 (+https://iframely.com/docs/about)" (was caught by "http").
  '^iframely/',
  // The Scrapy crawler framework's default "Scrapy/2.11.0 (+https://scrapy.org)" (was caught by "http").
  '^scrapy/',
  // VirusTotal's URL scanner appends "VirusTotal" to a browser UA; isbot does not know it.
  'virustotal',
  // isbot's "proxy" without Twilio's webhook sender.
  '(?<!twilio)proxy',
]);

/**
 * Webhook senders that isbot's list (or the extra patterns) takes for bots, judged before either. Google's
 * and WordPress's are caught by isbot's "google" and "^wordpress", Intercom's by "robot".
 */
export const WEBHOOK_SENDERS: readonly string[] = Object.freeze([
  // Google's push notifications: Pub/Sub push subscriptions, Gmail and Calendar watch channels.
  '^apis-google',
  // Apps Script's UrlFetchApp: "Mozilla/5.0 (compatible; Google-Apps-Script; beanserver; +https://script.google.com; id: …)".
  '\\(compatible; google-apps-script;',
  // Cloud Scheduler and Cloud Tasks HTTP targets.
  '^google-cloud-(?:scheduler|tasks)$',
  // WordPress's HTTP API, which WordPress plugins send webhooks with: "WordPress/6.4.2; https://example.com".
  '^wordpress/[\\d.]+; https?://',
  // A sender that names itself a webhook sender: "Intercom-Webhooks-Robot".
  'webhook',
]);

/**
 * How much of a User-Agent is read. Identifiers come early; the matcher is one large alternation whose cost
 * grows with the text, and a User-Agent may be as long as Node's 16 KiB header limit allows.
 */
export const MAX_USER_AGENT_CHARS = 1024;

const REMOVED = new Set(REMOVED_PATTERNS);
const SENDER = new RegExp(WEBHOOK_SENDERS.join('|'), 'i');

/** The pattern list actually used: isbot's list minus REMOVED_PATTERNS, plus EXTRA_PATTERNS. */
export const BOT_PATTERNS: readonly string[] = Object.freeze([
  ...isbotList.filter((pattern) => !REMOVED.has(pattern)),
  ...EXTRA_PATTERNS,
]);

const matches = createIsbotFromList([...BOT_PATTERNS]);

/**
 * True when the User-Agent belongs to a known link previewer, crawler or URL scanner. A missing
 * or blank User-Agent is not a bot: unidentified clients are not rejected.
 */
export function isBotUserAgent(userAgent: string | undefined): boolean {
  if (userAgent === undefined || userAgent.trim() === '') return false;
  const head = userAgent.length > MAX_USER_AGENT_CHARS ? userAgent.slice(0, MAX_USER_AGENT_CHARS) : userAgent;
  return !SENDER.test(head) && matches(head);
}
