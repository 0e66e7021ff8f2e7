/**
 * Whether this process meets a misconfiguration (named by `parts`: a credential and what is wrong with it) for
 * the first time among the last `max` it met. A broken credential refuses every request to its workflow (500),
 * and a partner retrying, or a flood, would otherwise write one error line per request; the first is what the
 * operator needs, the rest go at debug. `forget` (once it works again) makes its next break a first sighting
 * again. The oldest is forgotten first, so memory stays bounded whatever the ids.
 */
export interface FirstSighting {
  (...parts: string[]): boolean;
  /**
   * As a call, for a subject (`parts`) whose break has a `state` (the hash of a broken key): a break in another
   * state than the one last met is a first sighting too (a key put again, still broken), and `forget(...parts)`
   * forgets it whatever its state.
   */
  changed(state: string, ...parts: string[]): boolean;
  forget(...parts: string[]): void;
}

export function firstSighting(max = 1000): FirstSighting {
  const seen = new Map<string, string>();
  const key = (parts: string[]) => parts.join('\u0000');
  const changed = (state: string, ...parts: string[]) => {
    const k = key(parts);
    if (seen.get(k) === state) return false;
    seen.delete(k); // met again in a new state: now the newest
    if (seen.size >= max) seen.delete(seen.keys().next().value as string);
    seen.set(k, state);
    return true;
  };
  return Object.assign((...parts: string[]) => changed('', ...parts), { changed, forget: (...parts: string[]) => { if (seen.size > 0) seen.delete(key(parts)); } });
}
