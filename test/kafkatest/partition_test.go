package kafkatest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestPartitionSilencesWithoutClosing checks the fault the Partition
// models: bytes flow before the cut; after it, writes vanish, a read waits
// for its deadline, and a new dial fails.
func TestPartitionSilencesWithoutClosing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	received := make(chan []byte, 4)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				close(received)
				return
			}
			received <- append([]byte(nil), buf[:n]...)
			c.Write(buf[:n]) // echo
		}
	}()

	p := NewPartition()
	conn, err := p.Dial(t.Context(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 6)
	if _, err := io.ReadFull(conn, echo); err != nil || string(echo) != "before" {
		t.Fatalf("echo %q, %v", echo, err)
	}
	<-received

	p.Cut()
	if n, err := conn.Write([]byte("after")); err != nil || n != 5 {
		t.Fatalf("write after the cut: %d, %v; want it swallowed", n, err)
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	start := time.Now()
	_, err = conn.Read(echo)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read after the cut: %v, want a timeout", err)
	}
	if waited := time.Since(start); waited < 90*time.Millisecond {
		t.Errorf("read returned after %v, before its deadline", waited)
	}
	select {
	case b, ok := <-received:
		if ok {
			t.Errorf("the peer received %q after the cut", b)
		}
	default:
	}
	if _, err := p.Dial(t.Context(), "tcp", l.Addr().String()); !errors.Is(err, ErrPartitioned) {
		t.Errorf("dial after the cut: %v, want ErrPartitioned", err)
	}
	conn.Close()
	if _, err := conn.Read(echo); !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after close: %v, want a closed connection", err)
	}
}
