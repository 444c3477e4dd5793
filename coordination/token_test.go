package coordination

import (
	"math"
	"testing"
)

func TestNewFencingToken(t *testing.T) {
	token, err := NewFencingToken(7, 3)
	if err != nil || token.ProducerID() != 7 || token.ProducerEpoch() != 3 || token.String() != "7:3" {
		t.Fatalf("%v, %v", token, err)
	}
	for _, bad := range [][2]int64{{-1, 0}, {0, -1}, {math.MinInt64, math.MinInt16}} {
		if token, err := NewFencingToken(bad[0], int16(bad[1])); err == nil || token != NoEpoch {
			t.Errorf("NewFencingToken(%d, %d) = %v, %v", bad[0], bad[1], token, err)
		}
	}
}

func TestFencingTokenOrder(t *testing.T) {
	ordered := []FencingToken{
		NoEpoch,
		mustToken(t, 0, 0),
		mustToken(t, 0, 1),
		mustToken(t, 4, math.MaxInt16),
		mustToken(t, 5, 0),
		mustToken(t, math.MaxInt64, math.MaxInt16),
	}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
			if a.Supersedes(b) != (i > j) {
				t.Errorf("%s.Supersedes(%s)", a, b)
			}
		}
	}
}

func TestParseFencingToken(t *testing.T) {
	for _, text := range []string{"0:0", "4242:7", "9223372036854775807:32767"} {
		token, err := ParseFencingToken(text)
		if err != nil || token.String() != text {
			t.Errorf("ParseFencingToken(%q) = %v, %v", text, token, err)
		}
	}
	for _, text := range []string{
		"", ":", "1", "1:", ":1", "-1:-1", "+1:1", "01:1", "1:01", " 1:1", "1:1 ",
		"1:2:3", "1:32768", "9223372036854775808:0", "a:1", "1:b", "１:1",
	} {
		if token, err := ParseFencingToken(text); err == nil || token != NoEpoch {
			t.Errorf("ParseFencingToken(%q) = %v, %v", text, token, err)
		}
	}
}

func FuzzParseFencingToken(f *testing.F) {
	for _, seed := range []string{"0:0", "4242:7", "-1:-1", "01:1", "1:32768"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		token, err := ParseFencingToken(text)
		if err != nil {
			return
		}
		if token.String() != text {
			t.Fatalf("%q parsed to %s", text, token)
		}
	})
}
