import { isObject, parseXml, rootOf, type ParseBudget, type XmlValue } from './xml';

/**
 * The platform's Universal documents (SPEC §2.3), matched by local name whatever the namespace year.
 * `UniversalInterchange/Body/UniversalEvent/Event` is an event-update and `.../UniversalShipment/Shipment`
 * a shipment-update; the document may also arrive without the interchange around it. Anything else
 * (UniversalTransaction, Native, …, or an interchange whose Body holds several documents) is recognised as
 * another document type and starts nothing.
 *
 * `data` is the element as JSON: values are the strings on the wire, an element that occurs once is an
 * object and one that repeats is an array, an empty element is "", an attribute is a property named
 * `@name`, and the text of an element that also has attributes is `#text`.
 */
export type LogisticsEvent = 'event-update' | 'shipment-update';
export const LOGISTICS_EVENTS: readonly LogisticsEvent[] = ['event-update', 'shipment-update'];

export type Unwrapped =
  | { kind: 'event'; event: LogisticsEvent; data: XmlValue }
  | { kind: 'other'; documentType: string };

const HANDLERS: Record<string, { event: LogisticsEvent; element: string }> = {
  UniversalEvent: { event: 'event-update', element: 'Event' },
  UniversalShipment: { event: 'shipment-update', element: 'Shipment' },
};

/** The child elements of a parsed element, by name (a repeated name's value is an array). */
function elementsOf(value: XmlValue | undefined): [string, XmlValue][] {
  if (!isObject(value)) return [];
  return Object.entries(value).filter(([key]) => !key.startsWith('@') && key !== '#text');
}

export function unwrapUniversal(xml: string, validate: boolean, budget: ParseBudget): Unwrapped {
  const [rootName, root] = rootOf(parseXml(xml, 'local', validate, budget));
  let documentName = rootName;
  let document: XmlValue = root;
  if (rootName === 'UniversalInterchange') {
    const body = isObject(root) ? root.Body : undefined;
    const inner = Array.isArray(body) ? [] : elementsOf(body);
    if (inner.length === 0) return { kind: 'other', documentType: 'UniversalInterchange without a Body document' };
    // Running the first and dropping the rest would lose events without a trace: like an event with several
    // Event elements, the Message starts nothing and is logged.
    if (inner.length > 1 || Array.isArray(inner[0][1])) return { kind: 'other', documentType: 'UniversalInterchange with several Body documents' };
    [documentName, document] = inner[0];
  }
  // Own entries only: a document named `toString` found Object.prototype's, and its `<undefined>` child made an event of no type.
  const handler = Object.hasOwn(HANDLERS, documentName) ? HANDLERS[documentName] : undefined;
  if (!handler || Array.isArray(document)) return { kind: 'other', documentType: documentName };
  const data = isObject(document) ? document[handler.element] : undefined;
  if (data === undefined || Array.isArray(data)) return { kind: 'other', documentType: `${documentName} without one ${handler.element}` };
  return { kind: 'event', event: handler.event, data };
}
