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

import { ReplicaDecodeError } from "./errors.js";

/** The subset of the browser WebSocket API this package uses. */
export interface WebSocketLike {
  binaryType: string;
  readyState: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
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
const MESSAGE_TOO_LARGE = 3;

/**
 * How long a client whose stream the server ended waits for the session's
 * close: twice the Go server's flush timeout (quicconn.FlushTimeout, 2 s).
 */
const CLOSE_WAIT_MS = 4000;

/**
 * One message channel of a session, open. Messages arrive through
 * onmessage, in order; onclose runs once, with the §10.1 close code (−1 when
 * the peer sent none that maps to one) and reason. Neither runs after close.
 */
export interface Channel {
  readonly kind: "websocket" | "webtransport";
  /** Queues a message; dropped once the channel is closing. */
  send(b: Uint8Array): void;
  /** Closes with a §10.1 close code. */
  close(code: number, reason: string): void;
  /** A message: bytes, or anything else a WebSocket delivered (a text message). */
  onmessage: ((data: unknown) => void) | null;
  onclose: ((code: number, reason: string) => void) | null;
}

/** The §10.1 close code of a WebSocket close status, or −1. */
export function closeCodeOf(status: number): number {
  return status >= 4000 && status <= 4998 ? status - 4000 : -1;
}

/** Opens a WebSocket to url; resolves once it is open. */
export function openWebSocket(url: string, WS: WebSocketConstructor): Promise<Channel> {
  return new Promise((resolve, reject) => {
    const ws = new WS(url);
    ws.binaryType = "arraybuffer";
    let open = false;
    const ch: Channel = {
      kind: "websocket",
      send(b) {
        if (ws.readyState === 1) ws.send(b);
      },
      close(code, reason) {
        ch.onmessage = ch.onclose = null;
        try {
          ws.close(4000 + code, reason.slice(0, 123));
        } catch {
          // already closing
        }
      },
      onmessage: null,
      onclose: null,
    };
    ws.onerror = () => {};
    ws.onopen = () => {
      open = true;
      resolve(ch);
    };
    ws.onmessage = (ev) => ch.onmessage?.(ev.data);
    ws.onclose = (ev) => {
      if (!open) return reject(new ChannelError(closeCodeOf(ev.code), ev.reason || "WebSocket closed before it opened"));
      const h = ch.onclose;
      ch.onmessage = ch.onclose = null;
      h?.(closeCodeOf(ev.code), ev.reason);
    };
  });
}

/** A channel failed to open; code is the §10.1 close code when the server sent one, else −1. */
export class ChannelError extends Error {
  override readonly name = "ChannelError";
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** The framing preamble: "rpl" and framing version 1. */
export const PREAMBLE = Uint8Array.of(0x72, 0x70, 0x6c, 0x01);

/** Returns msg as a frame: its length as an unsigned LEB128 varint, then msg. */
export function frame(msg: Uint8Array): Uint8Array {
  let n = msg.length;
  let k = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    k++;
  }
  const out = new Uint8Array(k + msg.length);
  n = msg.length;
  let i = 0;
  while (n >= 0x80) {
    out[i++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[i++] = n;
  out.set(msg, i);
  return out;
}

/**
 * Splits a byte stream into frames. push takes the next chunk and returns
 * the messages it completes; a frame longer than max, or a length that is
 * not a minimal varint below 2^53, throws a ReplicaDecodeError (the caller
 * closes with code 3 or 2).
 */
export class FrameReader {
  private buf = new Uint8Array(0);
  constructor(readonly max: number) {}

  push(chunk: Uint8Array): Uint8Array[] {
    let b = chunk;
    if (this.buf.length > 0) {
      b = new Uint8Array(this.buf.length + chunk.length);
      b.set(this.buf);
      b.set(chunk, this.buf.length);
    }
    const out: Uint8Array[] = [];
    let off = 0;
    for (;;) {
      let n = 0;
      let mul = 1;
      let i = off;
      let complete = false;
      while (i < b.length) {
        const x = b[i++]!;
        n += (x & 0x7f) * mul;
        mul *= 128;
        if ((x & 0x80) === 0) {
          if (x === 0 && i - off > 1) throw new ReplicaDecodeError("session", "frame length is not a minimal varint");
          complete = true;
          break;
        }
        if (i - off >= 8) throw new ReplicaDecodeError("session", "frame length too long");
      }
      if (!complete) break;
      if (n > this.max) throw new FrameTooLargeError(n, this.max);
      if (b.length - i < n) break;
      out.push(b.subarray(i, i + n));
      off = i + n;
    }
    // Keep the tail; copy it so the chunk's buffer is not held.
    this.buf = off === b.length ? new Uint8Array(0) : b.slice(off);
    return out;
  }
}

/** A frame is longer than the receiver's limit (§10.1: close with code 3). */
export class FrameTooLargeError extends ReplicaDecodeError {
  constructor(
    readonly length: number,
    readonly max: number,
  ) {
    super("session", `message of ${length} bytes is over the limit of ${max}`);
  }
}

/**
 * Opens a WebTransport session to url (https://host:port/path), opens the
 * message stream and writes the preamble; resolves once the session is
 * ready. hashes, if any, are the SHA-256 hashes of the server's
 * certificate (serverCertificateHashes), for a self-signed development
 * certificate.
 */
export async function openWebTransport(
  url: string,
  WT: WebTransportConstructor,
  hashes: Uint8Array[] = [],
  maxMessageBytes = 1 << 20,
): Promise<Channel> {
  const opts: WebTransportOptionsLike = {};
  if (hashes.length > 0) opts.serverCertificateHashes = hashes.map((value) => ({ algorithm: "sha-256", value }));
  let wt: WebTransportLike;
  try {
    wt = new WT(url, opts);
  } catch (e) {
    throw new ChannelError(-1, `WebTransport: ${(e as Error).message}`);
  }
  const closedInfo = wt.closed.then(
    (info) => ({ code: info.closeCode ?? -1, reason: info.reason ?? "" }),
    (e: unknown) => ({ code: -1, reason: `WebTransport: ${(e as Error)?.message ?? String(e)}` }),
  );
  let stream;
  try {
    await wt.ready;
    stream = await wt.createBidirectionalStream();
  } catch (e) {
    try {
      wt.close();
    } catch {
      // not open
    }
    const c = await Promise.race([closedInfo, Promise.resolve(undefined)]);
    throw new ChannelError(c?.code ?? -1, `WebTransport: ${(e as Error)?.message ?? String(e)}`);
  }
  const writer = stream.writable.getWriter();
  const reader = stream.readable.getReader();
  let closing = false;
  const ch: Channel = {
    kind: "webtransport",
    send(b) {
      if (closing) return;
      // The writer queues writes in order; a failed write shows as the
      // session's close.
      writer.write(frame(b)).catch(() => {});
    },
    close(code, reason) {
      if (closing) return;
      closing = true;
      ch.onmessage = ch.onclose = null;
      try {
        wt.close({ closeCode: code, reason: truncateUTF8(reason, 256) });
      } catch {
        // already closed
      }
    },
    onmessage: null,
    onclose: null,
  };
  const end = (code: number, reason: string): void => {
    const h = ch.onclose;
    ch.close(code, reason);
    h?.(code, reason);
  };
  // The preamble goes out now, so that the server accepts the session
  // before the client's first message.
  writer.write(PREAMBLE).catch(() => {});
  void (async () => {
    const frames = new FrameReader(maxMessageBytes);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const m of frames.push(value)) {
          if (closing) return;
          ch.onmessage?.(m);
        }
      }
    } catch (e) {
      if (e instanceof FrameTooLargeError) return end(MESSAGE_TOO_LARGE, e.message);
      if (e instanceof ReplicaDecodeError) return end(2, e.message);
      // A reset stream: the session's close tells why.
    }
    // The server ended the stream: it is closing (§10.1). End ours in
    // answer, which tells it every message was read; it then closes the
    // session with the close code. (A REFUSE and the other last messages
    // came first: they travel on the stream, the close on the session's
    // own.) A server that does not close in time is gone.
    writer.close().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<{ code: number; reason: string }>((res) => {
      timer = setTimeout(() => res({ code: NETWORK_ERROR, reason: "the server ended the stream but did not close" }), CLOSE_WAIT_MS);
    });
    const c = await Promise.race([closedInfo, late]);
    clearTimeout(timer);
    if (!closing) end(c.code < 0 ? NETWORK_ERROR : c.code, c.reason);
  })();
  return ch;
}

/** s cut to at most n bytes of UTF-8, on a character boundary. */
function truncateUTF8(s: string, n: number): string {
  const b = new TextEncoder().encode(s);
  if (b.length <= n) return s;
  let end = n;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  return new TextDecoder().decode(b.subarray(0, end));
}
