package history

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/dispatch"
)

// Row is what one size measured.
type Row struct {
	// Size is the number of settled commands of the role in the log before
	// the start (and as many of the other role).
	Size int
	// LogRecords is the length of the role's partition before the start.
	LogRecords int64
	// Fill is how long the fillers took.
	Fill time.Duration
	// ColdStart runs from the start of the leader's process until its API
	// accepted a command; RSSReady is the leader's resident memory then;
	// LeaderzReady runs from the start until /leaderz answered 200. Each is
	// the median of Samples starts, each after the last one's member
	// stopped gracefully.
	ColdStart    time.Duration
	RSSReady     int64
	LeaderzReady time.Duration
	// Recovery is the median of what the cold starts' recoveries took by
	// the member's own log, RecoveryRecords of the records they read, and
	// CheckpointBelow of how far below the partition's end the checkpoint
	// they started from began (its base, for a delta): where the fill and
	// the restarts left the role's last full checkpoint, which the bench
	// does not choose, and which the cold start's cost follows.
	Recovery                         time.Duration
	RecoveryRecords, CheckpointBelow int64
	// WindowLoad is the median of how long the dedup window took to load
	// behind intake after those recoveries (0 for one that loaded it).
	WindowLoad time.Duration
	// Failover runs from SIGKILL of the leader until a command succeeded
	// through the standby; FailoverLeaderz until its /leaderz answered
	// 200; FailoverBound is lease + rank x stagger + one poll, the bound of
	// taking the lease.
	Failover, FailoverLeaderz, FailoverBound time.Duration
	// SubmitWait and StatusCLI are the medians of `dispatcher submit
	// --wait` and `dispatcher status`, process start included.
	SubmitWait, StatusCLI time.Duration
	// StatusHinted and StatusWindow are the medians of Client.Status of a
	// fresh command with LookupSince its submission and without a hint;
	// the Records fields are the records each read.
	StatusHinted, StatusWindow               time.Duration
	StatusHintedRecords, StatusWindowRecords int64
	// Further is the number of commands sent after the failover, and
	// RSSAfter the new leader's resident memory once they settled.
	Further  int
	RSSAfter int64
}

// Run measures every size of c in turn and returns a row for each.
func Run(ctx context.Context, c Config) ([]Row, error) {
	if err := c.complete(); err != nil {
		return nil, err
	}
	if c.WarmUp > 0 {
		// The pass runs every step but the further commands, at once
		// after its fill.
		start := time.Now()
		c.logf("warm-up of the cluster: size %d, its figures dropped", c.WarmUp)
		w := c
		w.Further, w.Settle = 0, -1
		if _, err := runSize(ctx, &w, c.WarmUp); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		c.logf("warm-up of the cluster: done in %s", time.Since(start).Round(time.Second))
	}
	var rows []Row
	for _, n := range c.Sizes {
		row, err := runSize(ctx, &c, n)
		if err != nil {
			return rows, fmt.Errorf("size %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func runSize(ctx context.Context, c *Config, n int) (row Row, err error) {
	row = Row{Size: n, Further: c.Further}
	stamp := fmt.Sprintf("hist-%d-%d", n, time.Now().UnixMilli()%100_000_000)
	t := topics{coordination: stamp + "-coord", log: stamp + "-log", requests: stamp + "-req", partitions: c.Partitions}
	role := stamp
	other, err := sharingRole(role, c.Partitions)
	if err != nil {
		return row, err
	}
	dir := filepath.Join(c.Dir, stamp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return row, err
	}
	members, err := writeConfigs(c, dir, role, t, []string{"node-1", "node-2"})
	if err != nil {
		return row, err
	}
	leader, standby := members["node-1"], members["node-2"]
	defer func() {
		leader.stop(syscall.SIGKILL)
		standby.stop(syscall.SIGTERM)
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dropTopics(dctx, c.Brokers, t)
	}()

	step := func(name string) (context.Context, context.CancelFunc) {
		c.logf("size %d: %s", n, name)
		return context.WithTimeout(ctx, DefaultStepTimeout)
	}
	sctx, cancel := step("create the topics with `dispatcher topics`")
	_, err = cli(sctx, c.Binary, "topics", "-c", leader.config, "--timeout", "2m")
	cancel()
	if err != nil {
		return row, err
	}

	sctx, cancel = step(fmt.Sprintf("fill %d commands of %s and %d of %s through real dispatchers", n, role, n, other))
	start := time.Now()
	errs := make(chan error, 2)
	var fillers sync.WaitGroup
	fillers.Add(2)
	all := make(chan struct{})
	go func() {
		fillers.Wait()
		close(all)
	}()
	for _, r := range []string{role, other} {
		go func() { errs <- fill(sctx, c, t, r, n, fillers.Done, all) }()
	}
	for range 2 {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	cancel()
	if err != nil {
		return row, err
	}
	row.Fill = time.Since(start)
	filled := time.Now()
	if row.LogRecords, err = partitionEnd(ctx, c.Brokers, t, role); err != nil {
		return row, err
	}
	c.logf("size %d: filled in %s; the partition holds %d records", n, row.Fill.Round(time.Millisecond), row.LogRecords)
	// The fillers resigned: their registrations are gone, and the first
	// process to start takes the role at once.

	if wait := time.Until(filled.Add(c.Settle)); wait > 0 {
		c.logf("size %d: waiting %s, so the history is older than a lookup's skew margin and the brokers are done with it", n, wait.Round(time.Second))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return row, ctx.Err()
		}
	}
	hc := &http.Client{Timeout: acceptWait + 10*time.Second}
	defer hc.CloseIdleConnections()
	if err = coldStarts(ctx, c, n, leader, hc, &row); err != nil {
		return row, err
	}

	sctx, cancel = step("start node-2 as a standby")
	if err = standby.start(c.Binary); err == nil {
		err = standby.untilStatus(sctx, hc, "/readyz", http.StatusOK)
	}
	cancel()
	if err != nil {
		return row, err
	}

	if err = measureLookups(ctx, c, t, role, leader, &row); err != nil {
		return row, err
	}
	rank, err := rankOf(ctx, c.Binary, standby)
	if err != nil {
		return row, err
	}

	sctx, cancel = step("failover: SIGKILL node-1")
	// Let a renewal pass, so the kill lands on a lease as the standby
	// sees it in steady state.
	time.Sleep(c.Renew)
	killed := time.Now()
	leader.stop(syscall.SIGKILL)
	err = standby.untilStatus(sctx, hc, "/leaderz", http.StatusOK)
	row.FailoverLeaderz = time.Since(killed)
	var took time.Time
	if err == nil {
		took, err = standby.untilAccepted(sctx, hc, "failover")
	}
	cancel()
	if err != nil {
		return row, err
	}
	row.Failover = took.Sub(killed)
	row.FailoverBound = c.Lease + time.Duration(rank)*c.Stagger + c.Poll
	c.logf("size %d: node-2 answered /leaderz 200 %s and carried out a command %s after the kill (bound of the takeover %s)", n,
		row.FailoverLeaderz.Round(time.Millisecond), row.Failover.Round(time.Millisecond), row.FailoverBound)

	if c.Further > 0 {
		sctx, cancel = step(fmt.Sprintf("%d further commands through node-2", c.Further))
		err = further(sctx, c, t, role)
		cancel()
		if err != nil {
			return row, err
		}
		if row.RSSAfter, err = standby.rss(); err != nil {
			return row, err
		}
		c.logf("size %d: node-2 RSS %d MiB after %d further commands", n, row.RSSAfter>>20, c.Further)
	}
	return row, nil
}

// coldStarts starts leader as the role's only member c.Samples times, the
// first time on the filled log, each later time after the last one stopped
// gracefully (SIGTERM: it drains and resigns, as a member restarted in an
// upgrade does), and sets the medians of the cold start's figures. The last
// one goes on leading.
func coldStarts(ctx context.Context, c *Config, n int, leader *member, hc *http.Client, row *Row) error {
	var leaderz, accepted, took, window []time.Duration
	var rss, read, below []int64
	for i := range c.Samples {
		if i > 0 {
			leader.stop(syscall.SIGTERM)
		}
		sctx, cancel := context.WithTimeout(ctx, DefaultStepTimeout)
		c.logf("size %d: cold start %d of node-1", n, i+1)
		logFrom := logSize(leader.logPath)
		start := time.Now()
		if err := leader.start(c.Binary); err != nil {
			cancel()
			return err
		}
		err := leader.untilStatus(sctx, hc, "/leaderz", http.StatusOK)
		up := time.Since(start)
		var ready time.Time
		if err == nil {
			ready, err = leader.untilAccepted(sctx, hc, fmt.Sprintf("ready-%d", i))
		}
		cancel()
		if err != nil {
			return err
		}
		mem, err := leader.rss()
		if err != nil {
			return err
		}
		rec, err := lastRecovery(leader.logPath, logFrom)
		if err != nil {
			return err
		}
		leaderz, accepted, rss = append(leaderz, up), append(accepted, ready.Sub(start)), append(rss, mem)
		took, read, below = append(took, rec.Took), append(read, rec.RecordsRead), append(below, rec.Below)
		window = append(window, rec.WindowLoad)
		c.logf("size %d: node-1 answered /leaderz 200 %s and carried out a command %s after its start, RSS %d MiB; its recovery took %s, read %d records, from a checkpoint %d offsets below the end; its dedup window loaded %s after it", n,
			up.Round(time.Millisecond), ready.Sub(start).Round(time.Millisecond), mem>>20, rec.Took, rec.RecordsRead, rec.Below, rec.WindowLoad)
	}
	row.WindowLoad = median(window)
	row.LeaderzReady, row.ColdStart = median(leaderz), median(accepted)
	row.RSSReady = median(rss)
	row.Recovery, row.RecoveryRecords, row.CheckpointBelow = median(took), median(read), median(below)
	return nil
}

// measureLookups measures `dispatcher submit --wait`, `dispatcher status`
// and Client.Status against the leader.
func measureLookups(ctx context.Context, c *Config, t topics, role string, leader *member, row *Row) error {
	client, err := dispatch.NewClient(c.Brokers, dispatch.WithClientLogTopic(t.log, t.partitions), dispatch.WithClientRequestsTopic(t.requests, t.partitions))
	if err != nil {
		return err
	}
	defer client.Close()
	var submits, statuses, hinted, window []time.Duration
	for i := range c.Samples {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		submittedAt := time.Now()
		id := fmt.Sprintf("submit-%d", i)
		took, err := cli(sctx, c.Binary, "submit", "-c", leader.config, "--id", id, "--device", deviceName, "--action", "set", "--payload", "1", "--wait", "--timeout", "90s")
		if err != nil {
			cancel()
			return err
		}
		submits = append(submits, took)
		if took, err = cli(sctx, c.Binary, "status", "-c", leader.config, "--timeout", "1m"); err != nil {
			cancel()
			return err
		}
		statuses = append(statuses, took)
		before := client.RecordsRead()
		start := time.Now()
		h, err := client.Status(sctx, role, id, dispatch.LookupSince(submittedAt))
		if err != nil || h.Status != dispatch.StatusSucceeded {
			cancel()
			return fmt.Errorf("status of %s since its submission: %v, %v", id, h, err)
		}
		hinted = append(hinted, time.Since(start))
		row.StatusHintedRecords = client.RecordsRead() - before
		before = client.RecordsRead()
		start = time.Now()
		if h, err = client.Status(sctx, role, id); err != nil || h.Status != dispatch.StatusSucceeded {
			cancel()
			return fmt.Errorf("status of %s in the window: %v, %v", id, h, err)
		}
		window = append(window, time.Since(start))
		row.StatusWindowRecords = client.RecordsRead() - before
		cancel()
	}
	row.SubmitWait, row.StatusCLI, row.StatusHinted, row.StatusWindow = median(submits), median(statuses), median(hinted), median(window)
	c.logf("size %d: submit --wait %s, status %s, Client.Status hinted %s (%d records), in the window %s (%d records)", row.Size,
		row.SubmitWait.Round(time.Millisecond), row.StatusCLI.Round(time.Millisecond),
		row.StatusHinted.Round(time.Millisecond), row.StatusHintedRecords, row.StatusWindow.Round(time.Millisecond), row.StatusWindowRecords)
	return nil
}

// rankOf reads the member's rank with `dispatcher status -o json`.
func rankOf(ctx context.Context, binary string, m *member) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "status", "-c", m.config, "-o", "json").Output()
	if err != nil {
		return 0, fmt.Errorf("dispatcher status: %w", err)
	}
	var st struct {
		Roster []struct {
			Member string `json:"member"`
			Rank   int    `json:"rank"`
		} `json:"roster"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("dispatcher status: %w", err)
	}
	for _, r := range st.Roster {
		if r.Member == m.name {
			return r.Rank, nil
		}
	}
	return 0, fmt.Errorf("%s is not in the roster: %s", m.name, out)
}

// further sends c.Further commands through the requests topic and waits
// until the last one settled.
func further(ctx context.Context, c *Config, t topics, role string) error {
	client, err := dispatch.NewClient(c.Brokers, dispatch.WithClientLogTopic(t.log, t.partitions), dispatch.WithClientRequestsTopic(t.requests, t.partitions))
	if err != nil {
		return err
	}
	defer client.Close()
	since := time.Now()
	last, err := sendRequests(ctx, c.Brokers, t, role, "further", c.Further)
	if err != nil {
		return err
	}
	out, err := client.Wait(ctx, role, last, dispatch.LookupSince(since))
	if err != nil {
		return err
	}
	if out.Status != dispatch.StatusSucceeded {
		return fmt.Errorf("the last further command: %s: %s", out.Status, out.Reason)
	}
	return nil
}

// sharingRole returns a role other than role whose partition of topics of
// the given count is role's.
func sharingRole(role string, partitions int) (string, error) {
	r, err := coordination.NewRole(role)
	if err != nil {
		return "", err
	}
	want, err := coordination.RolePartition(r, partitions)
	if err != nil {
		return "", err
	}
	for i := range 10_000 {
		name := fmt.Sprintf("%s-other-%d", role, i)
		o, _ := coordination.NewRole(name)
		if p, _ := coordination.RolePartition(o, partitions); p == want {
			return name, nil
		}
	}
	return "", fmt.Errorf("no role shares the partition of %s", role)
}

// partitionEnd returns the high watermark of role's partition of the log.
func partitionEnd(ctx context.Context, brokers []string, t topics, role string) (int64, error) {
	r, _ := coordination.NewRole(role)
	p, err := coordination.RolePartition(r, t.partitions)
	if err != nil {
		return 0, err
	}
	reader, err := dispatch.NewKafkaLogReader(brokers)
	if err != nil {
		return 0, err
	}
	_, end, err := reader.Bounds(ctx, coordination.TopicPartition{Topic: t.log, Partition: p})
	return end, err
}

// dropTopics deletes the topics of one size, so a run leaves no data.
func dropTopics(ctx context.Context, brokers []string, t topics) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, t.coordination, t.log, t.requests)
}

// median returns the median of xs (the upper one of an even count), or
// zero for none.
func median[T cmp.Ordered](xs []T) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
