package kafkatest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// EnvDir holds the directory of the real cluster's files, .run/kafka, where
// the fault lock lives.
const EnvDir = "KRABKA_KAFKA_DIR"

// faultLockFile is the name of the fault lock in the cluster directory.
const faultLockFile = "faults.lock"

// The fault lock keeps a test that kills brokers apart from every other test
// of the real cluster, across test processes: `go test ./...` runs packages
// in parallel, and a broker that one package kills would fail the timing of
// another. [Brokers] takes it shared for the rest of the test; [LockFaults]
// takes it exclusive. It is a flock(2) lock on .run/kafka/faults.lock, so
// a script that injects faults takes it with `flock .run/kafka/faults.lock`.
//
// One process holds one lock: exclusive while any of its tests holds it
// exclusive, shared while any holds it shared. Tests of one process are
// kept apart by running the fault test on its own, not in parallel.
var faultLock struct {
	mu        sync.Mutex
	file      *os.File
	shared    int
	exclusive int
}

// lockShared takes the fault lock shared until the end of the test.
func lockShared(t testing.TB) { lockFaults(t, false) }

// LockFaults takes the fault lock of the real cluster exclusively until the
// end of the test, waiting until no other test process uses the cluster. A
// test calls it before [KillBroker], before anything else that reaches the
// cluster, and must not run in parallel with other tests of its package.
func LockFaults(t testing.TB) {
	t.Helper()
	lockFaults(t, true)
}

func lockFaults(t testing.TB, exclusive bool) {
	t.Helper()
	dir := os.Getenv(EnvDir)
	if dir == "" {
		// An env file of an older script; run without the lock.
		return
	}
	faultLock.mu.Lock()
	defer faultLock.mu.Unlock()
	if faultLock.file == nil {
		f, err := os.OpenFile(filepath.Join(dir, faultLockFile), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("kafkatest: open the fault lock: %v", err)
		}
		faultLock.file = f
	}
	if exclusive {
		faultLock.exclusive++
	} else {
		faultLock.shared++
	}
	if err := applyFaultLock(); err != nil {
		t.Fatalf("kafkatest: take the fault lock: %v", err)
	}
	t.Cleanup(func() {
		faultLock.mu.Lock()
		defer faultLock.mu.Unlock()
		if exclusive {
			faultLock.exclusive--
		} else {
			faultLock.shared--
		}
		if err := applyFaultLock(); err != nil {
			t.Errorf("kafkatest: release the fault lock: %v", err)
		}
	})
}

// applyFaultLock sets the process's lock to what its holders need. The
// caller holds faultLock.mu.
func applyFaultLock() error {
	how := syscall.LOCK_UN
	switch {
	case faultLock.exclusive > 0:
		how = syscall.LOCK_EX
	case faultLock.shared > 0:
		how = syscall.LOCK_SH
	}
	for {
		err := syscall.Flock(int(faultLock.file.Fd()), how)
		if err == syscall.EINTR {
			continue
		}
		if how == syscall.LOCK_UN {
			// No test holds it: close the file, so the next test opens the
			// lock of the directory it names.
			if cerr := faultLock.file.Close(); err == nil {
				err = cerr
			}
			faultLock.file = nil
		}
		return err
	}
}
