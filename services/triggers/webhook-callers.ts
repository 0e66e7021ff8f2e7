/**
 * User-Agents of the machines and people that call webhooks and must never be taken for bots: HTTP client
 * libraries and command-line tools, AS2 servers, webhook senders that send a plain client's User-Agent, and
 * browsers. bot-detector.ts removes from isbot's list every pattern that matches one of these, whatever
 * the pattern's text (isbot renames and adds patterns between releases), and its test fails when any of
 * them is a bot. A caller that isbot flags and that has to be let through goes here, with where it came from.
 */
export const WEBHOOK_CLIENTS: readonly (readonly [name: string, userAgent: string])[] = Object.freeze([
  // Webhook senders with a plain client's User-Agent: Zoom, Twilio, RestSharp (.NET), Ruby's rest-client,
  // the CData/RSSBus AS2 Connector.
  ['Zoom webhooks', 'Zoom Marketplace/1.0a'],
  ['Twilio', 'TwilioProxy/1.1'],
  ['RestSharp', 'RestSharp/110.2.0.0'],
  ['Ruby rest-client', 'rest-client/2.1.0 (linux x86_64) ruby/3.2.2p53'],
  ['CData AS2 Connector', 'RSSBus AS2 Connector 2023 - www.cdata.com'],
  // Command-line tools and HTTP client libraries.
  ['curl', 'curl/8.4.0'],
  ['curl 7', 'curl/7.81.0'],
  ['Wget', 'Wget/1.21.4'],
  ['Wget with platform', 'Wget/1.20.3 (linux-gnu)'],
  ['python-requests', 'python-requests/2.31.0'],
  ['pyas2 (python-requests)', 'python-requests/2.28.2'],
  ['Python urllib', 'Python-urllib/3.11'],
  ['aiohttp', 'Python/3.11 aiohttp/3.9.1'],
  ['httpx', 'python-httpx/0.25.2'],
  ['axios', 'axios/1.6.2'],
  ['axios 0.x', 'axios/0.27.2'],
  ['node-fetch 2', 'node-fetch/1.0 (+https://github.com/bitinn/node-fetch)'],
  ['node-fetch 3', 'node-fetch'],
  ['undici / Node 18-20 fetch', 'undici'],
  ['Node 21+ fetch', 'node'],
  ['got 11', 'got (https://github.com/sindresorhus/got)'],
  ['got, versioned', 'got/12.6.1'],
  ['Go', 'Go-http-client/1.1'],
  ['Go HTTP/2', 'Go-http-client/2.0'],
  ['Java HttpURLConnection', 'Java/17.0.9'],
  ['Java 8 HttpURLConnection', 'Java/1.8.0_392'],
  ['Java HttpClient', 'Java-http-client/17.0.9'],
  ['OkHttp', 'okhttp/4.12.0'],
  ['Apache HttpClient 4', 'Apache-HttpClient/4.5.14 (Java/17.0.9)'],
  ['Apache HttpClient 5', 'Apache-HttpClient/5.2.1 (Java/21.0.1)'],
  ['Postman', 'PostmanRuntime/7.36.0'],
  ['Insomnia', 'insomnia/2023.5.8'],
  ['HTTPie', 'HTTPie/3.2.2'],
  ['libwww-perl', 'libwww-perl/6.72'],
  ['lwp-request', 'lwp-request/6.72 libwww-perl/6.72'],
  ['Ruby Net::HTTP', 'Ruby'],
  ['Faraday', 'Faraday v2.7.11'],
  ['Guzzle 7', 'GuzzleHttp/7'],
  ['Guzzle 6', 'GuzzleHttp/6.5.5 curl/7.81.0 PHP/8.1.2'],
  ['.NET System.Net.Http', 'System.Net.Http/8.0.0'],
  ['.NET HttpClient', 'Microsoft.NET/4.8 HttpClient'],
  ['Dart', 'Dart/3.2 (dart:io)'],
  // AS2 servers.
  ['Mendelson AS2 Server', 'Mendelson AS2 Server 1.1 build 70'],
  ['mendelson opensource AS2', 'mendelson opensource AS2 1.1 build 39 - www.mendelson-e-c.com'],
  ['OpenAS2 sender', 'OpenAS2 AS2Sender'],
  ['OpenAS2 async MDN sender', 'OpenAS2 AsynchMDNSender'],
  ['OpenAS2 server', 'OpenAS2Server/3.10.0'],
  ['pyas2', 'pyas2/1.2.3'],
  ['AS2 Gateway', 'AS2 Gateway/4.2.1'],
  ['AS2 Gateway, bare', 'AS2 Gateway'],
]);

/** Real browsers (and a person's Teams desktop client). */
export const BROWSERS: readonly (readonly [name: string, userAgent: string])[] = Object.freeze([
  ['Chrome Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'],
  ['Chrome macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'],
  ['Chrome Linux', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36'],
  ['Chrome Android', 'Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36'],
  ['Chrome iOS', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/120.0.6099.119 Mobile/15E148 Safari/604.1'],
  ['Firefox Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0'],
  ['Firefox macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:121.0) Gecko/20100101 Firefox/121.0'],
  ['Firefox Linux', 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0'],
  ['Firefox Android', 'Mozilla/5.0 (Android 14; Mobile; rv:121.0) Gecko/121.0 Firefox/121.0'],
  ['Safari macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15'],
  ['Safari iPhone', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_2_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1'],
  ['Safari iPad', 'Mozilla/5.0 (iPad; CPU OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1'],
  ['Edge Windows', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91'],
  ['Edge macOS', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91'],
  ['Edge Android', 'Mozilla/5.0 (Linux; Android 10; HD1913) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36 EdgA/120.0.2210.115'],
  ['Edge iOS', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 EdgiOS/120.2210.116 Mobile/15E148 Safari/605.1.15'],
  ['Microsoft Teams desktop client', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Teams/1.6.00.33362 Chrome/108.0.5359.215 Electron/22.3.27 Safari/537.36'],
]);
