import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { endOfOther, tagAt } from './markup';

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
} as const;

/** Prefixes kept: the envelope's namespaces are checked. */
const qualified = new XMLParser({ ...OPTIONS, removeNSPrefix: false });
/** Local names only: the platform's document namespaces change with the schema year. */
const local = new XMLParser({ ...OPTIONS, removeNSPrefix: true });

export type XmlValue = string | XmlObject | XmlValue[];
export interface XmlObject { [name: string]: XmlValue }


/**
 * What one request may make the parser build: the parsed tree costs about 125 bytes of heap per
 * element and parsing is synchronous, so a small compressed Message of empty elements must not turn
 * into gigabytes or seconds. Shared by every document of a request.
 */
export interface ParseBudget {
  elements: number;
}

/** Deeper than any document the platform sends (~15 levels), far below where the parser's recursion gives out. */
export const MAX_DEPTH = 512;

const overBudget = () => new XmlError('more elements than this service parses for one request');

/**
 * Check the markup before the parser runs, and spend the budget on what it will build: each element start
 * and each attribute (any `=`, conservatively: an attribute costs the parser about what an element does).
 * A DOCTYPE or ENTITY declaration is refused (no entity bombs, no external entities). Nesting deeper than
 * MAX_DEPTH is refused too, so that nothing later (the converter, JSON.stringify) runs out of stack on a
 * document that parsed. Comments, CDATA and processing instructions are skipped whole: a `</x>` or `<br>`
 * inside them is text, and counting it would let a document nest deeper than the bound or refuse a fine one.
 */
function checkMarkup(xml: string, budget: ParseBudget): void {
  let depth = 0;
  for (let i = xml.indexOf('<'); i !== -1;) {
    const other = endOfOther(xml, i);
    if (other >= 0) {
      if (xml.startsWith('<!', i) && !xml.startsWith('<!--', i) && !xml.startsWith('<![CDATA[', i)) throw new XmlError('a document type declaration is not allowed');
      i = xml.indexOf('<', other);
      continue;
    }
    const tag = tagAt(xml, i);
    if (tag.closing) depth--;
    else {
      if (--budget.elements < 0) throw overBudget();
      if (!tag.selfClosing && ++depth > MAX_DEPTH) throw new XmlError(`nested more than ${MAX_DEPTH} elements deep`);
    }
    i = xml.indexOf('<', tag.end);
  }
  for (let i = xml.indexOf('='); i !== -1; i = xml.indexOf('=', i + 1)) {
    if (--budget.elements < 0) throw overBudget();
  }
}

/** Parse a document the caller has already checked (or that this service checked when it arrived). */
export function parseXml(xml: string, names: 'qualified' | 'local', validate: boolean, budget: ParseBudget): XmlObject {
  checkMarkup(xml, budget);
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
