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

// TestSeeds runs the first thousand seeds and fails on any violation that
// the seed's faults do not explain.
func TestSeeds(t *testing.T) {
	const seeds, batch = 1000, 100
	cfg := testConfig(t)
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
