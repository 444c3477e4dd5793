package chaos

import (
	"sort"
	"time"
)

// checkFreshness reports every device call that arrived after the freshness
// of the caller's leadership ended.
//
// A leadership measures its freshness from the instant just before the
// write of its last committed lease record began, which is that record's
// GrantedAt on the holder's clock, and drives no device once less than the
// safety margin is left: no call starts after the record's Deadline minus
// the margin, on the holder's clock. So a call that arrives at the device
// at instant t (on the devices' clock) is fresh when some lease record of
// the caller's role and member has GrantedAt <= t + Skew, and t <= its
// Deadline - Margin + Skew + Transit. The largest such Deadline decides.
// Calls that arrived during a stall of the caller, or within Transit after
// it, are left out and counted (Report.LateDeliveries).
func checkFreshness(in Input, r *Report, add func(class, format string, args ...any)) {
	type key struct{ role, member string }
	leases := map[key][]LeaseRecord{}
	for _, l := range in.Leases {
		k := key{l.Role, l.Member}
		leases[k] = append(leases[k], l)
	}
	for _, ls := range leases {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].GrantedAt.Before(ls[j].GrantedAt) })
	}
	for _, calls := range [][]Call{in.Fenced, in.Plain} {
		for _, c := range calls {
			at := time.Unix(0, c.At)
			if stalled(in.Stalls, c.Member, at, in.Transit) {
				r.LateDeliveries++
				continue
			}
			r.FreshnessChecked++
			var end time.Time
			found := false
			for k, ls := range leases {
				if k.member != c.Member || (c.Role != "" && k.role != c.Role) {
					continue
				}
				for _, l := range ls {
					if l.GrantedAt.After(at.Add(in.Skew)) {
						break
					}
					if !found || l.Deadline.After(end) {
						end, found = l.Deadline, true
					}
				}
			}
			limit := end.Add(-in.Margin + in.Skew + in.Transit)
			if found && !at.After(limit) {
				continue
			}
			if skewedBeyond(in, c.Member, at) {
				r.StaleBeyondSkew++
				continue
			}
			if !found {
				add(StaleDispatch, "device %s received %s from %s under %s at %s; %s had committed no lease of role %q before it",
					c.Device, c.ID, c.Member, c.authority(), at.UTC().Format(time.RFC3339Nano), c.Member, c.Role)
				continue
			}
			add(StaleDispatch, "device %s received %s from %s under %s at %s, %s after its freshness ended (lease deadline %s, margin %s, skew %s, transit %s)",
				c.Device, c.ID, c.Member, c.authority(), at.UTC().Format(time.RFC3339Nano), at.Sub(limit).Round(time.Millisecond),
				end.UTC().Format(time.RFC3339Nano), in.Margin, in.Skew, in.Transit)
		}
	}
}

// stalled reports whether t falls in a stall of member, or within transit
// after one.
func stalled(stalls []Window, member string, t time.Time, transit time.Duration) bool {
	for _, w := range stalls {
		if w.Member == member && !t.Before(w.From) && !t.After(w.To.Add(transit)) {
			return true
		}
	}
	return false
}

// skewedBeyond reports whether member's clock was off by more than the skew
// assumption at t, or Transit before it: a call that arrives just after a
// restart may have left the incarnation before it.
func skewedBeyond(in Input, member string, t time.Time) bool {
	beyond := func(off time.Duration) bool { return off > in.Skew || -off > in.Skew }
	return beyond(offsetAt(in, member, t)) || beyond(offsetAt(in, member, t.Add(-in.Transit)))
}

// offsetAt returns the clock offset of member at t: that of its latest
// span begun by t, or its offset for the whole run.
func offsetAt(in Input, member string, t time.Time) time.Duration {
	off, from := in.Offsets[member], time.Time{}
	for _, s := range in.Clocks {
		if s.Member == member && !s.From.After(t) && !s.From.Before(from) {
			off, from = s.Offset, s.From
		}
	}
	return off
}
