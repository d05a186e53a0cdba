package wttransport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// h3NoError is HTTP/3's H3_NO_ERROR, the application error code of a QUIC
// connection closed in good order.
const h3NoError = quic.ApplicationErrorCode(http3.ErrCodeNoError)

// h3ExcessiveLoad closes a connection the listener has no room for
// (Config.MaxPending).
const h3ExcessiveLoad = quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad)

// Linger bounds how long the side that closed a session waits for the peer
// to close the QUIC connection (after receiving the close capsule) before
// closing it itself.
const (
	minLinger = 250 * time.Millisecond
	maxLinger = 2 * time.Second
)

// backend adapts a WebTransport session and its QUIC connection to
// quicconn.Backend.
type backend struct {
	qc   *quic.Conn
	sess *webtransport.Session
}

func (b backend) SendDatagram(p []byte) error { return b.sess.SendDatagram(p) }

func (b backend) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return b.sess.ReceiveDatagram(ctx)
}

func (b backend) Close(code transport.CloseCode, reason string) {
	if done(b.sess.Context()) || done(b.qc.Context()) {
		// The peer ended the session, or the connection is gone: nothing
		// to tell the peer.
		b.qc.CloseWithError(h3NoError, "")
		return
	}
	b.sess.CloseWithError(webtransport.SessionErrorCode(code), reason)
	linger := min(max(10*b.qc.ConnectionStats().SmoothedRTT, minLinger), maxLinger)
	go func() {
		t := time.NewTimer(linger)
		defer t.Stop()
		select {
		case <-b.qc.Context().Done():
		case <-t.C:
			b.qc.CloseWithError(h3NoError, "")
		}
	}()
}

func (b backend) MapError(err error) (transport.CloseCode, string, bool) {
	if e, ok := errors.AsType[*webtransport.SessionError](err); ok && e.Remote {
		return sessionClose(e)
	}
	if e := b.sessionError(); e != nil && e.Remote {
		return sessionClose(e)
	}
	if cause := context.Cause(b.qc.Context()); cause != nil {
		err = cause
	}
	return mapError(err)
}

// sessionError returns the session's close error if it is a
// *webtransport.SessionError.
func (b backend) sessionError() *webtransport.SessionError {
	if !done(b.sess.Context()) {
		return nil
	}
	// OpenStream returns the close error once the session is closed.
	str, err := b.sess.OpenStream()
	if err == nil {
		str.CancelRead(0)
		str.CancelWrite(0)
		return nil
	}
	e, _ := errors.AsType[*webtransport.SessionError](err)
	return e
}

func (b backend) closedByPeer() bool {
	e := b.sessionError()
	return e != nil && e.Remote
}

func sessionClose(e *webtransport.SessionError) (transport.CloseCode, string, bool) {
	if e.ErrorCode > webtransport.SessionErrorCode(transport.MaxCloseCode) {
		return transport.CloseProtocolError, fmt.Sprintf("unknown close code %#x: %s", uint32(e.ErrorCode), e.Message), true
	}
	return transport.CloseCode(e.ErrorCode), e.Message, true
}

// mapError maps errors of a WebTransport connection without a session
// close. Application error codes of the QUIC connection are HTTP/3's.
func mapError(err error) (transport.CloseCode, string, bool) {
	if e, ok := errors.AsType[*quic.ApplicationError](err); ok {
		if e.ErrorCode == h3NoError {
			return transport.CloseGoingAway, "connection closed without closing the session", e.Remote
		}
		return transport.CloseProtocolError, fmt.Sprintf("HTTP/3 error %#x: %s", uint64(e.ErrorCode), e.ErrorMessage), e.Remote
	}
	if e, ok := errors.AsType[*http3.Error](err); ok {
		if e.Remote {
			return transport.CloseGoingAway, "session ended without a close: " + e.Error(), true
		}
		return transport.CloseProtocolError, e.Error(), false
	}
	if e, ok := errors.AsType[*webtransport.StreamError](err); ok {
		return transport.CloseProtocolError, fmt.Sprintf("message stream reset with code %d", e.ErrorCode), false
	}
	return quicconn.MapQUICError(err)
}

func done(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// quarterStreamIDLen is the most a WebTransport datagram's quarter stream ID
// prefix takes.
const quarterStreamIDLen = 8

func newConn(qc *quic.Conn, sess *webtransport.Session, str *webtransport.Stream, cfg transport.Config) *quicconn.Conn {
	b := backend{qc: qc, sess: sess}
	c := quicconn.New(str, b, quicconn.Options{
		Config:          cfg,
		MaxDatagramSize: quicconn.DatagramSize(qc, quarterStreamIDLen),
		LocalAddr:       sess.LocalAddr(),
		RemoteAddr:      sess.RemoteAddr(),
	})
	context.AfterFunc(qc.Context(), func() { c.Ended(context.Cause(qc.Context())) })
	context.AfterFunc(sess.Context(), func() {
		if !b.closedByPeer() {
			// A session fails when its QUIC connection does, a moment
			// before the connection reports why: give it the moment.
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-qc.Context().Done():
			case <-t.C:
			}
			t.Stop()
		}
		c.Ended(context.Cause(sess.Context()))
	})
	return c
}
