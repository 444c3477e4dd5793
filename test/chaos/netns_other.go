//go:build !linux

package chaos

import "errors"

// errNoNamespaces reports that the network of a run needs Linux network
// namespaces.
var errNoNamespaces = errors.New("chaos: a run needs Linux network namespaces")

// netLab is the network of a run; see netns_linux.go. Elsewhere it cannot
// be built.
type netLab struct{}

// netNode is the network of one member.
type netNode struct{ ns string }

func (n *netNode) dHostIP() string { return "" }
func (n *netNode) dPeerIP() string { return "" }

func newNetLab(string, int, []string) (*netLab, error)  { return nil, errNoNamespaces }
func (l *netLab) forwardBrokers([]string) error         { return errNoNamespaces }
func (l *netLab) forwardDevices(string) (string, error) { return "", errNoNamespaces }
func (l *netLab) node(string) *netNode                  { return &netNode{} }
func (l *netLab) setLink(string, bool, bool) error      { return errNoNamespaces }
func (l *netLab) cutBroker(int, ...int) error           { return errNoNamespaces }
func (l *netLab) healBrokers() error                    { return errNoNamespaces }
func (l *netLab) Close() error                          { return nil }
