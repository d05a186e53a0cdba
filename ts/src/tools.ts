/**
 * What tests and tools use beside the client runtime (./index.ts), which
 * a game ships without it: the server's side of the session messages and
 * a canonical text dump of a replica, and the descriptor encoder.
 */

export { parseHello, parseAny, encodeWelcome, encodeRefuse, encodeTick, encodeResync } from "./peer.js";
export { dumpEntities, typeString, KIND_NAMES } from "./dump.js";
export { writeDescriptor } from "./descriptor.js";
