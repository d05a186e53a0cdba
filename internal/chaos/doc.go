// Package chaos tests replication over QUIC in a simulated, impaired
// network, in virtual time (testing/synctest), for the runtime milestone's
// chaos requirement: under profile "unit" (250 ms jitter, 5 % loss, 10 %
// duplication) and profile "brutal" (1000 ms latency, 100 ms jitter, 25 %
// loss, 25 % duplication) every client converges to the server's view,
// and reliable RPCs arrive exactly once, in order.
//
// The package holds the test helpers: [Network], quic-go's simnet with a
// [Profile] applied to every packet (how each impairment maps onto simnet
// is described at Network), and the state hash ([ServerDigest],
// [ReplicaDigest]) that compares a client's replica with the server's
// state as that client may see it.
//
// The tests (chaos_test.go) run a server and four clients over
// quictransport on a Network: each client owns a bot, and the game moves
// bots, changes their hit points, score (owner only), bounty (others
// only), AI mode (server only), targets and inventories, and spawns and
// destroys NPC bots. After every tick a client applies, its replica must
// hash like the server's state of that tick for that client; at the end
// every client must have applied the last tick and still be connected.
//
// Reliable RPCs travel in both directions during the game, numbered: emote
// calls from every client, hurt calls from the server to owners. At the end
// every call must have arrived exactly once, in order.
//
// Flags (go test ./internal/chaos -args -chaos.…) vary the scenario:
// -chaos.profile, -chaos.custom latency,jitter,loss,duplication,
// -chaos.ticks, -chaos.clients, -chaos.seed, -chaos.sendq and -chaos.v.
//
// Under "brutal" sustained for a minute (TestBrutalSustained), the
// server's QUIC congestion window carries about 60 % of the ticks this
// game sends, so clients fall behind; the server pauses each one whose
// backlog passes its lag threshold and resynchronises it with the full
// state once the backlog drains. The test sets every timeout, the
// server's LagTimeout included, far above what the network explains (see
// chaosTimeouts), so that only a stall fails it.
package chaos
