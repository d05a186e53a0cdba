/**
 * The client runtime a game ships: the replica and its callbacks, the
 * connection, schemas from descriptors, and what the classes replicagen
 * generates use. Tests and tools find the rest (the bit streams, the
 * decoder, the session messages, the transports' framing, the server's side)
 * in ./tools.ts.
 */
export { ReplicaDecodeError, RefusedError, ClosedError, type ErrorCode } from "./errors.js";
export { decodeUTF8, encodeUTF8 } from "./bits.js";
export {
  Kind, Vis, Schema, StructType, checkCompatible,
  type Field, type Leaf, type Quant, type Rpc, type Type,
} from "./schema.js";
export { decodeDescriptor } from "./descriptor.js";
export { DEFAULT_LIMITS, type Limits } from "./decoder.js";
export { Entity, Rec, ListC, MapC, BagC, makeId, elemValue, type Elem, type Key } from "./state.js";
export {
  Replica, type ReplicaOptions, type TickChanges, type LevelChange, type ListEvent, type MapEvent, type BagEvent, type ItemKind, type ClassRef,
} from "./replica.js";
export { PROTOCOL_VERSION } from "./session.js";
export { Connection, CloseCode, type ConnectOptions, type TransportMode } from "./connection.js";
export type { WebSocketLike, WebSocketConstructor, WebTransportLike, WebTransportConstructor, WebTransportOptionsLike } from "./transport.js";
export { encodeRecord } from "./encoder.js";
export {
  StructView, TypedList, TypedMap, schemaFromBase64, structsOf, structNamed, leafRef, nestedAt, elemConv,
  listEvent, mapEvent, bagEvent, isClassOf,
  type LeafRef, type TypedListEvent, type TypedMapEvent, type TypedBagEvent, type Unregister,
} from "./typed.js";
