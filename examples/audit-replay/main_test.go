package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestReplayOfAMadeLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	clean, err := demo(ctx, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !clean {
		t.Fatalf("the log does not verify:\n%s", out.String())
	}
	for _, want := range []string{
		"who led:", "  node-1, tokens",
		"cmd-1 (valve-1 open): succeeded",
		"cmd-2 (heater-9 on): rejected",
		"cmd-3 (pump-1 start): in-doubt",
		"attempt 1 issued by node-1 under token",
		"verify: clean",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
