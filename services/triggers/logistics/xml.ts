import { XMLParser, XMLValidator } from 'fast-xml-parser';

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

function refuseDtd(xml: string): void {
  if (/<!DOCTYPE|<!ENTITY/i.test(xml)) throw new XmlError('a document type declaration is not allowed');
}

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
 * Spend the budget on what the parser will build, before it runs: each element start (any `<` not opening
 * an end tag, comment, CDATA or PI) and each attribute (any `=`, conservatively: an attribute costs the
 * parser about what an element does). Nesting deeper than MAX_DEPTH is refused here too, so that nothing
 * later (the converter, JSON.stringify) runs out of stack on a document that parsed.
 */
function spendElements(xml: string, budget: ParseBudget): void {
  let depth = 0;
  for (let i = xml.indexOf('<'); i !== -1; i = xml.indexOf('<', i + 1)) {
    const next = xml.charCodeAt(i + 1);
    if (next === 0x2f) { depth--; continue; }
    if (next === 0x21 || next === 0x3f) continue;
    if (--budget.elements < 0) throw overBudget();
    const end = xml.indexOf('>', i);
    if (end > 0 && xml.charCodeAt(end - 1) !== 0x2f && ++depth > MAX_DEPTH) throw new XmlError(`nested more than ${MAX_DEPTH} elements deep`);
  }
  for (let i = xml.indexOf('='); i !== -1; i = xml.indexOf('=', i + 1)) {
    if (--budget.elements < 0) throw overBudget();
  }
}

/** Parse a document the caller has already checked (or that this service checked when it arrived). */
export function parseXml(xml: string, names: 'qualified' | 'local', validate: boolean, budget: ParseBudget): XmlObject {
  refuseDtd(xml);
  spendElements(xml, budget);
  if (validate) {
    const verdict = XMLValidator.validate(xml);
    if (verdict !== true) throw new XmlError(`not well-formed XML (line ${verdict.err.line}: ${verdict.err.msg})`);
  }
  try {
    const parsed = (names === 'qualified' ? qualified : local).parse(xml) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new XmlError('not an XML document');
    return parsed as XmlObject;
  } catch (error) {
    // Deep nesting overflows the converter's recursion; a bad character reference throws RangeError.
    if (error instanceof XmlError) throw error;
    throw new XmlError(error instanceof RangeError ? 'the document is nested too deeply or has an invalid character reference' : 'not well-formed XML');
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
