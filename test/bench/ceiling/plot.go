package ceiling

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Series is one named set of values of a plot: one bar per category, or one
// point per X.
type Series struct {
	Name   string
	Values []float64
}

// palette colours the series in order.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// Plot size of every PNG.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 9 * vg.Centimeter
)

// BarPlot writes a grouped bar chart: one group per category, one bar per
// series, on a linear value axis from zero.
func BarPlot(file, title, yLabel string, categories []string, series []Series) error {
	if len(series) == 0 {
		return errors.New("ceiling: a plot needs a series")
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	width := vg.Points(float64(60 / len(series)))
	for i, s := range series {
		vals := make(plotter.Values, len(s.Values))
		copy(vals, s.Values)
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.Color = palette[i%len(palette)]
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
	}
	p.Legend.Top = true
	p.NominalX(categories...)
	p.Add(plotter.NewGrid())
	return p.Save(plotWidth, plotHeight, file)
}

// LinePlot writes one line with points per series over shared X values. A
// series may carry fewer values than x. With logX or logY that axis is
// logarithmic, and its values must be positive.
func LinePlot(file, title, xLabel, yLabel string, x []float64, series []Series, logX, logY bool) (err error) {
	// gonum panics on a log axis whose range holds no positive value, as
	// when every point was left out; say so as an error instead.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ceiling: plot %s: %v", file, r)
		}
	}()
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	drawn := 0
	for i, s := range series {
		pts := make(plotter.XYs, 0, len(s.Values))
		for j, v := range s.Values {
			// A log axis has no place for zero or below: leave such a
			// point out rather than fail the whole plot.
			if j < len(x) && finite(v) && (!logX || x[j] > 0) && (!logY || v > 0) {
				pts = append(pts, plotter.XY{X: x[j], Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color = palette[i%len(palette)]
		points.Color = palette[i%len(palette)]
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
		drawn++
	}
	if drawn == 0 {
		// Nothing to draw: give the axes a range a log scale accepts.
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 1, 10, 1, 10
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p.Save(plotWidth, plotHeight, file)
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
