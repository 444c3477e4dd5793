package measure

import (
	"os"
	"testing"
)

func TestReadProcOfSelf(t *testing.T) {
	before, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 {
		t.Fatalf("RSS %d, want a positive size", before.RSS)
	}
	// Burn some CPU so the CPU time moves.
	x := 0
	for i := range 200_000_000 {
		x ^= i
	}
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.CPU <= before.CPU {
		t.Fatalf("CPU time did not grow (%v then %v, %d)", before.CPU, after.CPU, x)
	}
	if share := CPUShare(before, after); share <= 0 {
		t.Fatalf("CPU share %v, want positive", share)
	}
}

func TestReadMachine(t *testing.T) {
	m := ReadMachine()
	if m.CPUs < 1 || m.MemoryBytes <= 0 || m.GoVersion == "" {
		t.Fatalf("machine facts incomplete: %+v", m)
	}
}
