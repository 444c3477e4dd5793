//go:build integration && linux

package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNetLabCutsAndHealsTheLinks proves the network of a run: a process in
// a member's namespace reaches a service on the host's loopback at the
// service's own address through the Kafka link, and the device forwarder
// through the device link; setting a link down cuts exactly that link, and
// setting it up heals it; Close leaves no namespace behind.
func TestNetLabCutsAndHealsTheLinks(t *testing.T) {
	kafka := echoServer(t)
	devices := echoServer(t)
	id := fmt.Sprintf("t%03x", time.Now().UnixNano()%0xfff)
	lab, err := newNetLab(id, 250, []string{"m1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
		if left, err := leftoverNamespaces(id); err != nil || len(left) > 0 {
			t.Errorf("namespaces left after Close: %v (%v)", left, err)
		}
	}()
	if err := lab.forwardBrokers([]string{kafka}); err != nil {
		t.Fatal(err)
	}
	port, err := lab.forwardDevices(devices)
	if err != nil {
		t.Fatal(err)
	}
	n := lab.node("m1")
	viaDevice := net.JoinHostPort(n.dHostIP(), port)
	if err := echoFrom(n.ns, kafka); err != nil {
		t.Fatalf("the broker address inside the namespace: %v", err)
	}
	if err := echoFrom(n.ns, viaDevice); err != nil {
		t.Fatalf("the device forwarder: %v", err)
	}
	if err := lab.setLink("m1", true, false); err != nil {
		t.Fatal(err)
	}
	if err := echoFrom(n.ns, kafka); err == nil {
		t.Fatal("the broker answered across a Kafka link that is down")
	}
	if err := echoFrom(n.ns, viaDevice); err != nil {
		t.Fatalf("the device link failed while only the Kafka link was down: %v", err)
	}
	if err := lab.setLink("m1", true, true); err != nil {
		t.Fatal(err)
	}
	if err := lab.setLink("m1", false, false); err != nil {
		t.Fatal(err)
	}
	if err := echoFrom(n.ns, viaDevice); err == nil {
		t.Fatal("the device forwarder answered across a device link that is down")
	}
	if err := echoFrom(n.ns, kafka); err != nil {
		t.Fatalf("the Kafka link failed after it healed: %v", err)
	}
}

// echoServer serves a line echo on the host's loopback until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// echoFrom sends a line to addr from inside namespace ns and reads it back,
// within two seconds.
func echoFrom(ns, addr string) error {
	var c net.Conn
	if err := inNamespace(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo %q", line)
	}
	return nil
}

// leftoverNamespaces lists the namespaces of the lab that still exist.
func leftoverNamespaces(id string) ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, err
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "kd-"+id+"-") {
			left = append(left, f[0])
		}
	}
	return left, nil
}

// TestNetLabCutLinkKeepsTheHostsTrafficIn proves that a member cut from its
// devices is cut for the harness too: a connection from the host to the
// member's HTTP API address (the namespace end of the device link, port
// 8080 as the members listen) fails with no route to host while the link is
// down, instead of leaving by the host's default route to whatever answers
// there, and connects again once the link is up.
func TestNetLabCutLinkKeepsTheHostsTrafficIn(t *testing.T) {
	id := fmt.Sprintf("t%03x", time.Now().UnixNano()%0xfff)
	lab, err := newNetLab(id, 251, []string{"m1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	}()
	n := lab.node("m1")
	api := net.JoinHostPort(n.dPeerIP(), "8080")
	var ln net.Listener
	if err := inNamespace(n.ns, func() error {
		var err error
		ln, err = net.Listen("tcp", api)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func() error {
		c, err := net.DialTimeout("tcp", api, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("the member's API address from the host, link up: %v", err)
	}
	if err := lab.setLink("m1", false, false); err != nil {
		t.Fatal(err)
	}
	if err := dial(); !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("a connection to %s across a device link that is down: got %v, want no route to host", api, err)
	}
	if err := lab.setLink("m1", false, true); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil {
		t.Fatalf("the member's API address from the host after the link healed: %v", err)
	}
}
