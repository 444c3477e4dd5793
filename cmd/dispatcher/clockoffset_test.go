package main

import (
	"testing"
	"time"
)

func TestClockOffsetShiftsTheClockTheMemberReads(t *testing.T) {
	opts, err := clockOffsetOptions(func(string) string { return "" })
	if err != nil || len(opts) != 0 {
		t.Fatalf("unset: %d options, %v; want none", len(opts), err)
	}
	if _, err := clockOffsetOptions(func(string) string { return "soon" }); err == nil {
		t.Fatal("an offset that does not parse was taken")
	}
	opts, err = clockOffsetOptions(func(string) string { return "-90s" })
	if err != nil || len(opts) != 1 {
		t.Fatalf("-90s: %d options, %v; want one", len(opts), err)
	}
	c := offsetClock{offset: -90 * time.Second}
	if d := time.Now().UnixMilli() - c.NowMillis(); d < 89_000 || d > 91_000 {
		t.Fatalf("the clock is %d ms behind the host; want 90000", d)
	}
}
