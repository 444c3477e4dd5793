package main

import (
	"context"
	"errors"
	"sync"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/member"
)

// noopDevice acts on every command at once.
type noopDevice struct{}

func (noopDevice) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, nil
}

// dispatching gives every role the process holds a dispatcher, as a member
// of the daemon has: a no-op device, the shared log reader, and a request
// source of the role's own reading its partition of the requests topic.
type dispatching struct {
	brokers                 []string
	logTopic, requestsTopic string
	partitions              int
	registry                *dispatch.Registry
	log                     *dispatch.KafkaLogReader

	mu      sync.Mutex
	sources []*dispatch.KafkaRequestSource
}

func newDispatching(brokers []string, logTopic, requestsTopic string, partitions int) (*dispatching, error) {
	if logTopic == "" || requestsTopic == "" || partitions < 1 {
		return nil, errors.New("-log-topic, -requests-topic and -partitions >= 1 go together")
	}
	registry := dispatch.NewRegistry()
	if err := registry.Register("bench", noopDevice{}); err != nil {
		return nil, err
	}
	log, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return nil, err
	}
	return &dispatching{brokers: brokers, logTopic: logTopic, requestsTopic: requestsTopic, partitions: partitions, registry: registry, log: log}, nil
}

// option returns the member option that runs a dispatcher of one role, with
// a request source of its own, whenever the member leads.
func (d *dispatching) option() (member.Option, error) {
	source, err := dispatch.NewKafkaRequestSource(d.brokers)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.sources = append(d.sources, source)
	d.mu.Unlock()
	return member.WithDispatcher(d.registry, d.log,
		dispatch.WithLogTopic(d.logTopic, d.partitions), dispatch.WithRequestsTopic(d.requestsTopic, d.partitions),
		dispatch.WithRequestSource(source)), nil
}

// close closes every request source, once the members have stopped. The log
// reader holds no connection between reads.
func (d *dispatching) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sources {
		s.Close()
	}
}
