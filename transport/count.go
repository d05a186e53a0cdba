package transport

import (
	"context"
	"sync/atomic"
)

// CountReceived wraps d so that every connection it dials adds the length
// of each message and datagram it receives to *n: the payload the session
// layer gets, without the network's framing. Demos, benchmarks and metrics
// use it to report bandwidth.
func CountReceived(d Dialer, n *atomic.Int64) Dialer { return countingDialer{d, n} }

type countingDialer struct {
	Dialer
	n *atomic.Int64
}

func (d countingDialer) Dial(ctx context.Context, addr string) (Conn, error) {
	c, err := d.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: d.n}, nil
}

type countingConn struct {
	Conn
	n *atomic.Int64
}

func (c *countingConn) Receive(ctx context.Context) ([]byte, error) {
	msg, err := c.Conn.Receive(ctx)
	c.n.Add(int64(len(msg)))
	return msg, err
}

func (c *countingConn) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	msg, err := c.Conn.ReceiveDatagram(ctx)
	c.n.Add(int64(len(msg)))
	return msg, err
}
