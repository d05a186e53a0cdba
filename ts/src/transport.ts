/**
 * The two transports a browser reaches a replica server over (docs/protocol.md
 * §10.1), behind one small interface, {@link Channel}:
 *
 * - WebSocket: one binary WebSocket message per session message; close code
 *   c travels as status 4000 + c.
 * - WebTransport: one session (extended CONNECT to the server's path); the
 *   client opens one bidirectional stream, writes the preamble `72 70 6C 01`,
 *   then every message in both directions is a frame: its length as an
 *   unsigned LEB128 varint, then its bytes. Close code c is the code of
 *   CLOSE_WEBTRANSPORT_SESSION. Datagrams carry no session message.
 */

import { EMPTY, cat, encodeUTF8, leb128, uvarint, varEnd } from "./bits.js";
import { ClosedError, RefusedError, ReplicaDecodeError, fail } from "./errors.js";

/**
 * An event handler taking ev. It is declared as a method, whose parameter
 * is bivariant under strictFunctionTypes, so that a handler property typed
 * with a narrower event (the DOM's `(ev: Event) => any`, the ws package's
 * `(event: WebSocket.ErrorEvent) => void`) still fits: a plain function
 * type's parameter is contravariant, and those would not.
 */
type Handler<E> = { h(ev: E): void }["h"];

/**
 * The subset of the browser WebSocket API this package uses; the DOM's
 * WebSocket and the ws package's are both one.
 */
export interface WebSocketLike {
  binaryType: string;
  readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: Handler<unknown> | null;
  onmessage: Handler<{ data: unknown }> | null;
  onclose: Handler<{ code: number; reason: string }> | null;
  /** Node's and ws's error events carry a message (ws's also an error); browsers' neither. */
  onerror: Handler<unknown> | null;
}

export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** The subset of the browser WebTransport API this package uses. */
export interface WebTransportLike {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  createBidirectionalStream(): Promise<{ readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> }>;
  close(info?: { closeCode?: number; reason?: string }): void;
}

export interface WebTransportOptionsLike {
  serverCertificateHashes?: { algorithm: string; value: Uint8Array }[];
}

export type WebTransportConstructor = new (url: string, options?: WebTransportOptionsLike) => WebTransportLike;

/** The close code of a connection that ended without a close from the peer (§10.1). */
const NETWORK_ERROR = 11;

/**
 * One message channel of a session, open. Messages arrive through onData,
 * in order; onEnd runs once, with the §10.1 close code (−1 when the peer
 * sent none that maps to one) and reason. Neither runs after shut. (The
 * members are not named as the browser's close, onmessage and onclose,
 * which a bundle cannot shorten.)
 */
export interface Channel {
  readonly kind: "websocket" | "webtransport";
  /** Queues a message; dropped once the channel is closing. */
  send(b: Uint8Array): void;
  /** Closes with a §10.1 close code. */
  shut(code: number, reason: string): void;
  /** A message: bytes, or anything else a WebSocket delivered (a text message). */
  onData?: ((data: unknown) => void) | null;
  /** The channel's end: its §10.1 close code and reason. */
  onEnd?: ((code: number, reason: string) => void) | null;
}

/** s cut to at most n bytes of UTF-8, on a character boundary. */
const cut = (s: string, n: number): string => {
  while (encodeUTF8(s).length > n) s = s.slice(0, -1);
  return s;
};

/**
 * The error a channel that failed to open rejects with: a refusal when the
 * server closed it with a code, else a close (code 11 when it sent none).
 */
const openError = (code: number, reason: string): Error =>
  code > 0 ? new RefusedError(code, reason) : new ClosedError(code < 0 ? NETWORK_ERROR : code, reason);

/** Opens a WebSocket to url; resolves once it is open. */
export const openWebSocket = (url: string, WS: WebSocketConstructor): Promise<Channel> => {
  return new Promise((resolve, reject) => {
    const ws = new WS(url);
    ws.binaryType = "arraybuffer";
    let open = false;
    const ch: Channel = {
      kind: "websocket",
      send: (b) => ws.readyState === 1 && ws.send(b),
      shut(code, reason) {
        ch.onData = ch.onEnd = null;
        try {
          ws.close(4000 + code, cut(reason, 123));
        } catch {
          // already closing
        }
      },
    };
    // A connection that fails before it opens: browsers then close
    // (1006), Node's WebSocket may not; either way it is a network error.
    // The reason names the URL and, where the event has one (Node, ws; a
    // browser hides why), the cause: a refused port, a 403, a TLS error.
    ws.onerror = (ev) => {
      const e = ev as { message?: string; error?: Error } | undefined;
      const why = e?.message || e?.error?.message;
      open || reject(openError(-1, `WebSocket to ${url} failed to connect` + (why ? ": " + why : "")));
    };
    ws.onopen = () => {
      open = true;
      resolve(ch);
    };
    ws.onmessage = (ev) => ch.onData?.(ev.data);
    ws.onclose = (ev) => {
      // The §10.1 close code of the WebSocket status, or −1.
      const code = ev.code >= 4000 && ev.code <= 4998 ? ev.code - 4000 : -1;
      if (!open) return reject(openError(code, ev.reason || "closed before open"));
      const h = ch.onEnd;
      ch.onData = ch.onEnd = null;
      // A status of the WebSocket layer (1006: the connection was lost)
      // comes without a reason: the status says what happened.
      h?.(code, ev.reason || (code < 0 ? `WebSocket closed with status ${ev.code}` : ""));
    };
  });
};

/** The framing preamble: "rpl" and framing version 1. */
export const PREAMBLE = Uint8Array.of(0x72, 0x70, 0x6c, 0x01);

/** Returns msg as a frame: its length as an unsigned LEB128 varint, then msg. */
export const frame = (msg: Uint8Array): Uint8Array => cat(leb128([], msg.length), msg);

/**
 * Splits a byte stream into frames. push takes the next chunk and returns
 * the messages it completes. A frame longer than max is a "limit" error (the
 * caller closes with code 3), a length that is not a minimal varint below
 * 2^53 a "session" error (code 2).
 */
export class FrameReader {
  private buf = EMPTY;
  declare readonly max: number;
  constructor(max: number) {
    this.max = max;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    let b = this.buf.length ? cat(this.buf, chunk) : chunk;
    const out: Uint8Array[] = [];
    for (let n, i; ; ) {
      // An incomplete length (−1) waits for the next chunk with its bytes.
      if ((n = uvarint(b, 0, 8, "frame")) < 0) break;
      if (n > this.max) fail("limit", `message of ${n} bytes > ${this.max}`);
      if (b.length - (i = varEnd) < n) break;
      out.push(b.subarray(i, i + n));
      b = b.subarray(i + n);
    }
    // Keep the tail; copy it so the chunk's buffer is not held.
    this.buf = b.slice();
    return out;
  }
}

/**
 * Opens a WebTransport session to url (https://host:port/path), opens the
 * message stream and writes the preamble; resolves once the session is
 * ready. hashes, if any, are the SHA-256 hashes of the server's
 * certificate (serverCertificateHashes), for a self-signed development
 * certificate.
 */
export async function openWebTransport(url: string, WT: WebTransportConstructor, hashes: Uint8Array[] = [], maxMessageBytes = 1 << 20): Promise<Channel> {
  const why = (e: unknown): string => "WebTransport: " + ((e as Error)?.message ?? e);
  let wt: WebTransportLike | undefined;
  let closed!: Promise<{ code: number; reason: string }>;
  let stream;
  try {
    wt = new WT(url, hashes.length ? { serverCertificateHashes: hashes.map((value) => ({ algorithm: "sha-256", value })) } : {});
    closed = wt.closed.then(
      (info) => ({ code: info.closeCode ?? -1, reason: info.reason ?? "" }),
      (e: unknown) => ({ code: -1, reason: why(e) }),
    );
    await wt.ready;
    stream = await wt.createBidirectionalStream();
  } catch (e) {
    try {
      wt?.close();
    } catch {
      // not open
    }
    throw openError(wt ? (await Promise.race([closed, { code: -1 }])).code : -1, why(e));
  }
  const writer = stream.writable.getWriter();
  const reader = stream.readable.getReader();
  let closing = false;
  // The writer queues writes in order; a failed write shows as the session's close.
  const write = (b: Uint8Array): void => void writer.write(b).catch(() => {});
  const ch: Channel = {
    kind: "webtransport",
    send: (b) => closing || write(frame(b)),
    shut(code, reason) {
      if (closing) return;
      closing = true;
      ch.onData = ch.onEnd = null;
      try {
        wt.close({ closeCode: code, reason: cut(reason, 256) });
      } catch {
        // already closed
      }
    },
  };
  const end = (code: number, reason: string): void => {
    const h = ch.onEnd;
    ch.shut(code, reason);
    h?.(code, reason);
  };
  // The preamble goes out now, so that the server accepts the session
  // before the client's first message.
  write(PREAMBLE);
  void (async () => {
    const frames = new FrameReader(maxMessageBytes);
    try {
      for (let r; !(r = await reader.read()).done; ) {
        for (const m of frames.push(r.value)) {
          if (closing) return;
          ch.onData?.(m);
        }
      }
    } catch (e) {
      // A frame too long or malformed closes with code 3 or 2; a reset stream: the session's close tells why.
      if (e instanceof ReplicaDecodeError) return end(e.code === "limit" ? 3 : 2, e.message);
    }
    // The server ended the stream: it is closing (§10.1). End ours in
    // answer, which tells it every message was read; it then closes the
    // session with the close code. (A REFUSE and the other last messages
    // came first: they travel on the stream, the close on the session's
    // own.) A server that does not close in time (twice the Go server's
    // flush timeout, quicconn.FlushTimeout, 2 s) is gone.
    writer.close().catch(() => {});
    let timer;
    const c = await Promise.race([closed, new Promise<{ code: number; reason: string }>((res) => (timer = setTimeout(res, 4000, { code: -1, reason: "no close" })))]);
    clearTimeout(timer);
    if (!closing) end(c.code < 0 ? NETWORK_ERROR : c.code, c.reason);
  })();
  return ch;
}
