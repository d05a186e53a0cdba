/**
 * What tests and tools use beside the client runtime (./index.ts), which
 * a game ships without it: the bit streams, the decoder and the numbers'
 * plans, the session messages of both sides, the transports and their
 * framing, a canonical text dump of a replica, and the descriptor encoder.
 */

export * from "./index.js";
export { BitReader, BitWriter } from "./bits.js";
export { decoder, withDefaults, type Decoder } from "./decoder.js";
export { numValue, numPlan, dequantize } from "./values.js";
export { DESCRIPTOR_VERSION, writeDescriptor } from "./descriptor.js";
export { toStored } from "./encoder.js";
export {
  parseMessage, parseRPC, encodeHello, encodePing, encodePong, encodeRPC,
  type Message, type Hello, type Welcome, type Refuse, type Tick, type Ping, type Pong, type RPC, type Resync,
  type Ticket, type Resume, type HeldEntity,
} from "./session.js";
export { openWebSocket, openWebTransport, frame, FrameReader, PREAMBLE, type Channel } from "./transport.js";
export { MsgType, parseHello, parseAny, encodeWelcome, encodeRefuse, encodeTick, encodeResync } from "./peer.js";
export { dumpEntities, typeString, KIND_NAMES } from "./dump.js";
