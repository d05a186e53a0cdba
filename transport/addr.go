package transport

import (
	"net"
	"net/netip"
	"net/url"
)

// SourceAddr returns the part of a remote address that identifies where a
// connection comes from, for limits per source: the IP of an IP address
// (its port dropped), the host of a host:port, else the whole address.
func SourceAddr(addr net.Addr) string {
	switch a := addr.(type) {
	case nil:
		return ""
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	}
	if h, _, err := net.SplitHostPort(addr.String()); err == nil {
		return h
	}
	return addr.String()
}

// Loopback reports whether addr can only be reached from this host: a
// loopback IP or "localhost", in a host:port or a URL (wstransport's
// addresses), or an in-memory address. A server warns when it admits
// anonymous clients on any other.
func Loopback(addr net.Addr) bool {
	if addr == nil {
		return false
	}
	if addr.Network() == "mem" {
		return true
	}
	host := addr.String()
	if u, err := url.Parse(host); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return LoopbackHost(host)
}

// LoopbackHost reports whether host, a name or an IP without a port, is
// "localhost" or a loopback IP.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
