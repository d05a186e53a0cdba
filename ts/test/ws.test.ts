// The `ws` package's WebSocket as a connection's WebSocket (Node 20 has no
// global one). `ws` is not a dependency: WsSocket is a stand-in declaring
// the members the connection uses as @types/ws declares them, which `npm
// test`'s tsc checks against WebSocketConstructor, and at run time it fails
// to connect as ws does, with an error event that carries a message.
import { describe, expect, test } from "vitest";
import { ClosedError, CloseCode, Connection } from "../src/connection.js";
import { decodeDescriptor, writeDescriptor } from "../src/descriptor.js";
import { Kind, Schema } from "../src/schema.js";
import type { WebSocketConstructor } from "../src/transport.js";
import { field, struct, ty } from "./schemas.js";

/** The event types of @types/ws (namespace WebSocket), as it declares them. */
declare namespace WsTypes {
  type Data = string | Buffer | ArrayBuffer | Buffer[];
  interface Event {
    type: string;
    target: WsSocket;
  }
  interface ErrorEvent {
    error: any;
    message: string;
    type: string;
    target: WsSocket;
  }
  interface CloseEvent {
    wasClean: boolean;
    code: number;
    reason: string;
    type: string;
    target: WsSocket;
  }
  interface MessageEvent {
    data: Data;
    type: string;
    target: WsSocket;
  }
}

/** ws's class, its handler properties typed as @types/ws types them; it fails to connect as ws does (ECONNREFUSED). */
class WsSocket {
  binaryType: "nodebuffer" | "arraybuffer" | "fragments" = "nodebuffer";
  readonly readyState: 0 | 1 | 2 | 3 = 0;
  onopen: (event: WsTypes.Event) => void = () => {};
  onerror: (event: WsTypes.ErrorEvent) => void = () => {};
  onclose: (event: WsTypes.CloseEvent) => void = () => {};
  onmessage: (event: WsTypes.MessageEvent) => void = () => {};
  constructor(address: string | URL, _protocols?: string | string[], _options?: { handshakeTimeout?: number }) {
    const error = new Error("connect ECONNREFUSED 127.0.0.1:1");
    setTimeout(() => {
      this.onerror({ error, message: error.message, type: "error", target: this });
      this.onclose({ wasClean: false, code: 1006, reason: "", type: "close", target: this });
    });
    void address;
  }
  send(_data: unknown, _cb?: (err?: Error) => void): void {}
  close(_code?: number, _data?: string | Buffer): void {}
}

// The type-level checks: both ws's class and the DOM's are WebSocketConstructors.
const fromWs: WebSocketConstructor = WsSocket;
const fromDom: WebSocketConstructor | undefined = (globalThis as { WebSocket?: typeof WebSocket }).WebSocket;

describe("the ws package's WebSocket", () => {
  test("type-checks as a WebSocketConstructor, as the DOM's does (tsc); a failed connect names the URL and ws's cause", async () => {
    expect(typeof fromWs).toBe("function");
    void fromDom;
    const s = decodeDescriptor(writeDescriptor(new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 })])));
    const err = await Connection.connect({ url: "ws://127.0.0.1:1/replica", schema: s, WebSocket: WsSocket }).catch((e) => e);
    expect(err).toBeInstanceOf(ClosedError);
    expect(err.code).toBe(CloseCode.Network);
    expect(err.reason).toBe("WebSocket to ws://127.0.0.1:1/replica failed to connect: connect ECONNREFUSED 127.0.0.1:1");
  });
});
