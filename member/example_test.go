package member_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/member"
)

// valve stands for a device of yours.
type valve struct{}

func (valve) Dispatch(context.Context, dispatch.Command, coordination.FencingToken) (dispatch.Result, error) {
	return dispatch.Result{Detail: "done"}, nil
}

// Example runs one member of the role "controller" until SIGTERM: it leads
// when it wins the role, dispatches the commands of the requests topic to its
// devices, and on SIGTERM stops intake, lets what it took finish, and
// resigns. It needs a Kafka cluster, so it has no output to check.
func Example() {
	brokers := []string{"127.0.0.1:9092"}
	lease, err := coordination.NewLeaseConfig(5*time.Second, time.Second, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	transport, err := coordination.NewKafkaTransport(lease, brokers...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer transport.Close()
	logReader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		fmt.Println(err)
		return
	}
	requests, err := dispatch.NewKafkaRequestSource(brokers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer requests.Close()
	registry := dispatch.NewRegistry()
	if err := registry.Register("valve-1", valve{}); err != nil {
		fmt.Println(err)
		return
	}
	role, _ := coordination.NewRole("controller")
	id, _ := coordination.NewMemberID("node-1")

	m, err := member.New(transport, role, id,
		member.WithCoordination(coordination.WithLeaseConfig(lease)),
		member.WithDispatcher(registry, logReader, dispatch.WithRequestSource(requests)),
		member.WithDrainTimeout(10*time.Second),
		member.WithEventHandler(func(e member.Event) {
			fmt.Fprintf(os.Stderr, "%s %s term %s %v\n", e.Member, e.Kind, e.Term, e.Err)
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Println(err)
	}
}
