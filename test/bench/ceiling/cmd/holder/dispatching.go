package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// noopDevice acts on every command at once.
type noopDevice struct{}

func (noopDevice) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{}, nil
}

// dispatching runs a dispatcher for every role the process holds, as a
// member does: a no-op device, the shared log reader, and a request source
// of its own reading the role's partition of the requests topic.
type dispatching struct {
	brokers                 []string
	logTopic, requestsTopic string
	partitions              int
	registry                *dispatch.Registry
	log                     *dispatch.KafkaLogReader
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

// start runs a dispatcher under l and returns the function that stops it
// and waits for it.
func (d *dispatching) start(l *coordination.Leadership) (stop func(), err error) {
	source, err := dispatch.NewKafkaRequestSource(d.brokers)
	if err != nil {
		return func() {}, err
	}
	disp, err := dispatch.NewDispatcher(l, d.registry, d.log,
		dispatch.WithLogTopic(d.logTopic, d.partitions), dispatch.WithRequestsTopic(d.requestsTopic, d.partitions),
		dispatch.WithRequestSource(source))
	if err != nil {
		source.Close()
		return func() {}, fmt.Errorf("dispatcher: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = disp.Run(ctx)
		source.Close()
	}()
	return func() { cancel(); <-done }, nil
}
