package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary adds up the results of many seeds.
type Summary struct {
	Seeds, Start uint64
	Elapsed      time.Duration
	Events       int
	SimMillis    int64

	// SeedsWith counts the seeds that enabled each fault class, and
	// Injected the faults injected of each class.
	SeedsWith map[string]int
	Injected  map[string]int

	Accepted, Issued, Settled, Redispatched, InDoubt int
	FencedCalls, FencedRefused, PlainCalls           int
	PlainDoubles, PlainDoublesRedispatched           int
	Terms, Rotations, LowerIDs                       int

	// Violations and Expected hold every finding with its seed.
	Violations []SeedViolation
	Expected   []SeedViolation
}

// SeedViolation is a finding and the seed that replays it.
type SeedViolation struct {
	Seed   uint64
	Faults string
	Violation
}

// Add folds one seed's result into the summary.
func (s *Summary) Add(r Result) {
	if s.SeedsWith == nil {
		s.SeedsWith, s.Injected = map[string]int{}, map[string]int{}
	}
	s.Seeds++
	s.Events += r.Events
	s.SimMillis += r.SimMillis
	for c := range r.Faults {
		s.SeedsWith[c]++
	}
	for c, n := range r.Injected {
		s.Injected[c] += n
	}
	s.Accepted += r.Accepted
	s.Issued += r.Issued
	s.Settled += r.Settled
	s.Redispatched += r.Redispatched
	s.InDoubt += r.InDoubt
	s.FencedCalls += r.FencedCalls
	s.FencedRefused += r.FencedRefused
	s.PlainCalls += r.PlainCalls
	s.PlainDoubles += r.PlainDoubles
	s.PlainDoublesRedispatched += r.PlainDoublesRedispatched
	s.Terms += r.Terms
	s.Rotations += r.Rotations
	s.LowerIDs += r.LowerIDs
	for _, v := range r.Violations {
		s.Violations = append(s.Violations, SeedViolation{r.Seed, r.Faults.String(), v})
	}
	for _, v := range r.Expected {
		s.Expected = append(s.Expected, SeedViolation{r.Seed, r.Faults.String(), v})
	}
}

// WriteMarkdown writes the report.
func (s *Summary) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Simulator report\n\n")
	fmt.Fprintf(&b, "Seeds %d to %d (%d seeds) in %s: %.0f seeds/s, %d events, %.1f simulated hours.\n\n",
		s.Start, s.Start+s.Seeds-1, s.Seeds, s.Elapsed.Round(time.Millisecond), float64(s.Seeds)/max(s.Elapsed.Seconds(), 1e-9),
		s.Events, float64(s.SimMillis)/3.6e6)
	fmt.Fprintf(&b, "## Fault classes\n\n| class | seeds enabling it | faults injected |\n|---|---:|---:|\n")
	for _, c := range faultClasses {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", c, s.SeedsWith[c], s.Injected[c])
	}
	fmt.Fprintf(&b, "\n## Totals\n\n| what | count |\n|---|---:|\n")
	for _, row := range []struct {
		name string
		n    int
	}{
		{"commands accepted", s.Accepted}, {"Issued records", s.Issued}, {"commands settled", s.Settled},
		{"Redispatched records", s.Redispatched}, {"commands ending in doubt", s.InDoubt},
		{"leaderships (terms)", s.Terms}, {"producer-id rotations", s.Rotations}, {"rotations to a lower id", s.LowerIDs},
		{"fencing-device calls", s.FencedCalls}, {"of them refused", s.FencedRefused}, {"plain-device calls", s.PlainCalls},
		{"plain doubles", s.PlainDoubles}, {"of them with a Redispatched record", s.PlainDoublesRedispatched},
	} {
		fmt.Fprintf(&b, "| %s | %d |\n", row.name, row.n)
	}
	writeFindings(&b, "Violations", s.Violations)
	writeFindings(&b, "Expected findings (clock skew beyond the safety margin)", s.Expected)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFindings(b *strings.Builder, title string, vs []SeedViolation) {
	fmt.Fprintf(b, "\n## %s: %d\n\n", title, len(vs))
	if len(vs) == 0 {
		return
	}
	byClass := map[string]int{}
	for _, v := range vs {
		byClass[v.Class]++
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	fmt.Fprintf(b, "| class | count |\n|---|---:|\n")
	for _, c := range classes {
		fmt.Fprintf(b, "| %s | %d |\n", c, byClass[c])
	}
	fmt.Fprintf(b, "\n| seed | faults | class | detail |\n|---:|---|---|---|\n")
	for i, v := range vs {
		if i == 200 {
			fmt.Fprintf(b, "\n%d more not listed.\n", len(vs)-i)
			break
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s |\n", v.Seed, v.Faults, v.Class, strings.ReplaceAll(v.Detail, "|", "/"))
	}
}
