/**
 * Whether this process meets a misconfiguration (named by `parts`: a credential and what is wrong with it) for
 * the first time among the last `max` it met. A broken credential refuses every request to its workflow (500),
 * and a partner retrying, or a flood, would otherwise write one error line per request; the first is what the
 * operator needs, the rest go at debug. `forget` (once it works again) makes its next break a first sighting
 * again. The oldest is forgotten first, so memory stays bounded whatever the ids.
 */
export interface FirstSighting {
  (...parts: string[]): boolean;
  forget(...parts: string[]): void;
}

export function firstSighting(max = 1000): FirstSighting {
  const seen = new Set<string>();
  const key = (parts: string[]) => parts.join('\u0000');
  const first = (...parts: string[]) => {
    const k = key(parts);
    if (seen.has(k)) return false;
    if (seen.size >= max) seen.delete(seen.values().next().value as string);
    seen.add(k);
    return true;
  };
  return Object.assign(first, { forget: (...parts: string[]) => { if (seen.size > 0) seen.delete(key(parts)); } });
}
