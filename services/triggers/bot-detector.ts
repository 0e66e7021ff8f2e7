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
  '\\bcompatible;[^)]*\\bhttps?://',
  // Iframely link previews: "Iframely/1.3.1 (+https://iframely.com/docs/about)" (was caught by "http").
  '^iframely/',
  // The Scrapy crawler framework's default "Scrapy/2.11.0 (+https://scrapy.org)" (was caught by "http").
  '^scrapy/',
  // VirusTotal's URL scanner appends "VirusTotal" to a browser UA; isbot does not know it.
  'virustotal',
  // isbot's "proxy" without Twilio's webhook sender.
  '(?<!twilio)proxy',
]);

const REMOVED = new Set(REMOVED_PATTERNS);

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
  return matches(userAgent);
}
