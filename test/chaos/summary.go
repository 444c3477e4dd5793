package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Summary writes a Result as the text a person reads after a run.
func Summary(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: seed %d, %s of faults\n", res.Seed, res.Duration)
	var faults []string
	for k, v := range res.Faults {
		faults = append(faults, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(faults)
	fmt.Fprintf(&b, "  faults: %s\n", strings.Join(faults, ", "))
	var roles []string
	for role, members := range res.Roles {
		roles = append(roles, fmt.Sprintf("%s (%s)", role, strings.Join(members, " ")))
	}
	sort.Strings(roles)
	fmt.Fprintf(&b, "  roles on one log partition: %s; clock offsets %v\n", strings.Join(roles, ", "), res.Offsets)
	fmt.Fprintf(&b, "  commands: %d accepted, %d issued, %d accepted settled, %d unsettled\n", res.Accepted, res.Issued, res.Settled, res.Unsettled)
	var outcomes []string
	for k, v := range res.Outcomes {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(outcomes)
	fmt.Fprintf(&b, "  outcomes: %s\n", strings.Join(outcomes, ", "))
	fmt.Fprintf(&b, "  log: %d distinct tokens, %d redispatched records\n", res.Tokens, res.Redispatched)
	fmt.Fprintf(&b, "  fencing device: %d calls, %d refused (stale term), %d commands obeyed twice\n", res.FencedCalls, res.FencedRefused, res.FencedDoubles)
	fmt.Fprintf(&b, "  non-fencing device: %d calls, %d commands obeyed twice (%d after a Redispatched record, %d without)\n",
		res.PlainCalls, res.PlainDoubles, res.PlainDoublesRedispatched, res.PlainDoubles-res.PlainDoublesRedispatched)
	fmt.Fprintf(&b, "  freshness: %d calls judged against %d lease records (margin %s, skew assumption %s), %d delivered late after a stall, %d breaches by members skewed beyond the assumption\n",
		res.FreshnessChecked, res.Leases, res.Margin, res.Skew, res.LateDeliveries, res.StaleBeyondSkew)
	var subs []string
	for k, v := range res.Submitted {
		subs = append(subs, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(subs)
	fmt.Fprintf(&b, "  submissions: %s\n", strings.Join(subs, ", "))
	if res.OK() {
		b.WriteString("  PASS: no violation\n")
		return b.String()
	}
	fmt.Fprintf(&b, "  FAIL: %d violations\n", len(res.Violations))
	for i, v := range res.Violations {
		if i == 50 {
			fmt.Fprintf(&b, "    ... %d more in report.json\n", len(res.Violations)-50)
			break
		}
		fmt.Fprintf(&b, "    [%s] %s\n", v.Class, v.Detail)
	}
	return b.String()
}
