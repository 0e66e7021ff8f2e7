import { createSecretKey, type KeyObject } from 'node:crypto';

/**
 * Key bytes as a KeyObject, for createHmac, createCipheriv and createDecipheriv on a hot path.
 * Given a Buffer, Node 24 first asks whether the key is a CryptoKey, a check that throws and catches inside
 * (capturing a stack trace every time): about 12 µs more per call than createSecretKey and the same call
 * with the KeyObject together (docs/benchmarks.md, AS2 section).
 */
export const secretKey = (bytes: Buffer): KeyObject => createSecretKey(bytes);
