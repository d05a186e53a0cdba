package quictransport

import (
	"context"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// backend adapts a QUIC connection to quicconn.Backend.
type backend struct{ qc *quic.Conn }

func (b backend) SendDatagram(p []byte) error { return b.qc.SendDatagram(p) }

func (b backend) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	return b.qc.ReceiveDatagram(ctx)
}

func (b backend) Close(code transport.CloseCode, reason string) {
	b.qc.CloseWithError(quic.ApplicationErrorCode(code), reason)
}

func (b backend) MapError(err error) (transport.CloseCode, string, bool) {
	// A stream error may race the connection's own close: prefer the
	// connection's cause once it is known.
	if cause := context.Cause(b.qc.Context()); cause != nil {
		err = cause
	}
	return quicconn.MapQUICError(err)
}

func newConn(qc *quic.Conn, str *quic.Stream, cfg transport.Config) *quicconn.Conn {
	c := quicconn.New(str, backend{qc}, quicconn.Options{
		Config:          cfg,
		MaxDatagramSize: quicconn.DatagramSize(qc, 0),
		LocalAddr:       qc.LocalAddr(),
		RemoteAddr:      qc.RemoteAddr(),
	})
	context.AfterFunc(qc.Context(), func() { c.Ended(context.Cause(qc.Context())) })
	return c
}
