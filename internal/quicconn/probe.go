package quicconn

import (
	"errors"

	"github.com/quic-go/quic-go"
)

// probe is larger than any QUIC packet, so SendDatagram refuses it without
// sending anything and reports the size it would accept.
var probe = make([]byte, 1<<16)

// DatagramSize returns the largest datagram payload qc accepts, less
// overhead (bytes the caller adds to each datagram), capped at
// MaxDatagramSize; 0 if either side has datagrams disabled.
func DatagramSize(qc *quic.Conn, overhead int) int {
	st := qc.ConnectionState()
	if !st.SupportsDatagrams.Local || !st.SupportsDatagrams.Remote {
		return 0
	}
	if e, ok := errors.AsType[*quic.DatagramTooLargeError](qc.SendDatagram(probe)); ok {
		return max(0, min(MaxDatagramSize, int(e.MaxDatagramPayloadSize)-overhead))
	}
	return MaxDatagramSize
}
