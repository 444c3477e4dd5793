package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-dispatch/internal/config"
)

// unitFile is the systemd template unit of the repository.
const unitFile = "../../packaging/dispatcher@.service"

// needTool returns the path of an external program. A missing program
// fails the test under CI=true, where scripts/deps.sh installs it, and
// skips it elsewhere, saying what to install.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing: scripts/deps.sh installs it (package %s)", name, pkg)
	}
	t.Skipf("%s is missing: install the %s package (scripts/deps.sh) to run this test", name, pkg)
	return ""
}

// unitSettings reads the Key=Value lines of a unit file; a key given twice
// keeps its last value.
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[k] = v
		}
	}
	return out
}

// buildBinaryIn builds cmd/dispatcher into dir.
func buildBinaryIn(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "dispatcher")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSystemdUnit checks the unit with systemd-analyze verify, in a root of
// its own where the binary sits at the unit's path, and checks that the
// unit gives the binary the time its shutdown takes.
func TestSystemdUnit(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	s := unitSettings(t, unitFile)
	for key, want := range map[string]string{
		"Type":                     "simple",
		"ExecStart":                "/usr/local/bin/dispatcher run -c /etc/krabka-dispatch/%i.yaml",
		"KillSignal":               "SIGTERM",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"StateDirectory":           "krabka-dispatch",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
	} {
		if s[key] != want {
			t.Errorf("%s=%q, want %q", key, s[key], want)
		}
	}
	stop, err := time.ParseDuration(s["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", s["TimeoutStopSec"], err)
	}
	// The stop lets in-flight commands finish, then stops the HTTP server
	// and the telemetry, then resigns with one write.
	if need := config.DefaultShutdownTimeout + 2*HTTPShutdownTimeout + config.DefaultRequestTimeout; stop < need {
		t.Errorf("TimeoutStopSec=%v, below the %v a default shutdown may take", stop, need)
	}

	root := t.TempDir()
	for _, dir := range []string{"usr/local/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildBinaryIn(t, filepath.Join(root, "usr/local/bin"))
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/systemd/system/dispatcher@.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	// The host's units, for the targets the unit orders itself after.
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copying the host's units: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--root="+root, "dispatcher@node-1.service").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on an unknown key or a bad value; it only warns.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "dispatcher@") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// TestReleaseStampsVersion builds with make release and reads the version,
// commit and commit time back from `dispatcher version`.
func TestReleaseStampsVersion(t *testing.T) {
	mk := needTool(t, "make", "make")
	dir := t.TempDir()
	bin := filepath.Join(dir, "dispatcher")
	const (
		ver = "v9.8.7-test"
		rev = "0123456789abcdef0123456789abcdef01234567"
		at  = "2026-11-30T12:00:00Z"
	)
	cmd := exec.Command(mk, "-C", "../..", "release", "VERSION="+ver, "COMMIT="+rev, "COMMIT_TIME="+at, "RELEASE_OUT="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	var v VersionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Version != ver || v.Commit != rev || v.CommitTime != at || v.Modified || v.GoVersion == "" {
		t.Errorf("version = %+v, want %s %s %s", v, ver, rev, at)
	}
	out, err = exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), ver) || !strings.Contains(string(out), rev) {
		t.Errorf("--version = %q, %v", out, err)
	}
}
