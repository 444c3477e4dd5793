package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/krabka-io/krabka-dispatch/internal/httpapi"
	"github.com/krabka-io/krabka-dispatch/test/mqtttest"
)

const (
	alertRulesFile = "../../docs/alerts/dispatcher.rules.yml"
	dashboardFile  = "../../docs/grafana/dispatcher.json"
	operationsFile = "../../docs/OPERATIONS.md"
)

// TestObservabilityOfAMember runs `dispatcher run` with one device that
// works and one whose MQTT broker is at an address nothing answers, and
// checks what an operator sees: the dead device in /v1/leadership and in
// the device-reachable metric, /readyz still 200 (the default policy), a
// submission to the dead device refused at once with 503, and a /metrics
// that exports every metric the shipped alert rules, the Grafana dashboard
// and docs/OPERATIONS.md name.
func TestObservabilityOfAMember(t *testing.T) {
	_, brokers := newFakeCluster(t)
	broker := mqtttest.StartInProcess(t, "127.0.0.1:0")
	ctx := context.Background()
	if code, out, errOut := runCLI(t, ctx, "topics", "--brokers", brokers); code != 0 {
		t.Fatalf("topics: %d\n%s%s", code, out, errOut)
	}
	// Port 1 refuses every connection; the device never gets as far as a
	// signed envelope, so it needs no key.
	extra := "  - name: valve-dead\n    type: mqtt\n    mqtt:\n      brokers: [tcp://127.0.0.1:1]\n      topic: devices/{device}/cmd\n      authenticate: false\n"
	cfg := writeConfig(t, brokers, "node-1", broker.URL(), extra)
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withHealth := strings.Replace(string(raw), "  shutdown_timeout: 2s\n", "  shutdown_timeout: 2s\n  health_interval: 200ms\n  health_timeout: 200ms\n", 1)
	if err := os.WriteFile(cfg, []byte(withHealth), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, logs, _ := startRun(t, cfg)
	base := "http://" + addr
	waitHTTP(t, base+"/leaderz", http.StatusOK)
	waitHTTP(t, base+"/readyz", http.StatusOK)

	deadline := time.Now().Add(30 * time.Second)
	var view httpapi.Leadership
	for {
		view = getLeadership(t, base)
		if i := slices.IndexFunc(view.Devices, func(d httpapi.DeviceHealth) bool { return d.Device == "valve-dead" && !d.Reachable }); i >= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leadership view never showed valve-dead down: %+v\n%s", view.Devices, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if i := slices.IndexFunc(view.Devices, func(d httpapi.DeviceHealth) bool { return d.Device == "valve-1" }); i < 0 {
		t.Errorf("devices %+v lack valve-1", view.Devices)
	}
	// By default a device down does not make the member unready.
	if code := getStatus(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d with a device down, want 200 without dispatch.ready_requires_devices", code)
	}

	start := time.Now()
	code, body := postCommand(t, base, `{"id":"c-dead","device":"valve-dead","action":"open"}`)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the refusal took %s", took)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "valve-dead") {
		t.Errorf("submit to a device down: %d %s, want 503 naming the device", code, body)
	}
	if code, body := postCommand(t, base, `{"id":"c-ok","device":"valve-1","action":"open"}`); code != http.StatusOK || !strings.Contains(body, "succeeded") {
		t.Fatalf("submit to a working device: %d %s", code, body)
	}

	exported, text := scrapeMetrics(t, base)
	if !regexp.MustCompile(`(?m)^dispatcher_device_reachable\{[^}]*device="valve-dead"[^}]*\} 0$`).MatchString(text) {
		t.Errorf("/metrics has no dispatcher_device_reachable 0 for valve-dead:\n%s", grepLines(text, "dispatcher_device_reachable"))
	}
	if !regexp.MustCompile(`(?m)^dispatcher_leading\{[^}]*member="node-1"[^}]*role="controller"[^}]*\} 1$`).MatchString(text) {
		t.Errorf("/metrics has no dispatcher_leading 1 for node-1:\n%s", grepLines(text, "dispatcher_leading"))
	}
	// Every histogram in seconds resolves milliseconds.
	if !strings.Contains(text, `dispatch_commit_duration_seconds_bucket{`) || !strings.Contains(text, `le="0.001"`) {
		t.Errorf("the commit histogram lacks the bucket of 1 ms:\n%s", grepLines(text, "dispatch_commit_duration_seconds_bucket"))
	}

	rules := ruleExpressions(t)
	panels := dashboardExpressions(t)
	if len(rules) < 5 || len(panels) < 10 {
		t.Fatalf("%d rule and %d dashboard expressions", len(rules), len(panels))
	}
	for what, exprs := range map[string][]string{alertRulesFile: rules, dashboardFile: panels} {
		for _, expr := range exprs {
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric of the dispatcher", what, expr)
			}
			for _, name := range names {
				if !exported[name] {
					t.Errorf("%s: %q reads %s, which /metrics does not export", what, expr, name)
				}
			}
		}
	}

	// docs/OPERATIONS.md lists every metric of the dispatcher by its
	// exported name.
	ops, err := os.ReadFile(operationsFile)
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for name := range exported {
		families[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
	}
	for family := range families {
		if strings.HasPrefix(family, "dispatch") && !strings.Contains(string(ops), "`"+family+"`") {
			t.Errorf("%s does not list the metric %s", operationsFile, family)
		}
	}
}

// TestAlertRulesPassPromtool runs `promtool check rules` on the shipped
// rules. promtool is a test dependency like Mosquitto: scripts/deps.sh,
// which make test runs, installs it.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed; scripts/deps.sh (run by make test) installs it from the prometheus package")
	}
	out, err := exec.Command(promtool, "check", "rules", alertRulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules:\n%s", out)
	}
}

func getLeadership(t *testing.T, base string) httpapi.Leadership {
	t.Helper()
	resp, err := http.Get(base + "/v1/leadership")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l httpapi.Leadership
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// postCommand submits body with the test configuration's token and waits
// up to 10 s for the outcome.
func postCommand(t *testing.T, base, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/commands?wait=10s", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// scrapeMetrics returns the sample names /metrics exports, and its text.
func scrapeMetrics(t *testing.T, base string) (map[string]bool, string) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, string(body)
}

// metricRef matches an identifier of the dispatcher's metrics in a PromQL
// expression.
var metricRef = regexp.MustCompile(`\bdispatch(?:er)?_[a-z_]+\b`)

func metricNames(expr string) []string { return metricRef.FindAllString(expr, -1) }

// ruleExpressions parses the alert rules file as YAML and returns every
// rule's expression.
func ruleExpressions(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.UnmarshalWithOptions(data, &file, yaml.Strict()); err != nil {
		t.Fatalf("%s: %v", alertRulesFile, err)
	}
	var exprs []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: group %s has a rule without alert, expr or summary", alertRulesFile, g.Name)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// dashboardExpressions returns every query of the dashboard: the panels'
// targets and the template variables'.
func dashboardExpressions(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("%s: template query: %v", dashboardFile, err)
		}
		exprs = append(exprs, q.Query)
	}
	return exprs
}

func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, "\n")
}
