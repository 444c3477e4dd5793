package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestHostLineNamesCPUsMemoryAndKernel(t *testing.T) {
	line := hostLine()
	if !strings.HasPrefix(line, fmt.Sprintf("%d CPUs, ", runtime.NumCPU())) {
		t.Errorf("host line %q does not start with the CPU count", line)
	}
	if !strings.Contains(line, " GiB, Linux ") {
		t.Errorf("host line %q lacks the memory or the kernel", line)
	}
	if kb, err := memTotalKB(); err != nil || kb <= 0 {
		t.Errorf("memTotalKB = %d, %v; want a positive size", kb, err)
	}
}
