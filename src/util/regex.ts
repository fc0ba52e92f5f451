/** A string as a literal inside a RegExp (every syntax character escaped). */
export const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
