//go:build linux

package wstransport

import (
	"net"
	"syscall"
	"unsafe"
)

// kernelQueue returns a function that reports the bytes nc's socket holds
// in the kernel's send queue, written and not yet acknowledged by the
// peer (TIOCOUTQ), or nil if nc is not a socket.
func kernelQueue(nc net.Conn) func() int {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = u.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() int {
		var n int32
		var errno syscall.Errno
		err := rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
		})
		if err != nil || errno != 0 || n < 0 {
			return 0
		}
		return int(n)
	}
}

const kernelMeasured = true
