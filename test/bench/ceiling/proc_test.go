package ceiling

import (
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func TestReadProcOfSelf(t *testing.T) {
	before, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 {
		t.Fatalf("RSS %d, want a positive size", before.RSS)
	}
	// Burn some CPU so the CPU time moves.
	x := 0
	for i := range 200_000_000 {
		x ^= i
	}
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.CPU <= before.CPU {
		t.Fatalf("CPU time did not grow (%v then %v, %d)", before.CPU, after.CPU, x)
	}
	if share := CPUShare(before, after); share <= 0 {
		t.Fatalf("CPU share %v, want positive", share)
	}
}

func TestReadMachine(t *testing.T) {
	m := ReadMachine()
	if m.CPUs < 1 || m.MemoryBytes <= 0 || m.GoVersion == "" {
		t.Fatalf("machine facts incomplete: %+v", m)
	}
}

func TestSegmentsToCountsOwnConnection(t *testing.T) {
	if err := CheckSS(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ports, err := brokerPorts([]string{ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	before, err := SegmentsTo(os.Getpid(), ports)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := conn.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		// One write, one segment: wait for it to be acknowledged so the next
		// write is not coalesced with it.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := SegmentsTo(os.Getpid(), ports)
			if err != nil {
				t.Fatal(err)
			}
			if n > before {
				before = n
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("segment count stayed at %d after a write", n)
			}
		}
	}
}

func TestOpenFilesLimitOfThisProcess(t *testing.T) {
	n, err := OpenFilesLimit(os.Getpid())
	if err != nil || n < 0 {
		t.Errorf("limit %d, %v", n, err)
	}
}
