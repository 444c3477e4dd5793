package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// client submits commands at the configured rate until the returned stop
// function is called: every other one to the requests topic, the others to
// a member's HTTP API, spread evenly over the roles (see submissionTarget).
// Each command's deadline is the run's CommandTimeout. Stop returns the IDs that were accepted, which it also writes to
// accepted.txt: a produce the cluster acknowledged (acks=all), or a
// submission whose outcome a member reported (see submitHTTP).
func (r *run) client(ctx context.Context) (io.Closer, func() []string, error) {
	f, err := os.Create(filepath.Join(r.cfg.Dir, "accepted.txt"))
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.DefaultProduceTopic(r.reqTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.RequestTimeoutOverhead(DefaultRequestTimeout),
	)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	httpc := &http.Client{
		Timeout: 8 * time.Second,
		// The harness follows a standby's redirect itself, so that the
		// bearer token goes along to the leader's address.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var (
		mu       sync.Mutex
		accepted []string
		inflight sync.WaitGroup
	)
	accept := func(id, path string, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			accepted = append(accepted, id)
			fmt.Fprintln(f, id)
			r.submitted[path+" accepted"]++
		} else {
			r.submitted[path+" unconfirmed"]++
		}
	}
	roles := membersByRole(r.members)
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopc:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m := submissionTarget(n, roles, r.rngIntN)
			now := time.Now()
			device := PlainDevice
			if n%4 < 2 {
				device = FencedDevice
			}
			cmd := dispatch.Command{
				ID: fmt.Sprintf("%s-%06d", m.name[:1], n), Role: m.role, Device: device, Action: "set",
				Payload: []byte(fmt.Sprintf("value-%d", n)), SubmittedAt: now, Deadline: now.Add(r.cfg.CommandTimeout),
			}
			inflight.Add(1)
			if n%2 == 0 {
				value, err := dispatch.EncodeRequest(cmd)
				if err != nil {
					inflight.Done()
					continue
				}
				cl.Produce(ctx, &kgo.Record{Key: []byte(cmd.ID), Value: value, Partition: 0}, func(_ *kgo.Record, err error) {
					defer inflight.Done()
					accept(cmd.ID, "topic", err == nil)
				})
				continue
			}
			go func() {
				defer inflight.Done()
				accept(cmd.ID, "http", r.submitHTTP(ctx, httpc, r.url(m), cmd) == nil)
			}()
		}
	}()
	stop := func() []string {
		close(stopc)
		<-done
		inflight.Wait()
		cl.Close()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), accepted...)
	}
	return f, stop, nil
}

// membersByRole groups members by role, the roles in the order of their
// first member.
func membersByRole(members []*member) [][]*member {
	var roles [][]*member
	index := map[string]int{}
	for _, m := range members {
		i, ok := index[m.role]
		if !ok {
			i = len(roles)
			index[m.role] = i
			roles = append(roles, nil)
		}
		roles[i] = append(roles[i], m)
	}
	return roles
}

// submissionTarget picks the member that submission n goes to: the roles
// take turns by blocks of four submissions, so that each role receives
// Rate/len(roles) commands a second with both devices and both paths in
// equal shares (n%4 picks them), and a member of the role is drawn by intN.
// Only one member of a role dispatches, whatever the role's size, so a
// share in proportion to the members would load the role with more of them
// beyond what its one leader's device lanes carry.
func submissionTarget(n int, roles [][]*member, intN func(int) int) *member {
	role := roles[(n/4)%len(roles)]
	return role[intN(len(role))]
}

// errNotAccepted reports a submission that the API did not accept.
var errNotAccepted = errors.New("chaos: submission not accepted")

// settledState reports whether a command in state st has its outcome in
// the log.
func settledState(st string) bool {
	for _, s := range []dispatch.Status{dispatch.StatusSucceeded, dispatch.StatusFailed, dispatch.StatusExpired,
		dispatch.StatusRejected, dispatch.StatusInDoubt, dispatch.StatusCancelled} {
		if st == s.String() {
			return true
		}
	}
	return false
}

// submitHTTP submits cmd through the API as a careful client does, and
// returns nil once a member reported an outcome of it: only then is the
// command known to be in the log. A 202 says a leader took the command, not
// that its Issued record committed, so the client asks again, by the
// command's ID (the idempotency key), of the same member and then of the
// others, for up to 30 s. It follows a standby's redirect to the leader.
func (r *run) submitHTTP(ctx context.Context, c *http.Client, base string, cmd dispatch.Command) error {
	body, err := json.Marshal(map[string]string{"id": cmd.ID, "device": cmd.Device, "action": cmd.Action,
		"payload": string(cmd.Payload), "timeout": r.cfg.CommandTimeout.String()})
	if err != nil {
		return err
	}
	bases := []string{base}
	for _, m := range r.members {
		if m.role == cmd.Role && r.url(m) != base {
			bases = append(bases, r.url(m))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; time.Now().Before(deadline) && ctx.Err() == nil; try++ {
		err = r.postCommand(ctx, c, bases[try%len(bases)]+"/v1/commands?wait=5s", body)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

// postCommand posts a submission, following up to two redirects, and
// returns nil when the answer names a settled state.
func (r *run) postCommand(ctx context.Context, c *http.Client, url string, body []byte) error {
	for hop := 0; hop < 3; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+r.httpToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		var st struct {
			State string `json:"state"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK, http.StatusAccepted:
			if settledState(st.State) {
				return nil
			}
			return fmt.Errorf("%w: %s answered %s, state %q", errNotAccepted, url, resp.Status, st.State)
		case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			loc, err := resp.Location()
			if err != nil {
				return err
			}
			url = loc.String()
			continue
		}
		return fmt.Errorf("%w: %s answered %s", errNotAccepted, url, resp.Status)
	}
	return fmt.Errorf("%w: too many redirects", errNotAccepted)
}

// rngIntN draws from the run's generator, which the client shares with
// the fault injector.
func (r *run) rngIntN(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}
