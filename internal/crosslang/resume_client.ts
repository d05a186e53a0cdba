// The Node side of TestTSResume (resume_test.go): the TypeScript client's
// Connection, over WebSocket (Node 20's --experimental-websocket), to the
// Go server at the URL of argv[2], with the demo schema's generated
// classes. It reports every tick applied as a JSON line on stdout and
// answers the commands of stdin, one a line:
//
//	reconnect  reconnect (resuming, if the server will); answers {"reconnected", "resumed"}
//	state      answers the canonical dump of the replica and the bot callbacks since the last state
//	quit       closes and exits
import { createInterface } from "node:readline";
import { Connection } from "@replicago/replica";
import { Bot, schema } from "../demo/demo_replica.js";
import { dump } from "../tsnode/canon.js";

const out = (o: object): void => void process.stdout.write(JSON.stringify(o) + "\n");

const c = await Connection.connect({ url: process.argv[2], schema, token: "ts", transport: "websocket" });
const events: string[] = [];
Bot.onCreate(c.replica, (b) => events.push(`create ${b.name}`));
Bot.onDestroy(c.replica, (b) => events.push(`destroy ${b.name}`));
Bot.onHpChange(c.replica, (b, old, now) => events.push(`hp ${b.name} ${old} ${now}`));
c.onTick = (t) => out({ tick: String(t) });
c.onError = (e) => out({ error: String(e) });
out({ joined: c.userId });

for await (const line of createInterface({ input: process.stdin })) {
  switch (line) {
    case "reconnect":
      await c.reconnect();
      out({ reconnected: true, resumed: c.resumed });
      break;
    case "state":
      out({ dump: dump(c.replica.entities()), events: events.splice(0), lastTick: String(c.lastTick) });
      break;
    case "quit":
      c.close();
      process.exit(0);
  }
}
