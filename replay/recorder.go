package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// RecordConfig configures Record. The zero value is valid.
type RecordConfig struct {
	// Token is the recorder's connect token. The game should know the
	// user it names as a recorder: give it no entity (a recorder that is
	// given one stops with ErrOwner) and let it view the space to record.
	Token []byte
	// Keyframe is K: a keyframe follows every K-th tick. The default is
	// 100; a seek applies at most K−1 ticks to a keyframe.
	Keyframe int
	// Limits are the recorder's decoder limits, sent in the HELLO; the
	// server must send within them. Zero fields select codec's defaults.
	Limits codec.Limits
	// HandshakeTimeout bounds the handshake. The default is 5 seconds.
	HandshakeTimeout time.Duration
	// Ping is how often the recorder pings the server, which closes a
	// connection it hears nothing from for its idle timeout. The default
	// is 5 seconds.
	Ping time.Duration
}

// ErrOwner stops a recording whose connection was given an entity: a
// recording is what a spectator sees, and a spectator owns nothing.
var ErrOwner = errors.New("replay: the recording connection was given an entity")

// A Recorder is a connection to a replica server that writes what it
// receives, the ticks of the space it views, to a recording.
type Recorder struct {
	tc   transport.Conn
	w    *Writer
	bw   *bufio.Writer
	rep  *client.Replica
	full *fuller
	k    uint64

	last   atomic.Uint64 // the last tick written
	done   chan struct{} // closed when reading stops
	mu     sync.Mutex
	err    error // why reading stopped, if not a close
	closed bool
}

// Record connects to the server at addr through d, as a client of schema
// local (the game's schema, as its clients are built with), and records
// the session to out until Close.
func Record(ctx context.Context, d transport.Dialer, addr string, local *schema.Schema, out io.Writer, cfg RecordConfig) (*Recorder, error) {
	if cfg.Keyframe <= 0 {
		cfg.Keyframe = 100
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.Ping <= 0 {
		cfg.Ping = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	tc, err := d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	hello := &session.Hello{Version: session.ProtocolVersion, Descriptor: local.AppendDescriptor(nil),
		Token: cfg.Token, Limits: cfg.Limits}
	fail := func(err error) (*Recorder, error) {
		tc.Close(transport.CloseNormal, "handshake failed")
		return nil, err
	}
	if err := tc.Send(session.AppendHello(nil, hello)); err != nil {
		return fail(err)
	}
	msg, err := tc.Receive(ctx)
	if err != nil {
		return fail(fmt.Errorf("replay: handshake: %w", err))
	}
	m, err := session.Parse(msg)
	if err != nil {
		return fail(fmt.Errorf("replay: handshake: %w", err))
	}
	var wel *session.Welcome
	switch m := m.(type) {
	case *session.Refuse:
		return fail(&client.RefusedError{Code: transport.CloseCode(m.Code), Message: m.Message})
	case *session.Welcome:
		wel = m
	default:
		return fail(fmt.Errorf("replay: handshake: expected WELCOME, got %T", m))
	}
	if wel.Version != session.ProtocolVersion {
		return fail(fmt.Errorf("replay: server speaks protocol %d, this recorder %d", wel.Version, session.ProtocolVersion))
	}
	remote, err := schema.DecodeDescriptor(wel.Descriptor)
	if err != nil {
		return fail(fmt.Errorf("replay: server schema: %w", err))
	}
	// The replica holds the server's schema as its own, so that keyframes
	// encode every field the server sends, whatever the game's version.
	rep, err := client.New(remote, client.Config{Remote: remote, Limits: cfg.Limits})
	if err != nil {
		return fail(err)
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	w, err := NewWriter(bw, Header{Protocol: session.ProtocolVersion, TickRate: wel.TickRate,
		Keyframe: uint32(cfg.Keyframe), Descriptor: wel.Descriptor})
	if err != nil {
		return fail(err)
	}
	r := &Recorder{tc: tc, w: w, bw: bw, rep: rep, full: newFuller(remote, cfg.Limits), k: uint64(cfg.Keyframe),
		done: make(chan struct{})}
	go r.read()
	go r.keepAlive(cfg.Ping)
	return r, nil
}

func (r *Recorder) keepAlive(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-r.tc.Done():
			return
		case <-t.C:
			nonce++
			r.tc.Send(session.AppendPing(nil, &session.Ping{Nonce: nonce}))
		}
	}
}

// read records until the connection closes.
func (r *Recorder) read() {
	defer close(r.done)
	resync := true // the first TICK is the full state
	lastKey := uint64(0)
	for {
		msg, err := r.tc.Receive(context.Background())
		if err != nil {
			r.stop(err)
			return
		}
		m, err := session.Parse(msg)
		if err != nil {
			r.fail(transport.CloseProtocolError, err)
			return
		}
		switch m := m.(type) {
		case *session.Tick:
			msgs := make([][]byte, 1, 1+m.Segments)
			msgs[0] = msg
			for range m.Segments {
				seg, err := r.tc.Receive(context.Background())
				if err != nil {
					r.stop(err)
					return
				}
				msgs = append(msgs, seg)
			}
			if len(m.Gained) > 0 || len(m.Lost) > 0 {
				r.fail(transport.CloseNormal, ErrOwner)
				return
			}
			if resync {
				if err := r.rep.Reset(r.rep.Schema()); err != nil {
					r.fail(transport.CloseInternalError, err)
					return
				}
			}
			if err := r.rep.ApplyTickInfo(tickInfo(m), msgs[1:]...); err != nil {
				r.fail(transport.CloseProtocolError, err)
				return
			}
			if resync {
				// A full state, as received: the first tick, or the one
				// after a RESYNC, which playback resyncs at too.
				err = r.w.Keyframe(m.Tick, msgs)
				lastKey, resync = m.Tick, false
			} else {
				err = r.w.Tick(m.Tick, msgs)
				if err == nil && m.Tick-lastKey >= r.k {
					err = r.keyframe(m.Tick)
					lastKey = m.Tick
				}
			}
			if err != nil {
				r.fail(transport.CloseInternalError, err)
				return
			}
			r.last.Store(m.Tick)
		case *session.Ping:
			r.tc.Send(session.AppendPong(nil, &session.Pong{Nonce: m.Nonce}))
		case *session.Resync:
			resync = true
		case *session.Pong, *session.RPC:
			// A spectator owns nothing, so no RPC is addressed to it but
			// broadcasts, which a recording leaves out.
		default:
			r.fail(transport.CloseProtocolError, fmt.Errorf("replay: unexpected %T from the server", m))
			return
		}
	}
}

// keyframe writes the full state of the recorder's replica after tick n.
func (r *Recorder) keyframe(n uint64) error {
	msgs, err := r.full.frame(r.rep, n)
	if err != nil {
		return err
	}
	if err := r.w.Keyframe(n, msgs); err != nil {
		return err
	}
	// A recording whose recorder dies keeps everything up to here.
	return r.bw.Flush()
}

func tickInfo(m *session.Tick) client.TickInfo {
	var info client.TickInfo
	for _, l := range m.Levels {
		info.Levels = append(info.Levels, client.Level{ID: state.ID(l.ID), Level: l.Level})
	}
	return info
}

func (r *Recorder) fail(code transport.CloseCode, err error) {
	r.tc.Close(code, err.Error())
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

func (r *Recorder) stop(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil && !r.closed {
		r.err = err
	}
}

// LastTick returns the last tick recorded (0 before the first).
func (r *Recorder) LastTick() uint64 { return r.last.Load() }

// Done is closed when the recorder stops: its connection closed.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// Err returns why the recorder stopped, or nil while it records or after
// Close.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close ends the session, and the recording with its keyframe index. It
// returns the error that stopped recording earlier, if any, or the
// error of writing the end.
func (r *Recorder) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.tc.Close(transport.CloseNormal, "recording ended")
	<-r.done
	err := r.Err()
	if errors.Is(err, transport.ErrClosed) {
		err = nil // the server ended the session: the recording ends there
	}
	if werr := r.w.Close(); err == nil {
		err = werr
	}
	if ferr := r.bw.Flush(); err == nil {
		err = ferr
	}
	return err
}
