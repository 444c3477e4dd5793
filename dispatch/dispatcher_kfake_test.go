package dispatch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/internal/kafkatest"
	"github.com/krabka-io/krabka-dispatch/internal/recorder"
)

// TestDispatcherKfakeSmoke runs a dispatcher over the Kafka transport, the
// log reader and the request source against kfake: commands through Submit
// and through the requests topic reach the recording device after their
// Issued records committed, and the log verifies clean.
//
// No fencing claim rests on this test: kfake does not fence like Kafka (it
// accepts an InitProducerId with a stale epoch, lets a fenced producer's
// abort succeed under transactions v2, opens a transaction on a stale
// produce, compacts past the last stable offset, and ignores
// min.insync.replicas). The fencing tests run on the real cluster under the
// integration tag.
func TestDispatcherKfakeSmoke(t *testing.T) {
	fake := kafkatest.NewFake(t)
	c := cluster{brokers: fake.ListenAddrs(), createTopic: func(t *testing.T, name string) {
		kafkatest.CreateFakeTopic(t, fake, name, 1, nil)
	}}
	tp := c.newTopics(t)
	role := testRole(t)
	server := newRecorder(t)
	logReader, err := dispatch.NewKafkaLogReader(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	registry := dispatch.NewRegistry()
	dev := recorder.NewDevice("valve", server.URL(), "m1").CheckLog(logReader, tp.logPartition(), role.String())
	if err := registry.Register("valve", dev); err != nil {
		t.Fatal(err)
	}
	ld := lead(t, c, tp, role, "m1", registry)
	client := newClient(t, c, tp)

	viaSubmit, viaTopic := ids("submit", 10), ids("topic", 10)
	var wg sync.WaitGroup
	for _, id := range viaSubmit {
		wg.Go(func() {
			out, err := ld.d.Submit(t.Context(), dispatch.Command{ID: id, Device: "valve", Action: "open"})
			if err != nil || out.Status != dispatch.StatusSucceeded {
				t.Errorf("Submit %s: %+v %v", id, out, err)
			}
		})
	}
	for _, id := range viaTopic {
		cmd := dispatch.Command{ID: id, Role: role.String(), Device: "valve", Action: "open", Deadline: time.Now().Add(time.Minute)}
		if err := client.Submit(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	all := append(viaSubmit, viaTopic...)
	outcomes, entries := waitSettled(t, c, tp, role.String(), all, 30*time.Second)
	for _, id := range all {
		if outcomes[id].Status != dispatch.StatusSucceeded {
			t.Errorf("%s: %+v", id, outcomes[id])
		}
	}
	dispatches := server.Dispatches()
	if len(dispatches) != len(all) {
		t.Errorf("%d dispatches, want %d", len(dispatches), len(all))
	}
	checkDurableBeforeDispatch(t, entries, dispatches)
	verifyLog(t, entries)
	var intake *dispatch.IntakePosition
	for _, e := range entries {
		if e.Kind == dispatch.EntryIntake {
			intake = e.Intake
		}
		if e.Token == coordination.NoEpoch {
			t.Errorf("offset %d carries no token", e.Offset)
		}
	}
	if intake == nil || intake.NextOffset < int64(len(viaTopic)) {
		t.Errorf("last intake position %+v, want at least %d", intake, len(viaTopic))
	}
}
