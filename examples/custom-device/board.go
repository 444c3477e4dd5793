package main

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
)

// Board simulates the relay board's firmware on a loopback port: it keeps
// the channel states, refuses a term below the highest it has seen (and a
// command without a term), and applies each command ID once.
type Board struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	channels map[int]bool
	highest  coordination.Term
	applied  map[string]bool
	tokens   map[string]coordination.FencingToken
	stall    chan struct{}
	conns    map[net.Conn]struct{}
}

// StartBoard listens on a free port of 127.0.0.1. Close stops it.
func StartBoard() (*Board, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Board{ln: ln, channels: map[int]bool{}, highest: coordination.NoTerm,
		applied: map[string]bool{}, tokens: map[string]coordination.FencingToken{}, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Addr is the board's host:port.
func (b *Board) Addr() string { return b.ln.Addr().String() }

// Close stops the board and waits for its goroutines.
func (b *Board) Close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	if b.stall != nil {
		close(b.stall)
		b.stall = nil
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// Channel reports a channel's state.
func (b *Board) Channel(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.channels[n]
}

// Token reports the token a command arrived with.
func (b *Board) Token(id string) (coordination.FencingToken, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tokens[id]
	return t, ok
}

// Stall makes the board stop answering until resume is called.
func (b *Board) Stall() (resume func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	b.stall = ch
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.stall == ch {
			close(ch)
			b.stall = nil
		}
	}
}

func (b *Board) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *Board) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		b.mu.Lock()
		stall := b.stall
		b.mu.Unlock()
		if stall != nil {
			<-stall
		}
		if _, err := c.Write([]byte(b.handle(strings.Fields(line)) + "\n")); err != nil {
			return
		}
	}
}

func (b *Board) handle(f []string) string {
	if len(f) == 1 && f[0] == "PING" {
		return "PONG"
	}
	if len(f) != 6 || f[0] != "SET" {
		return "ERR syntax"
	}
	channel, err := strconv.Atoi(f[1])
	if err != nil {
		return "ERR channel"
	}
	term, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || term <= 0 {
		return "ERR term"
	}
	token, err := coordination.ParseFencingToken(f[4])
	if err != nil {
		return "ERR token"
	}
	id := f[5]
	b.mu.Lock()
	defer b.mu.Unlock()
	// Terms order leaderships; any token of the highest term is admitted.
	if coordination.Term(term).Compare(b.highest) < 0 {
		return "STALE"
	}
	b.highest = coordination.Term(term)
	b.tokens[id] = token
	if !b.applied[id] {
		b.applied[id] = true
		b.channels[channel] = f[2] == "ON"
	}
	return "OK"
}
