package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the whole demo in process and checks what it claims: two
// leaderships with rising terms, every command succeeded, the late write
// refused for its earlier term, and a clean audit.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	served := map[string]string{}
	// Each member serves its metrics beside its status page.
	metrics := map[string]string{}
	scrape := func(m, url string) {
		// The first round of health checks may still be under way.
		for end := time.Now().Add(5 * time.Second); ; {
			resp, err := http.Get(url + "/metrics")
			if err != nil {
				metrics[m] = err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics[m] = fmt.Sprintf("%d\n%s", resp.StatusCode, body)
			if strings.Contains(metrics[m], "dispatcher_device_reachable{") || time.Now().After(end) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	rep, err := Run(ctx, Options{Out: &out, Commands: 6, OnServing: func(m, url string) {
		if _, ok := served[m]; !ok {
			scrape(m, url)
		}
		served[m] = url
	}})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Leaders) != 2 {
		t.Fatalf("leaders %+v, want two elections", rep.Leaders)
	}
	first, second := rep.Leaders[0], rep.Leaders[1]
	if first.Member == second.Member {
		t.Errorf("%s led twice; the crashed leader came back", first.Member)
	}
	if first.Term <= 0 || second.Term.Compare(first.Term) <= 0 {
		t.Errorf("second term %s does not follow the first %s", second.Term, first.Term)
	}
	if rep.Forged != 1 {
		t.Errorf("the firmware refused %d forged commands, want the forgery", rep.Forged)
	}
	// Six commands, and the one the leader sends after the forgery.
	if rep.Submitted != 7 || rep.Succeeded != 7 {
		t.Errorf("%d of %d commands succeeded", rep.Succeeded, rep.Submitted)
	}
	if rep.Refused != 1 {
		t.Errorf("the firmware refused %d commands, want the late one", rep.Refused)
	}
	if len(rep.Violations) != 0 || rep.Records == 0 {
		t.Errorf("audit: %d records, violations %v", rep.Records, rep.Violations)
	}
	if rep.Failover <= 0 || rep.Failover > 10*DefaultLeaseDuration {
		t.Errorf("failover %v", rep.Failover)
	}
	if len(served) != 3 {
		t.Errorf("status pages %v", served)
	}
	for m, text := range metrics {
		for _, want := range []string{"200\n", `dispatcher_leading{`, `dispatcher_device_reachable{`, `device="valve-1"`, "dispatcher_elections_total{"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s's /metrics lacks %q:\n%.2000s", m, want, text)
			}
		}
	}
	if len(metrics) != 3 {
		t.Errorf("scraped %d members' metrics, want 3", len(metrics))
	}
	text := out.String()
	for _, want := range []string{"ELECTED", "-> 307 ->", "CRASHED", "took over", "REFUSED zombie-1", "REFUSED forged-1", "not authenticated", "after-forgery: succeeded", "Verify: 0 violations"} {
		if !strings.Contains(text, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	// The firmware refused the late write for its term, not its token.
	refusal := fmt.Sprintf("is below term %s, already admitted", second.Term)
	for _, want := range []string{refusal, fmt.Sprintf("term %s follows term %s: true", second.Term, first.Term)} {
		if !strings.Contains(text, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
}

func TestOptionsNeedOut(t *testing.T) {
	if _, err := Run(context.Background(), Options{}); err == nil {
		t.Fatal("Run without Out succeeded")
	}
}
