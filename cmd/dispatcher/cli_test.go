package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// memberFile writes a member's configuration on the given brokers whose HTTP
// token comes from the variable tokenEnv, and returns its path.
func memberFile(t *testing.T, brokers, tokenEnv, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("role: controller\nmember: node-1\nkafka:\n  brokers: [")
	b.WriteString(strings.Join(strings.Split(brokers, ","), ", "))
	b.WriteString("]\nhttp:\n  listen: 127.0.0.1:0\n  token_env: " + tokenEnv + "\n")
	b.WriteString(extra)
	path := filepath.Join(t.TempDir(), "node-1.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOperatorCommandsNeedNoMemberSecrets runs the operator commands with a
// member's file whose HTTP token variable is unset: the commands that
// reach only the cluster work, and run, which serves the API, refuses the
// file and names the variable.
func TestOperatorCommandsNeedNoMemberSecrets(t *testing.T) {
	const unset = "KRABKA_TEST_UNSET_HTTP_TOKEN"
	t.Setenv(unset, "")
	_, brokers := newFakeCluster(t)
	file := memberFile(t, brokers, unset, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		args []string
		want ExitCode
	}{
		{[]string{"validate", "-c", file}, ExitOK},
		{[]string{"topics", "-c", file}, ExitOK},
		// No member ever ran: the role is unknown to the cluster.
		{[]string{"status", "-c", file}, ExitUnknownRole},
		{[]string{"submit", "-c", file, "--device", "valve-1", "--action", "open"}, ExitOK},
		{[]string{"log", "-c", file, "--verify"}, ExitUnknownRole},
	} {
		code, out, errOut := runCLI(t, ctx, tc.args...)
		if code != int(tc.want) {
			t.Errorf("%s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), code, tc.want, out, errOut)
		}
	}
	code, _, errOut := runCLI(t, ctx, "run", "-c", file)
	if code != int(ExitUsage) || !strings.Contains(errOut, "http.token_env") || !strings.Contains(errOut, file+":7:") {
		t.Errorf("run with the token unset: exit %d, want %d naming http.token_env at line 7\n%s", code, ExitUsage, errOut)
	}
	code, out, _ := runCLI(t, ctx, "validate", "--member-secrets", "-c", file)
	if code != int(ExitUsage) || !strings.Contains(out, "http.token_env") {
		t.Errorf("validate --member-secrets: exit %d, want %d naming http.token_env\n%s", code, ExitUsage, out)
	}
}

// TestResolveTakesConfig: resolve -c asks the member the file names, with
// the token from the file's variable.
func TestResolveTakesConfig(t *testing.T) {
	const env = "KRABKA_TEST_RESOLVE_TOKEN"
	t.Setenv(env, "tok")
	t.Setenv(EnvToken, "")
	url := fakeLeader(t, "cancelled")
	file := memberFile(t, "127.0.0.1:1", env, "members:\n  node-1: "+url+"\n")
	code, out, errOut := runCLI(t, context.Background(), "resolve", "c/1", "--action", "cancel", "-c", file)
	if code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// Without the variable the token cannot be had: a usage error naming it.
	t.Setenv(env, "")
	code, _, errOut = runCLI(t, context.Background(), "resolve", "c/1", "--action", "cancel", "-c", file)
	if code != int(ExitUsage) || !strings.Contains(errOut, env) {
		t.Fatalf("exit %d, want %d naming %s\n%s", code, ExitUsage, env, errOut)
	}
}

// TestGlobalFlagsAreConsistent walks the command tree: each shared flag has
// one name, shorthand, type, default and help wherever it appears, the log
// flags reach every subcommand from the root, and every command that
// reads a configuration file or prints a result takes -c or -o.
func TestGlobalFlagsAreConsistent(t *testing.T) {
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	for _, name := range []string{"log-level", "log-format"} {
		if root.PersistentFlags().Lookup(name) == nil {
			t.Errorf("--%s is not a persistent flag of the root", name)
		}
	}
	first := map[string]*pflag.Flag{}
	needConfig := map[string]bool{"run": true, "validate": true, "status": true, "log": true, "submit": true, "resolve": true, "topics": true}
	needOutput := map[string]bool{"validate": true, "status": true, "log": true, "submit": true, "resolve": true, "topics": true, "version": true}
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.InheritedFlags().Lookup("log-level") == nil {
			t.Errorf("%s does not take --log-level", c.Name())
		}
		if needConfig[c.Name()] && c.Flags().Lookup("config") == nil {
			t.Errorf("%s does not take -c", c.Name())
		}
		if needOutput[c.Name()] && c.Flags().Lookup("output") == nil {
			t.Errorf("%s does not take -o", c.Name())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			switch f.Name {
			case "config", "timeout", "output":
			default:
				return
			}
			if f.Name == "timeout" {
				// topics waits for leader elections of new topics, so its
				// bound is longer; the bound is the only difference.
				want := DefaultCommandTimeout.String()
				if c.Name() == "topics" {
					want = DefaultTopicsTimeout.String()
				}
				if f.DefValue != want {
					t.Errorf("%s --timeout defaults to %s, want %s", c.Name(), f.DefValue, want)
				}
			}
			if prev, ok := first[f.Name]; ok {
				sameDefault := f.DefValue == prev.DefValue || f.Name == "timeout"
				if f.Shorthand != prev.Shorthand || f.Usage != prev.Usage || !sameDefault || f.Value.Type() != prev.Value.Type() {
					t.Errorf("%s --%s differs: -%s %q %q %s, elsewhere -%s %q %q %s", c.Name(), f.Name,
						f.Shorthand, f.Usage, f.DefValue, f.Value.Type(), prev.Shorthand, prev.Usage, prev.DefValue, prev.Value.Type())
				}
				return
			}
			first[f.Name] = f
		})
	}
	if f := first["config"]; f == nil || f.Shorthand != "c" {
		t.Errorf("--config has no -c: %+v", f)
	}
}

func TestValidateCommand(t *testing.T) {
	ctx := context.Background()
	code, out, errOut := runCLI(t, ctx, "validate", "-c", "../../dispatcher.example.yaml")
	if code != 0 || out != "ok\n" {
		t.Fatalf("example file: exit %d, out %q\n%s", code, out, errOut)
	}
	bad := "../../internal/config/testdata/invalid/three-misspelt.yaml"
	code, out, _ = runCLI(t, ctx, "validate", "-c", bad)
	if code != int(ExitUsage) {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	for _, want := range []string{bad + ":5:3: kafka.brokrs", bad + ":6:1: leas", bad + ":11:3: topics.partitons", "did you mean `lease`?"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, format := range []string{"json", "yaml"} {
		code, out, _ = runCLI(t, ctx, "validate", "-c", bad, "-o", format)
		var res ValidateResult
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(out), &res)
		} else {
			err = yaml.Unmarshal([]byte(out), &res)
		}
		if err != nil || code != int(ExitUsage) || res.OK || len(res.Faults) != 3 || res.Faults[1].Field != "leas" || res.Faults[1].Line != 6 {
			t.Errorf("-o %s: exit %d, %+v, %v\n%s", format, code, res, err, out)
		}
	}
	if code, _, _ := runCLI(t, ctx, "validate"); code != int(ExitUsage) {
		t.Errorf("validate without -c: exit %d", code)
	}
	if code, _, _ := runCLI(t, ctx, "validate", "-c", filepath.Join(t.TempDir(), "absent.yaml")); code != int(ExitUsage) {
		t.Errorf("validate of a missing file: exit %d", code)
	}
}

func TestVersionCommand(t *testing.T) {
	ctx := context.Background()
	code, out, _ := runCLI(t, ctx, "version", "-o", "json")
	var v VersionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if v.GoVersion != runtime.Version() || v.Version == "" {
		t.Errorf("version = %+v, want the Go version %s", v, runtime.Version())
	}
	code, out, _ = runCLI(t, ctx, "--version")
	if code != 0 || !strings.HasPrefix(out, "dispatcher "+v.Version) || !strings.Contains(out, runtime.Version()) {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, ctx, "version", "-o", "yaml")
	var y VersionInfo
	if err := yaml.Unmarshal([]byte(out), &y); code != 0 || err != nil || y != v {
		t.Errorf("-o yaml: exit %d, %+v, %v, want %+v\n%s", code, y, err, v, out)
	}
}

func TestBuildVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "example.test/m", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	v := buildVersion(bi, true)
	want := VersionInfo{Version: "v1.2.3", Commit: "abc123", CommitTime: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.99", Module: "example.test/m"}
	if v != want {
		t.Errorf("buildVersion = %+v, want %+v", v, want)
	}
	if s := v.String(); s != "dispatcher v1.2.3 (commit abc123, modified, 2026-01-02T03:04:05Z) go1.99" {
		t.Errorf("String = %q", s)
	}
	if v := buildVersion(nil, false); v.Version != "(unknown)" {
		t.Errorf("without build info: %+v", v)
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	for typo, want := range map[string]string{"stauts": "status", "verison": "version", "valdiate": "validate"} {
		code, _, errOut := runCLI(t, context.Background(), typo)
		if code != int(ExitUsage) || !strings.Contains(errOut, "Did you mean this?") || !strings.Contains(errOut, "\t"+want+"\n") {
			t.Errorf("%s: exit %d, want %d suggesting %s\n%s", typo, code, ExitUsage, want, errOut)
		}
	}
}

func TestLogFromNeedsFollow(t *testing.T) {
	code, _, errOut := runCLI(t, context.Background(), "log", "--brokers", "127.0.0.1:1", "--role", "r", "--from", "5")
	if code != int(ExitUsage) || !strings.Contains(errOut, "--follow") {
		t.Errorf("exit %d, want %d naming --follow\n%s", code, ExitUsage, errOut)
	}
}

// TestDurationsLoggedAsText: both log formats write a duration as "15s".
func TestDurationsLoggedAsText(t *testing.T) {
	for format, want := range map[string]string{"json": `"lease":"15s"`, "text": "lease=15s"} {
		var buf bytes.Buffer
		logger, err := newLogger(&buf, format, "info")
		if err != nil {
			t.Fatal(err)
		}
		logger.With("g", 1).WithGroup("grp").Info("started", "lease", 15*time.Second)
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s: %q lacks %q", format, buf.String(), want)
		}
	}
}

// TestOutputFormats: every -o takes yaml, and its fields are the JSON ones.
func TestOutputFormats(t *testing.T) {
	root := NewRootCommand(Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("output"); f != nil {
			if err := f.Value.Set("yaml"); err != nil {
				t.Errorf("%s -o yaml: %v", c.Name(), err)
			}
			if err := f.Value.Set("xml"); err == nil {
				t.Errorf("%s -o xml accepted", c.Name())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	res := SubmitResult{ID: "c-1", Via: "dispatch.requests", State: "submitted"}
	var j, y bytes.Buffer
	if err := OutputJSON.Write(&j, res); err != nil {
		t.Fatal(err)
	}
	if err := OutputYAML.Write(&y, res); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if len(fromYAML) != len(fromJSON) || fromYAML["via"] != "dispatch.requests" || fromYAML["id"] != "c-1" {
		t.Errorf("yaml %v, json %v", fromYAML, fromJSON)
	}
}
