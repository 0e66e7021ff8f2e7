/**
 * How deep a partner's JSON may nest. Parsing is not the problem (V8's JSON.parse keeps its own stack),
 * but everything after it recurses: JSON.stringify in the decoder runs out of stack a few thousand levels
 * down, and so would the sampler and the workflows. A body that deep would be answered 200 and then fail
 * where nobody sees it, so it is refused where it arrives. The same bound as for XML (logistics/xml.ts).
 */
export const MAX_JSON_DEPTH = 512;

/** What a refusal says the body is: `The request body is ${TOO_DEEP}`. */
export const TOO_DEEP = `JSON nested more than ${MAX_JSON_DEPTH} levels deep`;

/** Whether arrays and objects in a JSON text nest deeper than `max` (brackets inside strings do not count). */
export function jsonNestsDeeperThan(text: string, max: number = MAX_JSON_DEPTH): boolean {
  // Nesting deeper than `max` takes more than `max` brackets: most bodies have far fewer, and counting them
  // (indexOf runs natively) costs a fraction of the walk below.
  if (bracketsAtMost(text, max)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}

function bracketsAtMost(text: string, max: number): boolean {
  let n = 0;
  for (let i = text.indexOf('{'); i !== -1; i = text.indexOf('{', i + 1)) if (++n > max) return false;
  for (let i = text.indexOf('['); i !== -1; i = text.indexOf('[', i + 1)) if (++n > max) return false;
  return true;
}
