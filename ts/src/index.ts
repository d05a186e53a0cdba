export { ReplicaDecodeError, type ErrorCode } from "./errors.js";
export { BitReader, BitWriter, decodeUTF8, encodeUTF8 } from "./bits.js";
export {
  Kind, Vis, Schema, StructType, checkCompatible,
  type Field, type Leaf, type Quant, type Rpc, type Type,
} from "./schema.js";
export { decodeDescriptor, DESCRIPTOR_VERSION } from "./descriptor.js";
export { Decoder, DEFAULT_LIMITS, withDefaults, type Limits } from "./decoder.js";
export { Entity, Rec, ListC, MapC, BagC, makeId, elemValue, type Elem, type Key } from "./state.js";
export { numValue, numPlan, dequantize } from "./values.js";
export {
  Replica, type ReplicaOptions, type TickChanges, type LevelChange, type ListEvent, type MapEvent, type BagEvent, type ItemKind,
} from "./replica.js";
export {
  PROTOCOL_VERSION, MsgType, parseMessage, parseRPC, encodeHello, encodePing, encodePong, encodeRPC,
  type Message, type Hello, type Welcome, type Refuse, type Tick, type Ping, type Pong, type RPC, type Resync,
  type Ticket, type Resume, type HeldEntity,
} from "./session.js";
export {
  Connection, CloseCode, RefusedError, ClosedError,
  type ConnectOptions, type TransportMode,
} from "./connection.js";
export {
  closeCodeOf, openWebSocket, openWebTransport, frame, FrameReader, FrameTooLargeError, ChannelError, PREAMBLE,
  type Channel, type WebSocketLike, type WebSocketConstructor, type WebTransportLike, type WebTransportConstructor,
  type WebTransportOptionsLike,
} from "./transport.js";
export { encodeRecord, toStored } from "./encoder.js";
export {
  StructView, TypedList, TypedMap, schemaFromBase64, structsOf, structNamed, leafRef, nestedAt, elemConv,
  listEvent, mapEvent, bagEvent, isClassOf,
  type LeafRef, type TypedListEvent, type TypedMapEvent, type TypedBagEvent, type Unregister,
} from "./typed.js";
