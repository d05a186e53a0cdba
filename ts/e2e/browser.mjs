// The browser end-to-end test: Debian's Chromium, driven by playwright-core,
// loads the page of internal/web from Go servers and checks what it did.
//
// 1. W1 (go run ./internal/web/w1page): two pages join at once, one over
//    WebTransport (serverCertificateHashes, the server's development
//    certificate) and one forced to WebSocket; each must reach a replica
//    whose hash equals the server's after the last W1 step, and draw the
//    entities on its canvas.
// 2. The demo (go run ./cmd/replica demo): the page at the address the
//    demo prints joins (WebTransport by default), draws the arena, and the
//    viewer's bot moves where the arrow keys steer it; a screenshot of it is
//    written to e2e/artifacts/demo.png.
//
// Run from ts/: npm run e2e. CHROMIUM overrides /usr/bin/chromium.

import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const artifacts = join(here, "artifacts");
const DEADLINE_MS = 60_000; // generous: the machine may be loaded

const children = [];
let failed = false;

function fail(msg) {
  failed = true;
  console.error("FAIL:", msg);
}

/** Starts a Go command in the module root; resolves with the first stdout line matching re. */
function startGo(args, re) {
  // Its own process group, so that a signal reaches the program go run
  // started, not only go.
  const child = spawn("go", args, { cwd: root, stdio: ["pipe", "pipe", "inherit"], detached: true });
  child.exited = new Promise((res) => child.on("exit", res));
  children.push(child);
  const lines = [];
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout });
    rl.on("line", (line) => {
      lines.push(line);
      const m = line.match(re);
      if (m) resolve({ child, m, lines });
    });
    child.on("exit", (code) => reject(new Error(`go ${args.join(" ")} exited with ${code}:\n${lines.join("\n")}`)));
  });
}

/** Polls fn (in the page) until it returns a truthy value, or fails with describe(). */
async function until(page, what, fn, arg) {
  const end = Date.now() + DEADLINE_MS;
  for (;;) {
    const v = await page.evaluate(fn, arg);
    if (v) return v;
    if (Date.now() > end) {
      const st = await page.evaluate(() => {
        const p = window.replicaPage;
        return p && { status: p.status, transport: p.transport, tick: p.tick, entities: p.entities, drawn: p.drawn, error: p.error, mine: p.mine };
      });
      throw new Error(`${what}: not within ${DEADLINE_MS / 1000}s; page state ${JSON.stringify(st)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Pixels of the page's canvas that are not its background colour. */
function litPixels(page) {
  return page.evaluate(() => {
    const c = document.getElementById("world");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - 0x0e) + Math.abs(d[i + 1] - 0x11) + Math.abs(d[i + 2] - 0x16) > 24) n++;
    return n;
  });
}

async function w1(browser) {
  const { m } = await startGo(["run", "./internal/web/w1page", "-steps", "100"], /^\{"url":"(.*)"\}$/);
  const url = m[1];
  const fields = ["x", "y", "angle", "hp"];
  const pages = {};
  for (const transport of ["webtransport", "websocket"]) {
    const p = await browser.newPage();
    await p.setViewportSize({ width: 800, height: 800 });
    p.on("console", (msg) => msg.type() === "error" && console.error(`[${transport} page]`, msg.text()));
    await p.goto(`${url}?transport=${transport}`);
    pages[transport] = p;
  }
  let want;
  const end = Date.now() + DEADLINE_MS;
  while (!want?.done) {
    if (Date.now() > end) throw new Error("W1 server did not finish its steps");
    want = await (await fetch(url + "w1.json")).json();
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const [transport, p] of Object.entries(pages)) {
    try {
      await until(p, `${transport}: connected over ${transport}`, (t) => window.replicaPage?.status === "connected" && window.replicaPage.transport === t, transport);
      await until(p, `${transport}: replica hash ${want.hash}`, ([f, h]) => window.replicaPage.stateHash(f) === h, [fields, want.hash]);
      const st = await until(p, `${transport}: entities drawn`, () => window.replicaPage.drawn === 1000 && window.replicaPage.frames > 1 && window.replicaPage);
      const lit = await litPixels(p);
      if (lit < 1000) throw new Error(`${transport}: only ${lit} canvas pixels differ from the background`);
      await p.screenshot({ path: join(artifacts, `w1-${transport}.png`) });
      console.log(`ok  W1 over ${transport}: tick ${st.tick}, ${st.entities} entities, ${st.drawn} drawn, ${lit} lit pixels, hash ${want.hash}; decode ${st.decodeMs.toFixed(3)} ms/tick`);
    } catch (e) {
      fail(e.message);
    }
  }
}

async function demo(browser) {
  const { m } = await startGo(
    ["run", "./cmd/replica", "demo", "-entities", "200", "-clients", "4", "-duration", "5m", "-room"],
    /^(http:\/\/127\.0\.0\.1:\d+\/)$/,
  );
  const p = await browser.newPage();
  await p.setViewportSize({ width: 1000, height: 800 });
  p.on("console", (msg) => msg.type() === "error" && console.error("[demo page]", msg.text()));
  await p.goto(m[1]);
  try {
    await until(p, "demo: connected over WebTransport", () => window.replicaPage?.status === "connected" && window.replicaPage.transport === "webtransport");
    // Steer: right if there is room, else left; the bot walks that way. A
    // bot that dies on the way respawns elsewhere as a new entity: start
    // over with it.
    let start;
    let moved;
    for (let attempt = 0; !moved; attempt++) {
      start = await until(p, "demo: own bot and bots drawn", () => window.replicaPage.mine && window.replicaPage.drawn > 50 && window.replicaPage.mine);
      const key = start.x < 1000 ? "ArrowRight" : "ArrowLeft";
      const sign = key === "ArrowRight" ? 1 : -1;
      await p.keyboard.down(key);
      const r = await until(
        p,
        `demo: own bot steered ${key}`,
        ([x0, s, id]) => {
          const me = window.replicaPage.mine;
          if (me && me.id !== id) return { respawned: true };
          return me && (me.x - x0) * s > 100 && me;
        },
        [start.x, sign, start.id],
      );
      await p.keyboard.up(key);
      if (!r.respawned) moved = r;
      else if (attempt === 2) throw new Error("demo: own bot died on each of three walks");
    }
    const lit = await litPixels(p);
    if (lit < 500) throw new Error(`demo: only ${lit} canvas pixels differ from the background`);
    await p.screenshot({ path: join(artifacts, "demo.png") });
    const st = await p.evaluate(() => window.replicaPage);
    console.log(`ok  demo over ${st.transport}: ${st.entities} bots seen, ${st.drawn} drawn, own bot steered from x=${start.x.toFixed(0)} to x=${moved.x.toFixed(0)}, ${lit} lit pixels, ${st.kbps.toFixed(1)} KB/s, decode ${st.decodeMs.toFixed(3)} ms/tick; screenshot e2e/artifacts/demo.png`);
  } catch (e) {
    await p.screenshot({ path: join(artifacts, "demo-failed.png") }).catch(() => {});
    fail(e.message);
  }
}

async function main() {
  mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "replica-chromium-"));
  // A fresh profile (--user-data-dir), which playwright passes itself.
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    await w1(browser);
    await demo(browser);
  } catch (e) {
    fail(e.stack ?? e.message);
  } finally {
    await browser.close();
    // Interrupt the servers and let them finish (their output is still
    // read), killing any that hang.
    await Promise.all(
      children.map(async (c) => {
        c.stdin.end();
        try {
          process.kill(-c.pid, "SIGINT");
        } catch {
          return; // already gone
        }
        const t = setTimeout(() => process.kill(-c.pid, "SIGKILL"), 15_000);
        await c.exited;
        clearTimeout(t);
      }),
    );
    rmSync(profile, { recursive: true, force: true });
  }
  writeFileSync(join(artifacts, "result.txt"), failed ? "failed\n" : "ok\n");
  process.exit(failed ? 1 : 0);
}

await main();
