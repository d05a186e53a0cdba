/**
 * Every rejection of untrusted input (a descriptor, a segment, a session
 * message, a tick) is a {@link ReplicaDecodeError}. Nothing else is thrown
 * by the decoders for bad input; any other exception is a bug.
 */

/** Why input was rejected. */
export type ErrorCode =
  /** Input ends before a field is complete (or a count exceeds the bits left). */
  | "truncated"
  /** Not a valid encoding: bad tag, out-of-range value, trailing data, bad order. */
  | "malformed"
  /** A configured limit (§7.1) was exceeded. */
  | "limit"
  /** A class or field that the sender's schema does not have, or a deprecated field. */
  | "unknown"
  /** An update, fill, set or destroy of an entity that does not exist (or may not be filled). */
  | "not-found"
  /** A ranked update's rank beyond the entities held when the tick began (§5.4). */
  | "rank"
  /** A create of a slot that holds an entity. */
  | "exists"
  /** A list index out of range. */
  | "index"
  /** A map or bag operation on an absent key. */
  | "no-key"
  /** An inconsistent ownership change in a TICK (§10.2). */
  | "ownership"
  /** An inconsistent level-of-detail change in a TICK (§5.8). */
  | "level"
  /** A bad schema descriptor (§3.5). */
  | "descriptor"
  /** Two schema versions disagree on a field (§8). */
  | "incompatible"
  /** A malformed session message (§10.2). */
  | "session";

/** The typed error of every decoder in this package. */
export class ReplicaDecodeError extends Error {
  declare readonly code: ErrorCode;
  /** Bit offset in the message where decoding stopped, when known. */
  declare bit: number;
  /** Index of the rejected segment in a tick, −1 for the TICK's own lists; undefined outside ticks. */
  declare segment?: number;

  constructor(code: ErrorCode, message: string, bit = -1) {
    super(code + ": " + message);
    this.name = "ReplicaDecodeError";
    this.code = code;
    this.bit = bit;
  }
}

/** A ReplicaDecodeError with code "session": a malformed or unexpected session message (§10.2). */
export const sessionError = (message: string, bit?: number): ReplicaDecodeError => new ReplicaDecodeError("session", message, bit);

/** Throws a {@link ReplicaDecodeError}. */
export function fail(code: ErrorCode, message: string, bit?: number): never {
  throw new ReplicaDecodeError(code, message, bit);
}

/** Throws the Error of a caller's mistake (not of the input): "replica: " and msg. */
export function misuse(msg: string): never {
  throw new Error("replica: " + msg);
}

/** A close code and reason: what RefusedError and ClosedError share. */
class CloseInfo extends Error {
  declare readonly code: number;
  declare readonly reason: string;
  constructor(name: string, what: string, code: number, reason: string) {
    super(`${what}: code ${code}: ${reason}`);
    this.name = name;
    this.code = code;
    this.reason = reason;
  }
}

/** The server declined the session (REFUSE, or a close during the handshake). */
export class RefusedError extends CloseInfo {
  constructor(code: number, reason: string) {
    super("RefusedError", "server refused the session", code, reason);
  }
}

/** The connection closed; code is the §10.1 close code when the peer sent one. */
export class ClosedError extends CloseInfo {
  constructor(code: number, reason: string) {
    super("ClosedError", "connection closed", code, reason);
  }
}
