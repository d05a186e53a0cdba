package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/replicago/replica"
	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/transport"
)

// recording is the demo's recorder (Config.Record): a connection to the
// server over an in-memory network that writes what a spectator sees to
// a file, which "replica replay" serves.
type recording struct {
	user string // the recorder's user ID, which the demo gives no bot
	file *os.File
	ln   transport.Listener
	rec  *replay.Recorder
}

// startRecording connects a recorder to r.srv; the server must be serving
// and ticking for it to join. It returns once the handshake is done.
func (r *runner) startRecording(ctx context.Context) (*recording, error) {
	f, err := os.Create(r.cfg.Record)
	if err != nil {
		return nil, err
	}
	// A random user ID: tokens are user IDs here, so no client can take
	// the recorder's place (a newer session replaces an older one).
	var b [8]byte
	rand.Read(b[:])
	rc := &recording{user: "recorder-" + hex.EncodeToString(b[:]), file: f}
	nw := transport.NewMemNetwork()
	if rc.ln, err = nw.Listen("", transport.Config{}); err != nil {
		f.Close()
		return nil, err
	}
	r.serving.Add(1)
	go func() {
		defer r.serving.Done()
		r.srv.Serve(ctx, rc.ln)
	}()
	rc.rec, err = replay.Record(ctx, nw.Dialer(transport.Config{}), rc.ln.Addr().String(), Schema(), f,
		replay.RecordConfig{Token: []byte(rc.user), Keyframe: 5 * r.cfg.Hz})
	if err != nil {
		rc.ln.Close()
		f.Close()
		return nil, fmt.Errorf("recorder: %w", err)
	}
	return rc, nil
}

// watch runs on the tick goroutine when the recorder joins: in a room it
// sees every bot; in the AOI space it views the arena from its centre, as
// a camera there would, and sees the bots whose radius reaches it.
func (w *world) watch(c *replica.Conn) error {
	if w.space == nil {
		return nil
	}
	if err := w.srv.View(c, w.space); err != nil {
		return err
	}
	return w.srv.SetViewpoint(c, worldSize/2, worldSize/2)
}

// stop ends the recording once the server has closed: the file gets its
// keyframe index. It returns the last tick recorded.
func (rc *recording) stop() (uint64, error) {
	err := rc.rec.Close()
	rc.ln.Close()
	if cerr := rc.file.Close(); err == nil {
		err = cerr
	}
	return rc.rec.LastTick(), err
}
