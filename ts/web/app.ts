/**
 * The browser page of `replica demo` (and of the browser end-to-end test):
 * it joins the server that serves it with the TypeScript runtime, over
 * WebTransport when the browser can (falling back to WebSocket), and draws
 * the replicated world on a canvas as it changes: every entity it sees
 * with its hp and name, its own entity, which the viewer steers with the
 * keyboard or the mouse through a client RPC, and live figures.
 *
 * The server describes itself in /config.json (see internal/web). The query
 * parameter transport=webtransport|websocket|auto forces a transport.
 * window.replicaPage exposes the page's state to tests.
 *
 * It reads entities through the TypeScript classes replicagen -ts generates
 * for the schemas it is served with (the demo's bots, W1's arena units),
 * and steers through the generated stub of the bot's steer RPC.
 */

import { Connection, Kind, decodeDescriptor, type Entity, type Schema, type TransportMode } from "../src/index.js";
import { Bot, schema as demoSchema } from "../../internal/demo/demo_replica.js";
import { Qunit, Unit, schema as arenaSchema } from "../../internal/arena/arena_replica.js";

/** What the page draws of an entity: the fields every schema it is served with has. */
interface Mob {
  readonly entity: Entity;
  readonly x: number;
  readonly y: number;
  readonly hp: number;
  readonly name: string;
}

/** The typed view of e, of whichever of the page's schemas it is. */
const mob = (e: Entity | undefined): Mob | undefined => Bot.of(e) ?? Unit.of(e) ?? Qunit.of(e);

/**
 * The generated schema of the served one (by its classes), which the page
 * connects with so that the generated classes apply to the replica's
 * entities; the server's descriptor may differ from it as schema evolution
 * allows (docs/protocol.md §8).
 */
function localSchema(served: Schema): Schema {
  if (served.classNamed("Bot")) return demoSchema;
  if (served.classNamed("Unit") || served.classNamed("Qunit")) return arenaSchema;
  throw new Error("config.json: a schema this page has no generated classes for");
}

/** What the server's /config.json holds. */
interface Config {
  title: string;
  /** WebSocket URL; ws://host:port/ */
  ws: string;
  /** WebTransport URL (https://host:port/replica), or empty. */
  wt: string;
  /** Base64 SHA-256 hashes of the WebTransport certificate. */
  hashes: string[];
  /** Base64 descriptor of the page's schema: the client view of the server's. */
  descriptor: string;
  /** Connect token for this page load. */
  token: string;
  /** Side of the square world, in world units. */
  world: number;
  /** Span of the view around the viewer's own entity; 0 shows the whole world. */
  view: number;
  /** Radius of the viewer's area of interest, drawn around its entity; 0 for none. */
  radius: number;
  /** Client RPC on the viewer's own entity that walks it to (x, y); empty for none. */
  steer: string;
  /** Largest hp, for the colours and bars. */
  maxHp: number;
}

/** The page's state, for tests and curious viewers (window.replicaPage). */
interface PageState {
  status: "connecting" | "connected" | "closed";
  transport: string;
  tick: number;
  entities: number;
  /** Entities drawn in the last frame. */
  drawn: number;
  frames: number;
  /** Kilobytes received per second, and mean decode time per tick, over the last second. */
  kbps: number;
  decodeMs: number;
  /** The viewer's own entity, if it has one. */
  mine: { id: number; x: number; y: number } | null;
  error: string;
  /** FNV-1a 64 (hex) of the named fields of every entity, in ID order: see stateHash. */
  stateHash(fields: string[]): string;
  /** Steers the viewer's entity to (x, y). */
  steer(x: number, y: number): void;
}

const b64 = (s: string): Uint8Array => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

const page: PageState = {
  status: "connecting",
  transport: "",
  tick: 0,
  entities: 0,
  drawn: 0,
  frames: 0,
  kbps: 0,
  decodeMs: 0,
  mine: null,
  error: "",
  stateHash: () => "",
  steer: () => {},
};
(globalThis as { replicaPage?: PageState }).replicaPage = page;

const panel = document.getElementById("panel")!;
const canvas = document.getElementById("world") as HTMLCanvasElement;
const ctx = canvas.getContext("2d")!;

async function fetchConfig(): Promise<Config> {
  const r = await fetch("config.json", { cache: "no-store" });
  if (!r.ok) throw new Error(`config.json: HTTP ${r.status}`);
  return (await r.json()) as Config;
}

/**
 * stateHash is FNV-1a 64 over the little-endian bytes of each named field
 * of every entity, field by field, entities in ID order: float32 fields as
 * their bit patterns, float64 as theirs, integers of 8 to 32 bits at their
 * width. The W1 end-to-end test compares it with the server's.
 */
function stateHash(ents: Entity[], fields: string[]): string {
  const sorted = [...ents].sort((a, b) => a.id - b.id);
  const buf = new ArrayBuffer(8);
  const view = new DataView(buf);
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  const mask = (1n << 64n) - 1n;
  const eat = (n: number): void => {
    for (let i = 0; i < n; i++) h = ((h ^ BigInt(view.getUint8(i))) * prime) & mask;
  };
  for (const name of fields) {
    for (const e of sorted) {
      const f = e.type.fields.find((x) => x.name === name);
      if (!f) throw new Error(`no field ${name} in ${e.type.name}`);
      const v = Number(e.get(name));
      switch (f.type.kind) {
        case Kind.Float32: view.setFloat32(0, v, true); eat(4); break;
        case Kind.Float64: view.setFloat64(0, v, true); eat(8); break;
        case Kind.Int8: case Kind.Uint8: view.setUint8(0, v & 0xff); eat(1); break;
        case Kind.Int16: case Kind.Uint16: view.setUint16(0, v & 0xffff, true); eat(2); break;
        case Kind.Int32: case Kind.Uint32: view.setUint32(0, v >>> 0, true); eat(4); break;
        default: throw new Error(`field ${name}: cannot hash kind ${f.type.kind}`);
      }
    }
  }
  return h.toString(16).padStart(16, "0");
}

/** Bytes and decode times over the last second, for the panel. */
class Meter {
  private samples: { t: number; bytes: number; ms: number }[] = [];
  add(t: number, bytes: number, ms: number): void {
    this.samples.push({ t, bytes, ms });
    while (this.samples.length > 0 && this.samples[0]!.t < t - 1000) this.samples.shift();
  }
  bytesPerSecond(total: number, now: number): number {
    const first = this.samples[0];
    if (!first || now - first.t < 1) return 0;
    return ((total - first.bytes) * 1000) / (now - first.t);
  }
  meanMs(): number {
    if (this.samples.length === 0) return 0;
    return this.samples.reduce((s, x) => s + x.ms, 0) / this.samples.length;
  }
}

async function main(): Promise<void> {
  const params = new URLSearchParams(location.search);
  const mode = (params.get("transport") ?? "auto") as TransportMode;
  const cfg = await fetchConfig();
  document.title = cfg.title;
  const schema = localSchema(decodeDescriptor(b64(cfg.descriptor)));
  const conn = await Connection.connect({
    url: cfg.ws,
    webTransportUrl: cfg.wt || undefined,
    // Fresh hashes at every connect: the server rotates its certificate.
    certificateHashes: async () => (await fetchConfig()).hashes.map(b64),
    transport: mode,
    schema,
    token: cfg.token,
  });
  page.status = "connected";
  page.transport = conn.transport;
  const meter = new Meter();
  conn.onTick = (t) => {
    page.tick = Number(t);
    meter.add(performance.now(), conn.bytesReceived, conn.lastApplyMs);
  };
  conn.onError = (e) => (page.error = e.message);
  conn.onClose = (e) => {
    page.status = "closed";
    page.error = `closed: code ${e.code}: ${e.reason}`;
    // The server may be back in a moment (or rotated its certificate).
    setTimeout(() => {
      conn.reconnect().then(
        () => ((page.status = "connected"), (page.transport = conn.transport), (page.error = "")),
        (err: Error) => (page.error = err.message),
      );
    }, 2000);
  };
  page.stateHash = (fields) => stateHash(conn.replica.entities(), fields);

  const mine = (): Mob | undefined => mob(conn.replica.entities().find((e) => e.owned && e.alive));
  page.steer = (x, y) => {
    const b = Bot.of(mine()?.entity);
    if (cfg.steer && b) b.steer(conn, x, y);
  };

  // Camera: the whole world, or a window around the viewer's entity.
  let scale = 1;
  let originX = 0;
  let originY = 0;
  const camera = (): void => {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const me = mine();
    const span = cfg.view > 0 && me ? cfg.view : cfg.world;
    scale = Math.min(w, h) / span;
    const cx = cfg.view > 0 && me ? me.x : cfg.world / 2;
    const cy = cfg.view > 0 && me ? me.y : cfg.world / 2;
    originX = cx - w / 2 / scale;
    originY = cy - h / 2 / scale;
  };
  const toScreen = (x: number, y: number): [number, number] => [(x - originX) * scale, (y - originY) * scale];
  const toWorld = (sx: number, sy: number): [number, number] => [sx / scale + originX, sy / scale + originY];

  // Steering: click or drag to walk there; arrows or WASD to walk that way.
  let dragging = false;
  const steerTo = (ev: MouseEvent): void => {
    const r = canvas.getBoundingClientRect();
    const [x, y] = toWorld(ev.clientX - r.left, ev.clientY - r.top);
    page.steer(Math.max(0, Math.min(cfg.world, x)), Math.max(0, Math.min(cfg.world, y)));
  };
  canvas.addEventListener("mousedown", (ev) => ((dragging = true), steerTo(ev)));
  canvas.addEventListener("mousemove", (ev) => dragging && steerTo(ev));
  window.addEventListener("mouseup", () => (dragging = false));
  const keys = new Set<string>();
  window.addEventListener("keydown", (ev) => keys.add(ev.key.toLowerCase()));
  window.addEventListener("keyup", (ev) => keys.delete(ev.key.toLowerCase()));
  window.addEventListener("blur", () => keys.clear());
  setInterval(() => {
    let dx = 0;
    let dy = 0;
    if (keys.has("arrowleft") || keys.has("a")) dx--;
    if (keys.has("arrowright") || keys.has("d")) dx++;
    if (keys.has("arrowup") || keys.has("w")) dy--;
    if (keys.has("arrowdown") || keys.has("s")) dy++;
    const e = mine();
    if ((dx !== 0 || dy !== 0) && e) {
      const step = cfg.world / 40;
      const x = e.x + dx * step;
      const y = e.y + dy * step;
      page.steer(Math.max(0, Math.min(cfg.world, x)), Math.max(0, Math.min(cfg.world, y)));
    }
  }, 100);

  const hpColor = (hp: number): string => `hsl(${Math.round(Math.max(0, Math.min(1, hp / cfg.maxHp)) * 120)}, 70%, 52%)`;

  const draw = (): void => {
    camera();
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    ctx.fillStyle = "#0e1116";
    ctx.fillRect(0, 0, w, h);
    // The world's edge.
    const [x0, y0] = toScreen(0, 0);
    ctx.strokeStyle = "#2e3440";
    ctx.lineWidth = 1;
    ctx.strokeRect(x0, y0, cfg.world * scale, cfg.world * scale);
    const ents = conn.replica.entities();
    const me = mine();
    if (me && cfg.radius > 0) {
      const [mx, my] = toScreen(me.x, me.y);
      ctx.strokeStyle = "#3b4252";
      ctx.beginPath();
      ctx.arc(mx, my, cfg.radius * scale, 0, 2 * Math.PI);
      ctx.stroke();
    }
    const r = Math.max(2.5, Math.min(7, scale * cfg.world * 0.004));
    const names = ents.length <= 300; // the demo's room mode shows 201
    let drawn = 0;
    ctx.font = "11px ui-monospace, monospace";
    ctx.textAlign = "center";
    for (const ent of ents) {
      const e = mob(ent);
      if (!ent.alive || !e) continue;
      const isMe = ent === me?.entity;
      const [sx, sy] = toScreen(e.x, e.y);
      if (sx < -20 || sy < -20 || sx > w + 20 || sy > h + 20) continue;
      const hp = e.hp;
      ctx.fillStyle = hpColor(hp);
      ctx.beginPath();
      ctx.arc(sx, sy, isMe ? r * 1.6 : r, 0, 2 * Math.PI);
      ctx.fill();
      if (isMe) {
        ctx.strokeStyle = "#eceff4";
        ctx.lineWidth = 2;
        ctx.stroke();
      }
      // hp bar
      ctx.fillStyle = "#3b4252";
      ctx.fillRect(sx - 8, sy - r - 6, 16, 2);
      ctx.fillStyle = hpColor(hp);
      ctx.fillRect(sx - 8, sy - r - 6, (16 * Math.max(0, hp)) / cfg.maxHp, 2);
      if (names || isMe) {
        ctx.fillStyle = isMe ? "#eceff4" : "#7b8394";
        ctx.fillText(e.name, sx, sy + r + 11);
      }
      drawn++;
    }
    page.drawn = drawn;
    page.frames++;
    page.entities = ents.length;
    page.mine = me ? { id: me.entity.id, x: me.x, y: me.y } : null;
    const now = performance.now();
    const kbs = meter.bytesPerSecond(conn.bytesReceived, now) / 1000;
    page.kbps = kbs;
    page.decodeMs = meter.meanMs();
    const lines = [
      `<b>replica</b> ${cfg.title}`,
      `transport   ${page.transport}${page.status === "connected" ? "" : " (" + page.status + ")"}`,
      `tick        ${page.tick}`,
      `entities    ${ents.length} seen, ${drawn} drawn`,
      `received    ${kbs.toFixed(1)} KB/s`,
      `decode      ${meter.meanMs().toFixed(3)} ms/tick`,
    ];
    if (me) lines.push(`you         ${me.name} hp ${me.hp} at (${me.x.toFixed(0)}, ${me.y.toFixed(0)})`);
    if (cfg.steer) lines.push(`<div class="help">arrows/WASD or click to steer your bot</div>`);
    if (page.error) lines.push(`<div class="err">${page.error.replace(/</g, "&lt;")}</div>`);
    panel.innerHTML = lines.join("<br>");
    requestAnimationFrame(draw);
  };
  requestAnimationFrame(draw);
}

main().catch((e: Error) => {
  page.status = "closed";
  page.error = e.message;
  panel.innerHTML = `<div class="err">${e.message.replace(/</g, "&lt;")}</div>`;
});
