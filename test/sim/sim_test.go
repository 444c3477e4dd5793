package sim

import (
	"fmt"
	"os"
	"testing"
)

// testConfig is DefaultConfig with the fencing devices' state files on a
// memory file system when the host has one, so a thousand seeds stay fast.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "sim-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			cfg.Dir = dir
		}
	}
	return cfg
}

// replay is the command that runs one seed again.
func replay(seed uint64) string {
	return fmt.Sprintf("go run ./test/sim/cmd/sim -start %d -seeds 1 -trace 200", seed)
}

// quickConfig is testConfig with a shorter fault phase and fewer commands,
// so a thousand seeds run quickly under the race detector.
func quickConfig(t testing.TB) Config {
	cfg := testConfig(t)
	cfg.Horizon = 60_000
	cfg.Commands = 8
	return cfg
}

// TestSeeds runs the first thousand seeds of the quick configuration and
// fails on any violation.
func TestSeeds(t *testing.T) {
	const seeds, batch = 1000, 100
	cfg := quickConfig(t)
	for start := uint64(1); start <= seeds; start += batch {
		t.Run(fmt.Sprintf("seeds-%d-%d", start, start+batch-1), func(t *testing.T) {
			for seed := start; seed < start+batch; seed++ {
				res, err := Run(seed, cfg)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, v := range res.Violations {
					t.Errorf("seed %d (%s): %s: %s\n\treplay: %s", seed, res.Faults, v.Class, v.Detail, replay(seed))
				}
			}
		})
	}
}

// TestSameSeedSameTrace runs seeds twice and compares the hashes of their
// event traces and their verdicts.
func TestSameSeedSameTrace(t *testing.T) {
	cfg := testConfig(t)
	for _, seed := range []uint64{3, 51, 951} {
		a, err := Run(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.Hash != b.Hash || a.Events != b.Events || len(a.Violations) != len(b.Violations) {
			t.Errorf("seed %d: trace %x (%d events, %d violations), then %x (%d events, %d violations)",
				seed, a.Hash, a.Events, len(a.Violations), b.Hash, b.Events, len(b.Violations))
		}
		if a.Events < 1000 {
			t.Errorf("seed %d ran only %d events", seed, a.Events)
		}
	}
	x, _ := Run(4, cfg)
	y, _ := Run(5, cfg)
	if x.Hash == y.Hash {
		t.Errorf("seeds 4 and 5 share the trace hash %x", x.Hash)
	}
}

// TestInjectedBugsAreCaught turns on a known bug of the dispatcher and
// asserts that the checks catch it within a few hundred seeds (a thousand
// for the rarest race).
func TestInjectedBugsAreCaught(t *testing.T) {
	cases := []struct {
		name   string
		set    func(*Config)
		class  []string
		within uint64 // seeds
	}{
		{"skip-freshness-check", func(c *Config) { c.bugSkipFreshness = true }, []string{FreshnessOverrun}, 300},
		{"dispatch-before-commit", func(c *Config) { c.bugDispatchBeforeCommit = true }, []string{DispatchBeforeCommit, "dispatch-not-in-log"}, 300},
		// The race that the outwait closes needs a standby to decide
		// while a renewal's markers are late past a poll interval after
		// the deadline; seed 690 is the first to show it (outwaitSeeds).
		{"no-outwait", func(c *Config) { c.bugNoOutwait = true }, []string{ZombieDispatch}, 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			tc.set(&cfg)
			for seed := uint64(1); seed <= tc.within; seed++ {
				res, err := Run(seed, cfg)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, v := range res.Violations {
					for _, c := range tc.class {
						if v.Class == c {
							t.Logf("caught at seed %d: %s: %s", seed, v.Class, v.Detail)
							return
						}
					}
				}
			}
			t.Errorf("no seed of %d caught the bug (want one of %v)", tc.within, tc.class)
		})
	}
}
