import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { attributeNames, endOfOther, tagAt, type Tag } from './markup';

/**
 * XML as this trigger reads it: well-formedness checked, no DTD at all (SOAP 1.1 forbids one and the
 * platform never sends one, so refusing it removes entity bombs and external entities outright), and
 * values kept as the strings they are on the wire ("18250.500" stays a string).
 */
export class XmlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'XmlError';
  }
}

/** Deeper than any document the platform sends (~15 levels), far below where the parser's recursion gives out. */
export const MAX_DEPTH = 512;

const OPTIONS = {
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  textNodeName: '#text',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  // Character references (&#65; &#x41;) are XML; fast-xml-parser decodes them only under this option.
  htmlEntities: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  // fast-xml-parser 5.3.8+ refuses documents nested deeper than this, 100 by default, which legitimate deep
  // shipments pass. Ours is MAX_DEPTH, enforced by checkMarkup before the parser runs (the parser's own count
  // lets one more level through).
  maxNestedTags: MAX_DEPTH,
  // Element and attribute names are kept as sent (SPEC §2.3), `toString` or `valueOf` included: fast-xml-parser
  // 5.5+ would rename those to `__toString` (its own code and ours read parsed objects only through their own
  // properties, and the output is JSON text). `__proto__`, `constructor` and `prototype` it refuses outright
  // (UNSAFE_NAME below).
  onDangerousProperty: (name: string) => name,
  // By default fast-xml-parser builds each element's whole path as a string (`a.b.c…`) for callbacks we do not
  // set: work proportional to the element's depth, for every element, which made 500 levels of nesting around
  // a few hundred thousand siblings cost seconds within the budget.
  jPath: false,
};

/** Prefixes kept: the envelope's namespaces are checked. */
const qualified = new XMLParser({ ...OPTIONS, removeNSPrefix: false });
/** Local names only: the platform's document namespaces change with the schema year. */
const local = new XMLParser({ ...OPTIONS, removeNSPrefix: true });

export type XmlValue = string | XmlObject | XmlValue[];
export interface XmlObject { [name: string]: XmlValue }


/**
 * What one request may make the parser do. Parsing is synchronous, so its cost is time the event loop
 * serves nobody else; the parsed tree also costs about 125 bytes of heap per element. The budget is in
 * units of roughly an element's cost (about 1.5 µs of CPU to validate and parse, measured with
 * fast-xml-parser 5.12): each element start, attribute and entity or character reference (`&amp;`, `&#65;`)
 * is one unit, and every TEXT_CHARS_PER_UNIT characters of the document another (the parser copies
 * text a character at a time). A small compressed Message of empty elements, or of megabytes of `&#65;`,
 * thus cannot turn into gigabytes or seconds. Shared by every document of a request.
 */
export interface ParseBudget {
  units: number;
}

/** Characters of a document that cost the parser about what one element does (about 50 ns each in a long text). */
export const TEXT_CHARS_PER_UNIT = 32;

/**
 * Levels of nesting that cost one more unit for each element standing that deep: the parser keeps a stack of
 * the open elements, and some of its work (and a future version's) walks it, so a deep element may cost more
 * than a shallow one; without this, the worst shape of a request would be many siblings as deep as allowed.
 */
export const DEPTH_LEVELS_PER_UNIT = 64;

/**
 * Different element names one element's children may have before each new one costs DISTINCT_NAME_UNITS more:
 * the parser keeps an entry per name for each parent, and past a few thousand names an element costs it five to
 * ten times what one does among few names. The platform's documents have well under a hundred.
 */
export const FREE_DISTINCT_NAMES = 256;
export const DISTINCT_NAME_UNITS = 4;

/**
 * Attributes one element may have. fast-xml-parser's cost per attribute grows with how many its element has
 * (350 000 on one element took it over 2 s, seven times what as many spread over elements take), so the budget's
 * unit per attribute holds only for a bounded number; the platform sends a handful (a Message has seven).
 */
export const MAX_ATTRIBUTES = 256;

/** A name as a Fault shows it: as sent, unless it is long. */
const shown = (name: string) => (name.length > 64 ? `${name.slice(0, 64)}…` : name);

/** A namespace declaration is not an attribute of the converted element (fast-xml-parser drops it under local names). */
const isDeclaration = (name: string) => name === 'xmlns' || name.startsWith('xmlns:');

const overBudget = () => new XmlError('more markup than this service parses for one request (elements, attributes, references and text together)');

function spend(budget: ParseBudget, units: number): void {
  budget.units -= units;
  if (budget.units < 0) throw overBudget();
}

/**
 * Spend what a document's text costs more once it is `after` characters long instead of `before`: the decoder
 * parses the copy the received log keeps (passwords redacted, which can lengthen it) within the same budget,
 * and must not refuse what the receiver accepted.
 */
export function spendOnLonger(budget: ParseBudget, before: number, after: number): void {
  const more = Math.ceil(after / TEXT_CHARS_PER_UNIT) - Math.ceil(before / TEXT_CHARS_PER_UNIT);
  if (more > 0) spend(budget, more);
}

/**
 * Where `c` occurs in a text, asked for ranges that move forward only: each occurrence is found once, so a
 * walk over the whole document stays linear however many ranges it asks about.
 */
function occurrences(text: string, c: string) {
  let at = text.indexOf(c);
  return function* within(from: number, to: number): Generator<number> {
    if (at !== -1 && at < from) at = text.indexOf(c, from);
    while (at !== -1 && at < to) {
      yield at;
      at = text.indexOf(c, at + 1);
    }
  };
}

/** XML 1.0 §2.2 Char: what a character reference may denote (WFC: Legal Character). */
const isXmlChar = (c: number) => c === 0x9 || c === 0xa || c === 0xd || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);

const CHARACTER_REFERENCE = /#(?:x([0-9a-fA-F]+)|([0-9]+));/y;
/** The only entities a document without a DTD has (XML 1.0 §4.6); htmlEntities would decode `&nbsp;` and more. */
const PREDEFINED_ENTITY = /(?:amp|lt|gt|quot|apos);/y;
/** A character XML 1.0 §2.2 does not allow, as it stands in the text: a control character, U+FFFE/U+FFFF, a lone surrogate. */
const NOT_XML_CHAR = /[\x00-\x08\x0B\x0C\x0E-\x1F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Check the markup before the validator and the parser run, and spend the budget on what they will do:
 * the document's length first (so an oversized one is refused without a walk), then in one walk each
 * element start (and one more per DEPTH_LEVELS_PER_UNIT levels of its depth, and DISTINCT_NAME_UNITS more when
 * its name is new among its siblings past the first FREE_DISTINCT_NAMES), each attribute (any `=` inside a tag,
 * conservatively; more than MAX_ATTRIBUTES on one element are refused, see checkAttributes), and each reference (any `&` in text or inside a tag; in a comment, CDATA or processing instruction it is text). A DOCTYPE or ENTITY
 * declaration is refused (no entity bombs, no external entities). Nesting deeper than MAX_DEPTH is refused
 * too, so that nothing later (the converter, JSON.stringify) runs out of stack on a document that parsed.
 * Comments, CDATA and processing instructions are skipped whole: a `</x>` or `<br>` inside them is text, and
 * counting it would let a document nest deeper than the bound or refuse a fine one.
 * A character reference to a character XML does not allow (`&#0;`, a surrogate, `&#x110000;`) makes the
 * document not well-formed; fast-xml-parser 5.5+ would decode the first two to nothing and keep the last as
 * text, so it is refused here, as is such a character written as it is, and a reference to an entity that is
 * not one of XML's five (`&foo;`, which the parser keeps as text, or `&nbsp;`, which it would decode).
 * `strict` (the receiver's check) also refuses what fast-xml-parser's validator accepts though XML 1.0 does not:
 * a `<` in an attribute value, `]]>` in text, `--` inside a comment.
 */
function checkMarkup(xml: string, budget: ParseBudget, strict: boolean): void {
  spend(budget, Math.ceil(xml.length / TEXT_CHARS_PER_UNIT));
  const notAllowed = NOT_XML_CHAR.exec(xml);
  if (notAllowed) throw new XmlError(`the document holds a character XML does not allow (U+${notAllowed[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')})`);
  const ampersands = occurrences(xml, '&');
  const equalSigns = occurrences(xml, '=');
  const openings = occurrences(xml, '<');
  const cdataEnds = occurrences(xml, ']]>');
  // What fast-xml-parser's validator lets through though XML 1.0 forbids it.
  const plainText = (from: number, to: number) => {
    if (!strict) return;
    for (const _ of cdataEnds(from, to)) throw new XmlError('not well-formed XML ("]]>" in text outside a CDATA section)');
  };
  const references = (from: number, to: number) => {
    for (const at of ampersands(from, to)) {
      spend(budget, 1);
      if (xml.charCodeAt(at + 1) !== 0x23) { // '#'
        PREDEFINED_ENTITY.lastIndex = at + 1;
        if (!PREDEFINED_ENTITY.test(xml)) throw new XmlError(`the document refers to an entity XML does not declare (${xml.slice(at, at + 12).replace(/;.*$/s, ';')})`);
        continue;
      }
      CHARACTER_REFERENCE.lastIndex = at + 1;
      const match = CHARACTER_REFERENCE.exec(xml);
      const code = match ? (match[1] !== undefined ? parseInt(match[1], 16) : Number(match[2])) : -1;
      if (!isXmlChar(code)) throw new XmlError(`the document has an invalid character reference (${xml.slice(at, at + 12).replace(/;.*$/s, ';')})`);
    }
  };
  let depth = 0;
  /** The names of the children seen so far of each open element, by its depth (0: the document's top level). */
  const childNames: (Set<string> | undefined)[] = [];
  const first = xml.indexOf('<');
  references(0, first === -1 ? xml.length : first);
  plainText(0, first === -1 ? xml.length : first);
  for (let i = first; i !== -1;) {
    const other = endOfOther(xml, i);
    let end: number;
    if (other >= 0) {
      if (xml.startsWith('<!', i) && !xml.startsWith('<!--', i) && !xml.startsWith('<![CDATA[', i)) throw new XmlError('a document type declaration is not allowed');
      end = other;
      if (strict && xml.startsWith('<!--', i) && xml.startsWith('-->', end - 3) && end - 3 > i + 4) {
        const dashes = xml.indexOf('--', i + 4);
        if (dashes < end - 3 || xml.charCodeAt(end - 4) === 0x2d) throw new XmlError('not well-formed XML ("--" inside a comment)');
      }
    } else {
      const tag = tagAt(xml, i);
      end = tag.end;
      if (strict) for (const _ of openings(i + 1, end)) throw new XmlError('not well-formed XML (a "<" inside a tag, such as in an attribute value)');
      if (tag.closing) depth--;
      else {
        spend(budget, 1 + Math.floor((depth + 1) / DEPTH_LEVELS_PER_UNIT));
        const siblings = (childNames[depth] ??= new Set());
        if (!siblings.has(tag.name)) {
          siblings.add(tag.name);
          if (siblings.size > FREE_DISTINCT_NAMES) spend(budget, DISTINCT_NAME_UNITS);
        }
        for (const _ of equalSigns(i, end)) spend(budget, 1);
        checkAttributes(xml, i, tag, strict);
        if (!tag.selfClosing) {
          if (++depth > MAX_DEPTH) throw new XmlError(`nested more than ${MAX_DEPTH} elements deep`);
          childNames[depth] = undefined;
        }
      }
      references(i, end);
    }
    const next = xml.indexOf('<', end);
    references(end, next === -1 ? xml.length : next);
    plainText(end, next === -1 ? xml.length : next);
    i = next;
  }
}

/**
 * Where the request arrives (`strict`): at most MAX_ATTRIBUTES attributes on the element at `i`, and no two of them
 * sharing a local name (`a:Ref`, `b:Ref`): a document's attributes are converted by local name, and so are a
 * Message's, so one would overwrite the other silently. The decoder reads what the receiver accepted, and a request
 * accepted before these checks (2026-11-28) must replay as it did (found by review: the cap applied there too).
 */
function checkAttributes(xml: string, i: number, tag: Tag, strict: boolean): void {
  if (!strict) return;
  let count = 0;
  let seen: Map<string, string> | undefined;
  for (const name of attributeNames(xml, i, tag)) {
    if (++count > MAX_ATTRIBUTES) throw new XmlError(`over the limit of ${MAX_ATTRIBUTES} attributes on one element (<${shown(tag.name)}>)`);
    if (isDeclaration(name)) continue;
    const local = localName(name);
    const before = (seen ??= new Map()).get(local);
    if (before === name) throw new XmlError(`not well-formed XML (<${shown(tag.name)}> repeats the attribute ${shown(name)})`);
    if (before !== undefined) throw new XmlError(`not convertible: <${shown(tag.name)}> has two attributes with the local name ${shown(local)} (${shown(before)} and ${shown(name)})`);
    seen.set(local, name);
  }
}

/** fast-xml-parser 5.5+ refuses these element names (they would reach the prototype of the object it builds). */
const UNSAFE_NAME = /^\[SECURITY\] Invalid name: "(?:__proto__|constructor|prototype)"/;

/** Parse a document the caller has already checked (or that this service checked when it arrived). */
export function parseXml(xml: string, names: 'qualified' | 'local', validate: boolean, budget: ParseBudget): XmlObject {
  // Only where the request arrives: the decoder also reads requests accepted before these checks existed, and
  // a replay of one must not fail.
  checkMarkup(xml, budget, validate);
  try {
    if (validate) {
      const verdict = XMLValidator.validate(xml);
      if (verdict !== true) throw new XmlError(`not well-formed XML (line ${verdict.err.line}: ${verdict.err.msg})`);
    }
    const parsed = (names === 'qualified' ? qualified : local).parse(xml) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new XmlError('not an XML document');
    return parsed as XmlObject;
  } catch (error) {
    // A bad character reference throws RangeError, and so does the validator's recursion on an attribute
    // value of megabytes.
    if (error instanceof XmlError) throw error;
    if (error instanceof Error && UNSAFE_NAME.test(error.message)) throw new XmlError('an element named __proto__, constructor or prototype, which this service does not convert');
    throw new XmlError(error instanceof RangeError ? 'the document has an invalid character reference or a value too long to check' : 'not well-formed XML');
  }
}

/** The one root element of a parsed document: its name and value. */
export function rootOf(doc: XmlObject): [string, XmlValue] {
  const names = Object.keys(doc);
  if (names.length !== 1) throw new XmlError(names.length === 0 ? 'the document has no root element' : 'the document has more than one root element');
  return [names[0], doc[names[0]]];
}

export function localName(qualifiedName: string): string {
  const colon = qualifiedName.indexOf(':');
  return colon < 0 ? qualifiedName : qualifiedName.slice(colon + 1);
}

export function isObject(value: XmlValue | undefined): value is XmlObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
