package kafkatest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// othersMay reports whether another process could take the fault lock in
// mode how right now. A second open file description stands in for the other
// process: flock(2) locks of two descriptions conflict in one process too.
func othersMay(t *testing.T, dir string, how int) bool {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, faultLockFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return true
	}
	if err != syscall.EWOULDBLOCK {
		t.Fatal(err)
	}
	return false
}

// TestFaultLock checks the modes of the fault lock: a test of the cluster
// lets others share it and keeps a fault injector out; a fault injector keeps
// everyone out; the end of a test releases what it took.
func TestFaultLock(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)

	t.Run("shared", func(t *testing.T) {
		lockShared(t)
		if !othersMay(t, dir, syscall.LOCK_SH) || othersMay(t, dir, syscall.LOCK_EX) {
			t.Fatal("a shared holder must admit readers and keep a fault injector out")
		}
		t.Run("exclusive inside", func(t *testing.T) {
			LockFaults(t)
			if othersMay(t, dir, syscall.LOCK_SH) {
				t.Fatal("a fault injector must keep every other test out")
			}
		})
		if !othersMay(t, dir, syscall.LOCK_SH) || othersMay(t, dir, syscall.LOCK_EX) {
			t.Fatal("after the fault test ends the lock is shared again")
		}
	})
	if !othersMay(t, dir, syscall.LOCK_EX) {
		t.Fatal("after every test ended the lock is free")
	}
}
