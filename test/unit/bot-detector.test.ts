import { isbot, list as isbotList } from 'isbot';
import {
  BOT_PATTERNS,
  EXTRA_PATTERNS,
  MAX_USER_AGENT_CHARS,
  REMOVED_PATTERNS,
  WEBHOOK_SENDERS,
  isBotUserAgent,
  patternsMatching,
} from '../../services/triggers/bot-detector';
import { BROWSERS as BROWSER_LIST, WEBHOOK_CLIENTS } from '../../services/triggers/webhook-callers';

/** Link previewers, crawlers and URL scanners: Ignore Bots must reject these. */
const BOTS: [string, string][] = [
  ['Slack link expander', 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)'],
  ['Slack image proxy', 'Slack-ImgProxy (+https://api.slack.com/robots)'],
  ['Slackbot', 'Slackbot 1.0 (+https://api.slack.com/robots)'],
  ['Facebook', 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)'],
  ['Facebook, bare', 'facebookexternalhit/1.1'],
  ['Facebot', 'Facebot'],
  ['LinkedIn', 'LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)'],
  ['Twitter', 'Twitterbot/1.0'],
  ['Telegram', 'TelegramBot (like TwitterBot)'],
  ['WhatsApp', 'WhatsApp/2.23.20.0'],
  ['WhatsApp Android', 'WhatsApp/2.23.20.0 A'],
  ['WhatsApp iOS', 'WhatsApp/2.2337.7 i'],
  ['Discord', 'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)'],
  ['Skype', 'Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com'],
  [
    'Microsoft Teams (Skype previewer)',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/58.0.3029.110 Safari/537.36 SkypeUriPreview Preview/0.5',
  ],
  [
    'Microsoft Teams / Outlook (MicrosoftPreview)',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0 MicrosoftPreview/2.0 +https://aka.ms/MicrosoftPreview',
  ],
  [
    'Googlebot',
    'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/120.0.6099.199 Safari/537.36',
  ],
  ['Googlebot, classic', 'Googlebot/2.1 (+http://www.google.com/bot.html)'],
  ['bingbot', 'Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)'],
  [
    'Applebot',
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)',
  ],
  ['DuckDuckBot', 'DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)'],
  ['YandexBot', 'Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)'],
  ['AhrefsBot', 'Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)'],
  ['SemrushBot', 'Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)'],
  [
    'urlscan.io',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 (compatible; urlscan.io; +https://urlscan.io/about/)',
  ],
  [
    'VirusTotal',
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/74.0.3729.169 Safari/537.36 VirusTotal',
  ],
  ['Google Safe Browsing', 'Google-Safety'],
  ['CensysInspect', 'Mozilla/5.0 (compatible; CensysInspect/1.1; +https://about.censys.io/)'],
  ['generic crawler', 'Mozilla/5.0 (compatible; SomeCrawler/1.0; +http://example.org/crawler.html)'],
  ['generic spider', 'ExampleSpider/2.1 (+http://example.net/spider)'],
  ['bare crawler', 'my-web-crawler/0.3'],
  ['Pinterest', 'Mozilla/5.0 (compatible; Pinterestbot/1.0; +http://www.pinterest.com/bot.html)'],
  ['Reddit', 'Mozilla/5.0 (compatible; redditbot/1.0; +http://www.reddit.com/feedback)'],
  ['GPTBot', 'Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)'],
  ['Common Crawl', 'CCBot/2.0 (https://commoncrawl.org/faq/)'],
  [
    'headless Chrome',
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.6099.71 Safari/537.36',
  ],
  // Caught only by EXTRA_PATTERNS once the generic "http" / ".com" patterns are gone.
  ['Embedly', 'Mozilla/5.0 (compatible; Embedly/0.2; +http://support.embed.ly/)'],
  ['VK share', 'Mozilla/5.0 (compatible; vkShare; +http://vk.com/dev/Share)'],
  ['Yahoo! Slurp', 'Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)'],
  ['Qwant', 'Mozilla/5.0 (compatible; Qwantify/2.4w; +https://www.qwant.com/)/2.4w'],
  ['Naver Yeti', 'Mozilla/5.0 (compatible; yeti/1.1; +https://naver.me/spd)'],
  ['Iframely', 'Iframely/1.3.1 (+https://iframely.com/docs/about)'],
  ['Scrapy', 'Scrapy/2.11.0 (+https://scrapy.org)'],
];

/** Browsers and HTTP clients, tools and AS2 servers: the list the matcher is built against (webhook-callers.ts). */
const BROWSERS = [...BROWSER_LIST];
const CLIENTS = [...WEBHOOK_CLIENTS];

/** Webhook senders that isbot's patterns take for bots: let through by WEBHOOK_SENDERS. */
const SENDERS: [string, string][] = [
  ['Google push notifications', 'APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)'],
  ['Google Apps Script', 'Mozilla/5.0 (compatible; Google-Apps-Script; beanserver; +https://script.google.com; id: UAEmdDd8abc)'],
  ['Google Cloud Scheduler', 'Google-Cloud-Scheduler'],
  ['Google Cloud Tasks', 'Google-Cloud-Tasks'],
  ['WordPress HTTP API', 'WordPress/6.4.2; https://shop.example.com'],
  ['Intercom', 'Intercom-Webhooks-Robot'],
];

const matchesPattern = (pattern: string, ua: string): boolean => new RegExp(pattern, 'i').test(ua);

describe('isBotUserAgent', () => {
  it.each(BOTS)('flags the %s previewer/crawler/scanner', (_name, ua) => {
    expect(isBotUserAgent(ua)).toBe(true);
  });

  it.each(BROWSERS)('lets the %s browser through', (_name, ua) => {
    expect(isBotUserAgent(ua)).toBe(false);
  });

  it.each(CLIENTS)('lets the %s HTTP client / AS2 server through', (_name, ua) => {
    expect(isBotUserAgent(ua)).toBe(false);
  });

  it.each(SENDERS)('lets the %s webhook sender through', (_name, ua) => {
    expect(isBotUserAgent(ua)).toBe(false);
  });

  it(`reads only the first ${MAX_USER_AGENT_CHARS} characters of a User-Agent`, () => {
    expect(isBotUserAgent(`Googlebot/2.1 ${'x'.repeat(20_000)}`)).toBe(true);
    const browser = 'Mozilla/5.0 (X11; Linux x86_64) ';
    const fill = (chars: number) => browser.repeat(Math.ceil(chars / browser.length)).slice(0, chars);
    expect(isBotUserAgent(`${fill(MAX_USER_AGENT_CHARS - 'Googlebot'.length)}Googlebot/2.1`)).toBe(true);
    expect(isBotUserAgent(`${fill(MAX_USER_AGENT_CHARS)}Googlebot/2.1`)).toBe(false);
    // The crawler convention still needs its URL near "compatible;" (the pattern is bounded).
    expect(isBotUserAgent(`Mozilla/5.0 (compatible; Thing/2.3; ${'x'.repeat(300)} +http://example.org)`)).toBe(false);
  });

  it('treats a missing or blank User-Agent as not a bot', () => {
    expect(isBotUserAgent(undefined)).toBe(false);
    expect(isBotUserAgent('')).toBe(false);
    expect(isBotUserAgent('   ')).toBe(false);
  });

  it('is case-insensitive', () => {
    expect(isBotUserAgent('GOOGLEBOT/2.1')).toBe(true);
    expect(isBotUserAgent('CURL/8.4.0')).toBe(false);
  });
});

describe('pattern list', () => {
  it('documents why the removal is needed: stock isbot flags most of these clients', () => {
    const flaggedByStock = CLIENTS.filter(([, ua]) => isbot(ua)).map(([name]) => name);
    expect(flaggedByStock).toEqual(expect.arrayContaining(['curl', 'python-requests', 'axios', 'Go', 'Java HttpURLConnection']));
    expect(flaggedByStock).toEqual(expect.arrayContaining(['Apache HttpClient 4', 'Postman', 'Mendelson AS2 Server', 'OpenAS2 sender']));
  });

  it('removes only patterns that exist in isbot, each of them matching some webhook client or browser', () => {
    expect(new Set(REMOVED_PATTERNS).size).toBe(REMOVED_PATTERNS.length);
    for (const pattern of REMOVED_PATTERNS) {
      expect(isbotList).toContain(pattern);
      const callers = [...CLIENTS, ...BROWSERS].filter(([, ua]) => matchesPattern(pattern, ua));
      expect({ pattern, matchesACaller: callers.length > 0 }).toEqual({ pattern, matchesACaller: true });
    }
  });

  it('finds what to remove by what a pattern matches, not by how it is spelled (isbot 5.2 respelled "http" and "node")', () => {
    const list = ['(?<!(?:lib))http', '(?<!lib)http', 'node', 'node\\b', '^[\\w\\-]+/[\\w]+$', 'googlebot', 'facebookexternalhit'];
    const callers = CLIENTS.map(([, ua]) => ua);
    expect(patternsMatching(list, callers)).toEqual(['(?<!(?:lib))http', '(?<!lib)http', 'node', 'node\\b', '^[\\w\\-]+/[\\w]+$']);
  });

  it('removes patterns that, with isbot 5.1.28, were named by their text', () => {
    // Their spelling in the installed isbot may differ; what they matched must still be gone.
    for (const [name, ua] of [['aiohttp', 'Python/3.11 aiohttp/3.9.1'], ['Go', 'Go-http-client/1.1'], ['Java HttpClient', 'Java-http-client/17.0.9'], ['.NET', 'System.Net.Http/8.0.0'], ['Node fetch', 'node'], ['LWP', 'libwww-perl/6.72']]) {
      expect({ name, hits: BOT_PATTERNS.filter((pattern) => matchesPattern(pattern, ua)) }).toEqual({ name, hits: [] });
    }
  });

  it('keeps every other isbot pattern', () => {
    const kept = isbotList.filter((pattern) => !REMOVED_PATTERNS.includes(pattern));
    expect(BOT_PATTERNS.slice(0, kept.length)).toEqual(kept);
    expect(BOT_PATTERNS.length).toBe(kept.length + EXTRA_PATTERNS.length);
  });

  it('no kept pattern matches a client or a browser', () => {
    for (const [name, ua] of [...CLIENTS, ...BROWSERS]) {
      const hits = BOT_PATTERNS.filter((pattern) => matchesPattern(pattern, ua));
      expect({ name, hits }).toEqual({ name, hits: [] });
    }
  });

  it('each webhook sender pattern is needed (the bot patterns catch its sender) and lets no bot through', () => {
    for (const pattern of WEBHOOK_SENDERS) {
      const senders = SENDERS.filter(([, ua]) => matchesPattern(pattern, ua));
      expect({ pattern, needed: senders.length > 0 && senders.every(([, ua]) => BOT_PATTERNS.some((bot) => matchesPattern(bot, ua))) }).toEqual({ pattern, needed: true });
      expect({ pattern, bots: BOTS.filter(([, ua]) => matchesPattern(pattern, ua)).map(([name]) => name) }).toEqual({ pattern, bots: [] });
    }
  });

  it('each extra pattern catches a bot and no client or browser', () => {
    for (const pattern of EXTRA_PATTERNS) {
      expect(isbotList).not.toContain(pattern);
      expect(BOTS.some(([, ua]) => matchesPattern(pattern, ua))).toBe(true);
    }
  });

  it('leaves stock isbot and its exported list untouched', () => {
    for (const pattern of REMOVED_PATTERNS) expect(isbotList).toContain(pattern);
    expect(isbot('curl/8.4.0')).toBe(true);
  });
});
