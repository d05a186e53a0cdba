package quicconn

import (
	"errors"
	"fmt"
	"io"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/transport"
)

// MapQUICError maps an error from a QUIC connection or stream to close info.
// An application error carries the peer's (or our own) close code and
// reason; timeouts map to CloseIdleTimeout and CloseHandshakeTimeout; a
// stream the peer finished or reset is a protocol error; anything else is a
// network error.
func MapQUICError(err error) (code transport.CloseCode, reason string, byPeer bool) {
	if e, ok := errors.AsType[*quic.ApplicationError](err); ok {
		if e.ErrorCode > quic.ApplicationErrorCode(transport.MaxCloseCode) {
			return transport.CloseProtocolError, fmt.Sprintf("unknown close code %#x: %s", uint64(e.ErrorCode), e.ErrorMessage), e.Remote
		}
		return transport.CloseCode(e.ErrorCode), e.ErrorMessage, e.Remote
	}
	if _, ok := errors.AsType[*quic.IdleTimeoutError](err); ok {
		return transport.CloseIdleTimeout, "no network activity", false
	}
	if _, ok := errors.AsType[*quic.HandshakeTimeoutError](err); ok {
		return transport.CloseHandshakeTimeout, "QUIC handshake timeout", false
	}
	if _, ok := errors.AsType[*quic.StatelessResetError](err); ok {
		return transport.CloseNetworkError, "stateless reset: the peer lost the connection", false
	}
	if e, ok := errors.AsType[*quic.VersionNegotiationError](err); ok {
		return transport.CloseIncompatible, e.Error(), false
	}
	if e, ok := errors.AsType[*quic.TransportError](err); ok {
		return transport.CloseProtocolError, e.Error(), e.Remote
	}
	if e, ok := errors.AsType[*quic.StreamError](err); ok {
		return transport.CloseProtocolError, fmt.Sprintf("message stream reset with code %d", e.ErrorCode), false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return transport.CloseProtocolError, "peer closed the message stream", false
	}
	if err == nil {
		return transport.CloseNetworkError, "connection lost", false
	}
	return transport.CloseNetworkError, err.Error(), false
}
