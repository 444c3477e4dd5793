package ceiling

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestPlotsWritePNG(t *testing.T) {
	dir := t.TempDir()
	bar := filepath.Join(dir, "bar.png")
	if err := BarPlot(bar, "t", "y", []string{"1", "10"}, []Series{{"a", []float64{1, 2}}, {"b", []float64{3, 4}}}); err != nil {
		t.Fatal(err)
	}
	line := filepath.Join(dir, "line.png")
	if err := LinePlot(line, "t", "x", "y", []float64{1, 10, 100}, []Series{{"a", []float64{1, 2, 3}}}, true, true); err != nil {
		t.Fatal(err)
	}
	// A log plot with nothing positive to draw is a plot of empty axes,
	// not a panic.
	empty := filepath.Join(dir, "empty.png")
	if err := LinePlot(empty, "t", "x", "y", []float64{1, 10}, []Series{{"a", []float64{0, 0}}}, true, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{bar, line, empty} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s is not a PNG", f)
		}
	}
}
