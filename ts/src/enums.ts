/**
 * The numbers of the wire format and of the runtime, in a module that
 * imports nothing, so that a bundler inlines them where they are used.
 */

/** Value kinds (§3.2). The numbers are part of the format. */
export enum Kind {
  Invalid = 0,
  Bool = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Uint8 = 6,
  Uint16 = 7,
  Uint32 = 8,
  Uint64 = 9,
  Float32 = 10,
  Float64 = 11,
  String = 12,
  Bytes = 13,
  Ref = 14,
  Nested = 15,
  List = 16,
  Map = 17,
  Bag = 18,
}

/** Visibility bits (§3.4). */
export enum Vis {
  Server = 0,
  Owner = 1,
  Others = 2,
  All = 3,
}

/**
 * Kinds of transaction events. The first four are also the indexes of
 * their callback lists; a leaf's list follows them. List, map and bag
 * events come in threes: added, removed, changed.
 */
export enum Ev {
  Create = 0,
  Destroy = 1,
  Owned = 2,
  Level = 3,
  Field = 4,
  ListAdd = 5,
  ListRemove = 6,
  ListSet = 7,
  MapAdd = 8,
  MapRemove = 9,
  MapSet = 10,
  BagAdd = 11,
  BagRemove = 12,
  BagItem = 13,
}

/** Message types: the first byte of every message but a segment. */
export enum MsgType {
  Hello = 1,
  Welcome = 2,
  Refuse = 3,
  Tick = 4,
  Ping = 5,
  Pong = 6,
  RPC = 7,
  Resync = 8,
}

/** Close codes (§10.1); on WebSocket the status is 4000 + code. */
export enum CloseCode {
  Normal = 0,
  GoingAway = 1,
  ProtocolError = 2,
  MessageTooLarge = 3,
  SlowConsumer = 4,
  IdleTimeout = 5,
  HandshakeTimeout = 6,
  AuthFailed = 7,
  Incompatible = 8,
  PolicyViolation = 9,
  Internal = 10,
  Network = 11,
  ServerBusy = 12,
  Replaced = 13,
  Duplicate = 14,
}
