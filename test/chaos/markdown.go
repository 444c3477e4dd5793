package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ReadResult reads the report.json that Run wrote to a run directory.
func ReadResult(dir string) (Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return Result{}, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return Result{}, fmt.Errorf("%s: %w", dir, err)
	}
	return res, nil
}

// RunFacts are the facts of a run that its Result does not hold, for the
// Markdown report.
type RunFacts struct {
	// Finished is when the run ended.
	Finished time.Time

	// Machine describes the host, such as "2 CPUs, 23.5 GiB".
	Machine string

	// Wall is the whole run, faults and settle period included.
	Wall time.Duration
}

// Markdown writes a Result as the body of docs/RELIABILITY.md.
func Markdown(res Result, facts RunFacts) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	verdict := "**PASS: no violation.**"
	if !res.OK() {
		verdict = fmt.Sprintf("**FAIL: %d violations** (listed below).", len(res.Violations))
	}
	w("## The run of %s UTC\n\n", facts.Finished.UTC().Format("2006-01-02 15:04"))
	w("%s of faults (%s of wall time with start-up and the settle period), seed %d, on %s. %s\n\n",
		res.Duration, facts.Wall.Round(time.Second), res.Seed, facts.Machine, verdict)
	var roles []string
	for role, members := range res.Roles {
		roles = append(roles, fmt.Sprintf("`%s` (%s)", role, strings.Join(members, ", ")))
	}
	sort.Strings(roles)
	if len(roles) > 0 {
		var offsets []string
		for m, o := range res.Offsets {
			offsets = append(offsets, m+" "+o)
		}
		sort.Strings(offsets)
		w("Roles sharing one log partition: %s. Clock offsets at the first start: %s (each restart draws a new one); safety margin %s, skew assumption %s.\n\n",
			strings.Join(roles, ", "), strings.Join(offsets, ", "), res.Margin, res.Skew)
	}
	w("| Faults injected | Count |\n|---|---:|\n")
	var kinds []string
	for k := range res.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		name := map[string]string{
			FaultKill: "SIGKILL of a member", FaultPause: "SIGSTOP of a member, SIGCONT later",
			FaultRestart: "restart of a member (SIGTERM, start)", FaultBroker: "kill of a broker (SIGKILL), restart later",
			FaultKillLeader:  "of the member faults above, aimed at the leader",
			FaultCutKafka:    "member cut from Kafka (its Kafka link down), devices kept",
			FaultCutDevices:  "member cut from its devices (its device link down)",
			FaultCutBroker:   "broker cut from the other brokers (packet filter), healed later",
			FaultSlowDevice:  "device call answered after 0 to 2 s",
			FaultStuckDevice: "device call answered after the members' reply timeout",
			FaultResolve:     "`dispatcher resolve` of a command in doubt (redispatch or cancel)",
			FaultResolveFail: "`dispatcher resolve` that no member carried out",
			FaultSkewInside:  "start of a member with its clock skewed within the skew assumption",
			FaultSkewBeyond:  "start of a member with its clock skewed beyond the safety margin",
		}[k]
		if name == "" {
			name = k
		}
		w("| %s | %d |\n", name, res.Faults[k])
	}
	w("\n| Checked | Result |\n|---|---|\n")
	count := map[string]int{}
	for _, v := range res.Violations {
		count[v.Class]++
	}
	w("| Dispatches of a command absent from the log (device calls without a committed Issued/Redispatched record under the term and token the device saw) | %d |\n", count[UnloggedDispatch])
	w("| Term regressions at a fencing device (a term admitted after a later one) | %d |\n", count[TermRegression])
	w("| Device calls after the caller's freshness ended (lease deadline - margin + skew %s + transit), of %d judged | %d |\n", res.Skew, res.FreshnessChecked, count[StaleDispatch])
	w("| Commands received more often than 1 + their Redispatched records | %d |\n", count[UnexplainedDouble])
	w("| Accepted commands lost (no Issued record, or no terminal or in-doubt outcome after the settle period) | %d of %d accepted |\n", count[LostCommand], res.Accepted)
	w("| `dispatch.Verify` findings and undecodable or non-transactional records | %d |\n\n", count[AuditViolation])
	w("| Observed | Value |\n|---|---:|\n")
	w("| Commands accepted (requests topic acks=all, or an outcome reported by the HTTP API) | %d |\n", res.Accepted)
	var subs []string
	for k, v := range res.Submitted {
		subs = append(subs, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(subs)
	w("| Submissions by path | %s |\n", strings.Join(subs, ", "))
	w("| Issued records | %d |\n", res.Issued)
	var outcomes []string
	for k, v := range res.Outcomes {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(outcomes)
	w("| Latest outcome of the issued commands | %s |\n", strings.Join(outcomes, ", "))
	w("| Distinct fencing tokens in the log (leaderships and transactions v2 epoch bumps) | %d |\n", res.Tokens)
	w("| Redispatched records (takeover redispatch) | %d |\n", res.Redispatched)
	w("| Calls at the fencing device / refused for a stale token | %d / %d |\n", res.FencedCalls, res.FencedRefused)
	w("| Commands the fencing device obeyed twice | %d |\n", res.FencedDoubles)
	w("| Calls at the non-fencing device | %d |\n", res.PlainCalls)
	w("| Double dispatches at the non-fencing device: total / after a Redispatched record / without one (zombie window) | %d / %d / %d |\n",
		res.PlainDoubles, res.PlainDoublesRedispatched, res.PlainDoubles-res.PlainDoublesRedispatched)
	w("| Lease records read / calls left out of the freshness check as delivered late after a stall / breaches by members skewed beyond the assumption | %d / %d / %d |\n\n",
		res.Leases, res.LateDeliveries, res.StaleBeyondSkew)
	if !res.OK() {
		w("### Violations\n\n")
		for i, v := range res.Violations {
			if i == 100 {
				w("- ... %d more in report.json\n", len(res.Violations)-100)
				break
			}
			w("- [%s] %s\n", v.Class, v.Detail)
		}
		w("\n")
	}
	return b.String()
}
