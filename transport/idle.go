package transport

import (
	"context"
	"sync/atomic"
	"time"
)

// An IdleReceiver is a read loop's receive with an idle timeout: when a
// Receive waits longer than the timeout, it closes the connection with
// CloseIdleTimeout. It keeps one timer for the connection, so that a
// busy read loop allocates nothing per message (a context with a
// deadline per Receive costs a context and a timer each).
type IdleReceiver struct {
	c     Conn
	idle  time.Duration
	timer *time.Timer
	fired atomic.Bool
}

// NewIdleReceiver returns an IdleReceiver for c that closes it with
// CloseIdleTimeout and reason after idle (> 0) without a message.
func NewIdleReceiver(c Conn, idle time.Duration, reason string) *IdleReceiver {
	r := &IdleReceiver{c: c, idle: idle}
	r.timer = time.AfterFunc(idle, func() {
		r.fired.Store(true)
		c.Close(CloseIdleTimeout, reason)
	})
	r.timer.Stop()
	return r
}

// Receive returns the next reliable message, like Conn.Receive. When none
// comes within the idle timeout, the connection is closed and Receive
// returns the error wrapping ErrClosed; TimedOut then reports true. One
// goroutine at a time may call it.
func (r *IdleReceiver) Receive() ([]byte, error) {
	r.timer.Reset(r.idle)
	msg, err := r.c.Receive(context.Background())
	r.timer.Stop()
	return msg, err
}

// TimedOut reports whether the idle timeout closed the connection.
func (r *IdleReceiver) TimedOut() bool { return r.fired.Load() }
