package dispatch

import (
	"context"
	"errors"
	"sync"
)

// ErrIntakeStopped reports a command submitted after [Dispatcher.StopIntake]
// or [Dispatcher.Drain]: the dispatcher finishes what it holds and takes
// nothing new, because its member is about to give the role up. Nothing was
// recorded; submit the command to the next leader.
var ErrIntakeStopped = errors.New("dispatch: the dispatcher takes no more commands; it drains before its member gives the role up")

// intakeGate is closed once, when intake stops. Its zero value is open.
type intakeGate struct {
	once    sync.Once
	ctx     context.Context
	stop    context.CancelFunc
	stopped sync.Once
}

// context returns a context that ends when the gate closes.
func (g *intakeGate) context() context.Context {
	g.once.Do(func() { g.ctx, g.stop = context.WithCancel(context.Background()) })
	return g.ctx
}

// close closes the gate; later calls do nothing.
func (g *intakeGate) close() {
	g.context()
	g.stopped.Do(g.stop)
}

// open reports ErrIntakeStopped once the gate closed.
func (g *intakeGate) open() error {
	if g.context().Err() != nil {
		return ErrIntakeStopped
	}
	return nil
}

// StopIntake makes the dispatcher take no new command: intake stops reading
// the requests topic (a request it already read but did not queue stays in
// the topic, past the committed intake position, for the next leader), and
// Submit returns [ErrIntakeStopped]. The commands already taken go on to
// their outcomes. It returns at once and may be called more than once.
func (d *Dispatcher) StopIntake() {
	d.gate.close()
	// No Issued record is coming for the outcomes to ride with.
	d.commits.hurry()
}

// Ready returns a channel that is closed when the dispatcher finished reading
// its role's log at takeover and takes commands. It stays open when Run
// halts before that.
func (d *Dispatcher) Ready() <-chan struct{} { return d.ready }

// Drain stops intake ([Dispatcher.StopIntake]) and waits until every
// command the dispatcher took has settled: its terminal outcome, or its
// outcome in doubt, committed. It returns nil then, [ErrHalted] when the
// dispatcher halts first (the leadership ended; the next leader's recovery
// settles what is left), or ctx's error when ctx ends first. It does not halt
// the dispatcher: end Run's context after it to give the role up.
//
// Once every command settled, and when the log partition moved half the
// first read of a recovery or more past the last checkpoint (512 offsets,
// or half the checkpoint interval when that is less), Drain writes a
// checkpoint of the settled state and waits for it (bounded by ctx), so that
// the next leader's recovery starts from it and reads no tail; a shorter
// tail the next leader reads with the last checkpoint in its first read. It returns nil even when that checkpoint could not be
// written: the next leader then reads the tail, as after a crash.
//
// Called before recovery finished, Drain waits for recovery, the loading
// of its dedup window included, then for the commands that recovery
// dispatches again.
func (d *Dispatcher) Drain(ctx context.Context) error {
	d.StopIntake()
	if err := d.awaitClosed(ctx, d.windowLoaded); err != nil {
		return err
	}
	// A Submit or an intake take that passed the gate just before it closed
	// may add a command after a snapshot: take snapshots until one is empty.
	for {
		waits := d.unsettled()
		if len(waits) == 0 {
			d.closingCheckpoint(ctx)
			return nil
		}
		for _, settled := range waits {
			select {
			case <-settled:
			case <-d.haltCtx.Done():
				return ErrHalted
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// unsettled returns the settled channels of the commands that wait for a
// dispatch or an outcome.
func (d *Dispatcher) unsettled() []<-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	var waits []<-chan struct{}
	for _, c := range d.commands {
		if c.phase.pending() {
			waits = append(waits, c.settled)
		}
	}
	return waits
}
