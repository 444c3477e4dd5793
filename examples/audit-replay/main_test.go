package main

import (
	"bytes"
	"context"
	"regexp"
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
		"who led:", "  node-1, term ",
		"cmd-1 (valve-1 open): succeeded",
		"cmd-2 (heater-9 on): rejected",
		"cmd-3 (pump-1 start): in-doubt",
		"attempt 1 issued by node-1 in term ",
		"verify: clean",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The leadership and the attempts name a term, not "none".
	for _, re := range []string{`node-1, term [1-9][0-9]*, tokens`, `issued by node-1 in term [1-9][0-9]* under token`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output does not match %s:\n%s", re, out.String())
		}
	}
}
