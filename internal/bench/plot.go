package bench

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// PlotLines draws series on log-scaled axes into path (.svg or .png).
func PlotLines(path, title, xLabel, yLabel string, series ...Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, s := range series {
		pts := make(plotter.XYs, len(s.X))
		for i := range s.X {
			pts[i].X, pts[i].Y = s.X[i], s.Y[i]
		}
		args = append(args, s.Name, pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}
