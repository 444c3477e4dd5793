//go:build linux

package modbus

import (
	"net"
	"syscall"
)

// usable reports whether a kept connection can carry the next request: the
// peer has not closed or reset it, and no stray byte waits on it (an answer
// that arrived after its request gave up would be read as the next one's).
// It peeks without blocking and without consuming.
func usable(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: open and quiet. n == 0 without error: the peer closed.
		// n > 0: stray bytes. Any other error: reset or broken.
		ok = n <= 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && ok
}
