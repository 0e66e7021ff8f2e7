import { createIsbotFromList, list as isbotList } from 'isbot';

/**
 * "Ignore Bots" (SPEC §2.1) is meant for link previewers, crawlers and URL scanners. isbot also
 * flags HTTP client libraries, command-line tools and AS2 servers, which are exactly the machines
 * that call webhooks, so the matcher is isbot's own pattern list minus the patterns below
 * (DESIGN §6). Each one is removed because it matches a webhook caller; the unit test checks that
 * every entry is still in isbot's list and is matched by at least one of the client user-agents.
 */
export const REMOVED_PATTERNS: readonly string[] = Object.freeze([
  // Generic "http" token: Go-http-client, okhttp, Apache-HttpClient, Java-http-client, HTTPie,
  // python-httpx, aiohttp, GuzzleHttp, System.Net.Http / HttpClient, and the URL node-fetch
  // and got put in their user-agent. (Partly compensated by COMPATIBLE_WITH_INFO_URL below.)
  '(?<!(?:lib))http',
  // A bare "Product/1.2.3" (or "Product Name 1.2") user-agent: the shape of axios, undici,
  // insomnia, curl, python-requests, PostmanRuntime, okhttp, Ruby, Faraday, OpenAS2, pyas2,
  // "AS2 Gateway", "Mendelson AS2 Server ...".
  '^[\\w \\.\\-\\(?:\\):%]+(?:/v?\\d+(?:\\.\\d+)?(?:\\.\\d{1,10})*?)?(?:,|$)',
  // A single "Word/token" user-agent without dots: Guzzle 7 sends exactly "GuzzleHttp/7".
  '^\\w+/[\\w\\(\\)]*$',
  // Any ".com": node-fetch 2 "(+https://github.com/bitinn/node-fetch)", got
  // "(https://github.com/sindresorhus/got)", mendelson "... - www.mendelson-e-c.com".
  '\\.com\\b',
  // "url" inside curl, libcurl and Python-urllib.
  'url',
  // Java/17.0.9, Java-http-client, "Apache-HttpClient/4.5.14 (Java/17.0.9)".
  'java(?!;)',
  // libwww-perl (LWP).
  'perl',
  // node-fetch and Node's own fetch ("node").
  'node',
  // AS2 servers: "mendelson AS2 Server", "OpenAS2Server", "OpenAS2 Server 3.x".
  'server',
  // Wget.
  '^wget',
  // python-requests, Python-urllib, "Python/3.x aiohttp/3.x".
  '^python',
  // PostmanRuntime.
  '^postman',
  // Webhook senders isbot counts as bots: RestSharp (.NET) and Ruby's rest-client ("^rest"),
  // CData/RSSBus AS2 Connector ("^rss"; feed readers are neither previewers nor crawlers of our URLs),
  // Zoom's webhooks ("Zoom Marketplace/1.0a"), Twilio ("TwilioProxy/1.1", via "proxy": replaced by a
  // narrower pattern below that still catches image proxies such as Slack-ImgProxy).
  '^rest',
  '^rss',
  '^zoom marketplace/',
  'proxy',
]);

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
