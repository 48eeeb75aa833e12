package cluster

import (
	"crypto/tls"
	"net"
)

// tlsListener accepts TLS connections with the member's server side: the
// handshake (with its client certificate check) runs on the connection's
// first read, before any request is read.
type tlsListener struct {
	net.Listener
	t *TLS
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(c, l.t.Server), nil
}
