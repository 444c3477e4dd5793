package sim

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-dispatch/coordination"
	"github.com/krabka-io/krabka-dispatch/devices/fence"
	"github.com/krabka-io/krabka-dispatch/dispatch"
	"github.com/krabka-io/krabka-dispatch/test/chaos"
)

// termStart is the commit of a leadership's first lease.
type termStart struct {
	term   coordination.Term
	member string
	at     int64 // true time the member learnt it leads
}

// role is one role of the run: its members, its two devices, its requests
// partition, and the commands whose submission was acknowledged.
type role struct {
	name     string
	role     coordination.Role
	members  []*member
	devices  map[string]*device
	requests *partition
	accepted []string
	terms    []termStart
	next     int
}

func newRole(w *world, name string, members int, dir string) (*role, error) {
	cr, err := coordination.NewRole(name)
	if err != nil {
		return nil, err
	}
	r := &role{name: name, role: cr, devices: map[string]*device{}, requests: &partition{name: requestsTopic + "/" + name}}
	w.kafka.requests[name] = r.requests
	store, err := fence.Open(fmt.Sprintf("%s/%s-fence.json", dir, name))
	if err != nil {
		return nil, err
	}
	r.devices[chaos.FencedDevice] = &device{name: chaos.FencedDevice, store: store, safe: w.chance(0.5)}
	r.devices[chaos.PlainDevice] = &device{name: chaos.PlainDevice, safe: w.chance(0.5)}
	for i := range members {
		name := fmt.Sprintf("%s-%d", name, i+1)
		id, err := coordination.NewMemberID(name)
		if err != nil {
			return nil, err
		}
		m := &member{w: w, r: r, id: id, name: name}
		m.skew = w.between(-w.cfg.Margin*2/5, w.cfg.Margin*2/5)
		r.members = append(r.members, m)
	}
	return r, nil
}

// submit is one submitter: it writes a command to the requests partition,
// and writes it again under the same ID until a write is acknowledged. An
// acknowledgement may be lost after the record landed.
func (r *role) submit(w *world, at int64) {
	r.next++
	id := fmt.Sprintf("%s-cmd-%d", r.name, r.next)
	dev := chaos.PlainDevice
	if w.chance(0.5) {
		dev = chaos.FencedDevice
	}
	w.schedule(at, "client submits "+id, func() {
		submitted := time.UnixMilli(wallBase + w.now)
		life := w.between(60_000, 180_000)
		if w.chance(0.15) {
			life = w.between(2_000, 20_000)
		}
		cmd := dispatch.Command{ID: id, Role: r.name, Device: dev, Action: "set", Payload: []byte(id),
			SubmittedAt: submitted, Deadline: submitted.Add(time.Duration(life) * time.Millisecond)}
		var try func()
		try = func() {
			off, err := w.kafka.appendPlain(r.requests, nil, nil)
			if err == nil {
				r.requests.recs[off].request = &cmd
				if !w.chance(0.05) {
					r.accepted = append(r.accepted, id)
					return
				}
				w.note("client: acknowledgement of %s lost", id)
			}
			w.schedule(1000, "client submits "+id+" again", try)
		}
		try()
	})
}
