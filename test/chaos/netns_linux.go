//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// netLab is the network of a run: one network namespace per member, each
// joined to the host by two veth pairs, a Kafka link and a device link, and
// the forwarders that carry the member's traffic over them.
//
// Inside a namespace, 127.0.0.1 is the namespace's own loopback, where the
// brokers' advertised addresses (127.0.0.1:1909x) lead nowhere. So the lab
// listens on those addresses inside each namespace and forwards every
// connection over the Kafka link to the host end of the link, where it
// listens again and forwards to the real broker. The member reaches
// Mosquitto at the host end of its device link, and the harness reaches the
// member's HTTP API at the namespace end of it. Setting a link down cuts
// exactly the traffic that crosses it; the connections stall, as they do
// when a cable is pulled, and resume when it comes back before they time
// out. A link that is down takes its /30 route with it, so the host holds an
// unreachable route for the lab's whole /16 beneath the links' routes: a
// connection of the harness to a cut member (an operator's resolve, an HTTP
// submission) fails with "no route to host", where without it the host
// would send it out of its default route, to whatever answers for that
// address there.
//
// The forwarders toward the brokers dial from 127.0.0.2, so that a packet
// filter can cut one broker from the others (every other client on
// 127.0.0.1 included) and leave the members' connections alone.
type netLab struct {
	id     string // short and unique: names the namespaces, links and table
	subnet int    // the second octet of every address of the lab
	table  string // the nftables table of the broker cuts
	nodes  []*netNode

	mu          sync.Mutex
	closed      bool
	listeners   []net.Listener
	conns       map[net.Conn]struct{}
	wg          sync.WaitGroup
	cuts        map[int]bool // brokers cut by the packet filter, by index
	unreachable bool         // the route of prefix() is the lab's
}

// prefix is the /16 that holds every address of the lab.
func (l *netLab) prefix() string { return fmt.Sprintf("10.%d.0.0/16", l.subnet) }

// netNode is the network of one member.
type netNode struct {
	member string
	ns     string // network namespace, kd-<id>-<member>
	kHost  string // Kafka link, host end
	kPeer  string // Kafka link, namespace end
	dHost  string // device link, host end
	dPeer  string // device link, namespace end
	index  int
	subnet int
}

// The addresses of a node: a /30 for each link.
func (n *netNode) kHostIP() string { return fmt.Sprintf("10.%d.%d.1", n.subnet, n.index) }
func (n *netNode) kPeerIP() string { return fmt.Sprintf("10.%d.%d.2", n.subnet, n.index) }
func (n *netNode) dHostIP() string { return fmt.Sprintf("10.%d.%d.5", n.subnet, n.index) }
func (n *netNode) dPeerIP() string { return fmt.Sprintf("10.%d.%d.6", n.subnet, n.index) }

// brokerSource is the address the lab's forwarders dial the brokers from.
var brokerSource = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// newNetLab creates the namespaces and links of members, and the packet
// filter table; on an error it removes what it created.
func newNetLab(id string, subnet int, members []string) (*netLab, error) {
	l := &netLab{id: id, subnet: subnet, table: "kd_" + id, conns: map[net.Conn]struct{}{}, cuts: map[int]bool{}}
	for i, m := range members {
		n := &netNode{member: m, ns: "kd-" + id + "-" + m, index: i + 1, subnet: subnet,
			kHost: fmt.Sprintf("kd%sk%d", id, i+1), kPeer: fmt.Sprintf("kd%sK%d", id, i+1),
			dHost: fmt.Sprintf("kd%sd%d", id, i+1), dPeer: fmt.Sprintf("kd%sD%d", id, i+1)}
		l.nodes = append(l.nodes, n)
		if err := l.createNode(n); err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := netCmd("ip", "route", "replace", "unreachable", l.prefix()); err != nil {
		l.Close()
		return nil, err
	}
	l.unreachable = true
	if err := netCmd("nft", "add", "table", "inet", l.table); err != nil {
		l.Close()
		return nil, err
	}
	if err := netCmd("nft", "add", "chain", "inet", l.table, "out", "{ type filter hook output priority 0; policy accept; }"); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *netLab) createNode(n *netNode) error {
	steps := [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "-n", n.ns, "link", "set", "lo", "up"},
		{"ip", "link", "add", n.kHost, "type", "veth", "peer", "name", n.kPeer},
		{"ip", "link", "set", n.kPeer, "netns", n.ns},
		{"ip", "addr", "add", n.kHostIP() + "/30", "dev", n.kHost},
		{"ip", "link", "set", n.kHost, "up"},
		{"ip", "-n", n.ns, "addr", "add", n.kPeerIP() + "/30", "dev", n.kPeer},
		{"ip", "-n", n.ns, "link", "set", n.kPeer, "up"},
		{"ip", "link", "add", n.dHost, "type", "veth", "peer", "name", n.dPeer},
		{"ip", "link", "set", n.dPeer, "netns", n.ns},
		{"ip", "addr", "add", n.dHostIP() + "/30", "dev", n.dHost},
		{"ip", "link", "set", n.dHost, "up"},
		{"ip", "-n", n.ns, "addr", "add", n.dPeerIP() + "/30", "dev", n.dPeer},
		{"ip", "-n", n.ns, "link", "set", n.dPeer, "up"},
	}
	for _, s := range steps {
		if err := netCmd(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// run runs one command of the host's network tools.
func netCmd(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// forwardBrokers makes the brokers reachable from every namespace at the
// addresses they advertise, over the Kafka link.
func (l *netLab) forwardBrokers(brokers []string) error {
	for _, n := range l.nodes {
		for _, b := range brokers {
			_, port, err := net.SplitHostPort(b)
			if err != nil {
				return err
			}
			host := net.JoinHostPort(n.kHostIP(), port)
			hostLn, err := net.Listen("tcp", host)
			if err != nil {
				return err
			}
			l.serve(hostLn, func() (net.Conn, error) {
				d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: brokerSource}
				return d.Dial("tcp", b)
			})
			var nsLn net.Listener
			if err := inNamespace(n.ns, func() error {
				var err error
				nsLn, err = net.Listen("tcp", b)
				return err
			}); err != nil {
				return err
			}
			ns := n.ns
			l.serve(nsLn, func() (net.Conn, error) {
				var c net.Conn
				err := inNamespace(ns, func() error {
					var err error
					c, err = net.DialTimeout("tcp", host, 5*time.Second)
					return err
				})
				return c, err
			})
		}
	}
	return nil
}

// forwardDevices makes addr (Mosquitto on the host's loopback) reachable
// from every namespace at the host end of its device link, on the same
// port; it returns that port.
func (l *netLab) forwardDevices(addr string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	for _, n := range l.nodes {
		ln, err := net.Listen("tcp", net.JoinHostPort(n.dHostIP(), port))
		if err != nil {
			return "", err
		}
		l.serve(ln, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) })
	}
	return port, nil
}

// serve accepts on ln until Close and pipes each connection to one that
// dial opens.
func (l *netLab) serve(ln net.Listener, dial func() (net.Conn, error)) {
	l.mu.Lock()
	l.listeners = append(l.listeners, ln)
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.pipe(c, dial)
			}()
		}
	}()
}

func (l *netLab) pipe(c net.Conn, dial func() (net.Conn, error)) {
	up, err := dial()
	if err != nil {
		c.Close()
		return
	}
	if !l.track(c, up) {
		return
	}
	defer l.untrack(c, up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass the half close on, and end the other direction too when
		// it waits on a peer that is gone.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_ = up.SetDeadline(time.Now().Add(time.Second))
	<-done
}

func (l *netLab) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *netLab) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(l.conns, c)
	}
}

// inNamespace runs f on an OS thread of its own that has entered the
// network namespace ns; the sockets f opens belong to ns for their whole
// life. The thread is never handed back to the runtime: it ends with f.
func inNamespace(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the runtime ends a thread whose goroutine
		// exits locked, so no other goroutine runs in ns.
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// node returns the network of member.
func (l *netLab) node(member string) *netNode {
	for _, n := range l.nodes {
		if n.member == member {
			return n
		}
	}
	return nil
}

// setLink sets the Kafka link (kafka true) or the device link of member
// down (up false) or up.
func (l *netLab) setLink(member string, kafka, up bool) error {
	n := l.node(member)
	if n == nil {
		return fmt.Errorf("no network for member %s", member)
	}
	dev := n.dHost
	if kafka {
		dev = n.kHost
	}
	state := "down"
	if up {
		state = "up"
	}
	return netCmd("ip", "link", "set", dev, state)
}

// cutBroker cuts the broker at addr (listener port) and ctrlPort from every
// connection on 127.0.0.1: the other brokers' connections to it, and its
// answers to them. The members' forwarders, on 127.0.0.2, keep reaching
// it; its own connections to the other brokers are not cut (see
// docs/RELIABILITY.md).
func (l *netLab) cutBroker(index int, ports ...int) error {
	var set []string
	for _, p := range ports {
		set = append(set, strconv.Itoa(p))
	}
	ps := "{ " + strings.Join(set, ", ") + " }"
	for _, dir := range []string{"dport", "sport"} {
		rule := fmt.Sprintf("ip saddr 127.0.0.1 ip daddr 127.0.0.1 tcp %s %s drop", dir, ps)
		if err := netCmd("nft", "add", "rule", "inet", l.table, "out", rule); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.cuts[index] = true
	l.mu.Unlock()
	return nil
}

// healBrokers removes every broker cut.
func (l *netLab) healBrokers() error {
	l.mu.Lock()
	l.cuts = map[int]bool{}
	l.mu.Unlock()
	return netCmd("nft", "flush", "chain", "inet", l.table, "out")
}

// Close stops the forwarders, and deletes the packet filter table, the
// links and the namespaces. It is idempotent and reports what it could not
// remove.
func (l *netLab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for _, ln := range l.listeners {
		ln.Close()
	}
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	var errs []error
	if err := netCmd("nft", "list", "table", "inet", l.table); err == nil {
		errs = append(errs, netCmd("nft", "delete", "table", "inet", l.table))
	}
	if l.unreachable {
		errs = append(errs, netCmd("ip", "route", "del", "unreachable", l.prefix()))
	}
	for _, n := range l.nodes {
		// Deleting one end of a veth pair deletes the other; deleting the
		// namespace deletes the ends inside it.
		_ = netCmd("ip", "link", "del", n.kHost)
		_ = netCmd("ip", "link", "del", n.dHost)
		if err := netCmd("ip", "netns", "del", n.ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
