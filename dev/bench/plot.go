package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A small line-chart drawer, so that the plot needs nothing but the
// standard library and a bitmap font: four panels against the fleet size.

type plotSeries struct {
	name string
	col  color.RGBA
	ys   []float64 // one per fleet size; NaN is not measured
}

type panel struct {
	title  string
	series []plotSeries
}

var (
	plotBlue   = color.RGBA{31, 119, 180, 255}
	plotOrange = color.RGBA{255, 127, 14, 255}
	plotGreen  = color.RGBA{44, 160, 44, 255}
	plotRed    = color.RGBA{214, 39, 40, 255}
	plotGrey   = color.RGBA{200, 200, 200, 255}
	plotBlack  = color.RGBA{0, 0, 0, 255}
)

// plotScale draws the scale phase's figures against N into a PNG.
func plotScale(path string, scales []Scale, caption string) error {
	ns := make([]float64, len(scales))
	col := func(f func(Scale) float64) []float64 {
		out := make([]float64, len(scales))
		for i, s := range scales {
			out[i] = f(s)
		}
		return out
	}
	for i, s := range scales {
		ns[i] = float64(s.N)
	}
	rolled := func(f func(Scale) float64) func(Scale) float64 {
		return func(s Scale) float64 {
			if s.Rollout.Seconds == 0 {
				return math.NaN()
			}
			return f(s)
		}
	}
	panels := []panel{
		{"controller memory, MiB", []plotSeries{
			{"idle", plotBlue, col(func(s Scale) float64 { return s.Idle.RSSMiB })},
			{"peak so far", plotOrange, col(func(s Scale) float64 { return s.Idle.PeakRSSMiB })},
			{"live Go heap, idle", plotGreen, col(func(s Scale) float64 { return s.Idle.HeapMiB })},
		}},
		{"CPU seconds per minute", []plotSeries{
			{"controller, rolling out", plotBlue, col(rolled(func(s Scale) float64 { return s.Rollout.CPUSecondsPerMin }))},
			{"controller, idle", plotOrange, col(func(s Scale) float64 { return s.Idle.CPUSecondsPerMin })},
			{"Temporal dev server (devenv), rolling out /10", plotRed, col(rolled(func(s Scale) float64 { return s.Rollout.CPUByProcess["devenv"] / 10 }))},
		}},
		{"controller's Temporal reads per minute", []plotSeries{
			{"rolling out", plotBlue, col(rolled(func(s Scale) float64 { return readsPerMin(s.Rollout) }))},
			{"idle", plotOrange, col(func(s Scale) float64 { return readsPerMin(s.Idle) })},
		}},
		{"shared image change, seconds", []plotSeries{
			{"all rolled out", plotBlue, col(rolled(func(s Scale) float64 { return s.RolloutSeconds }))},
			{"each TWD, median", plotOrange, col(rolled(func(s Scale) float64 { return s.RolloutEndToEnd.Median }))},
			{"reaction: available -> Ready, median", plotGreen, col(rolled(func(s Scale) float64 { return s.RolloutStages[stageReady].Median }))},
		}},
	}
	const pw, ph, top = 520, 340, 24
	img := image.NewRGBA(image.Rect(0, 0, 2*pw, 2*ph+top))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text(img, 8, 16, caption, plotBlack)
	for i, p := range panels {
		x0, y0 := (i%2)*pw, top+(i/2)*ph
		drawPanel(img, image.Rect(x0, y0, x0+pw, y0+ph), p, ns)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawPanel(img *image.RGBA, r image.Rectangle, p panel, xs []float64) {
	// The plot area inside the panel, leaving room for labels and legend.
	area := image.Rect(r.Min.X+60, r.Min.Y+28, r.Max.X-16, r.Max.Y-40-14*len(p.series))
	text(img, r.Min.X+60, r.Min.Y+16, p.title, plotBlack)
	ymax := 0.0
	for _, s := range p.series {
		for _, y := range s.ys {
			if !math.IsNaN(y) {
				ymax = math.Max(ymax, y)
			}
		}
	}
	ymax, ystep := niceScale(ymax)
	xmax, xstep := niceScale(xs[len(xs)-1])
	px := func(x float64) int { return area.Min.X + int(x/xmax*float64(area.Dx())) }
	py := func(y float64) int { return area.Max.Y - int(y/ymax*float64(area.Dy())) }
	for y := 0.0; y <= ymax+ystep/2; y += ystep {
		line(img, area.Min.X, py(y), area.Max.X, py(y), plotGrey, 1)
		label := trimNumber(y)
		text(img, area.Min.X-8-7*len(label), py(y)+4, label, plotBlack)
	}
	for x := 0.0; x <= xmax+xstep/2; x += xstep {
		line(img, px(x), area.Max.Y, px(x), area.Max.Y+4, plotBlack, 1)
		label := trimNumber(x)
		text(img, px(x)-7*len(label)/2, area.Max.Y+17, label, plotBlack)
	}
	line(img, area.Min.X, area.Max.Y, area.Max.X, area.Max.Y, plotBlack, 1)
	line(img, area.Min.X, area.Min.Y, area.Min.X, area.Max.Y, plotBlack, 1)
	text(img, area.Max.X-7*len("TWDs (N)"), area.Max.Y+30, "TWDs (N)", plotBlack)
	for i, s := range p.series {
		prevOK := false
		var lx, ly int
		for j, y := range s.ys {
			if math.IsNaN(y) {
				prevOK = false
				continue
			}
			x, yy := px(xs[j]), py(y)
			if prevOK {
				line(img, lx, ly, x, yy, s.col, 2)
			}
			dot(img, x, yy, s.col)
			lx, ly, prevOK = x, yy, true
		}
		ly0 := area.Max.Y + 44 + 14*i
		line(img, area.Min.X, ly0-4, area.Min.X+20, ly0-4, s.col, 2)
		text(img, area.Min.X+26, ly0, s.name, plotBlack)
	}
}

// niceScale rounds max up to 1, 2 or 5 times a power of ten times the
// number of ticks, and returns it with the tick step.
func niceScale(max float64) (top, step float64) {
	if max <= 0 || math.IsNaN(max) {
		return 1, 0.2
	}
	raw := max / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * pow; step >= raw {
			break
		}
	}
	return math.Ceil(max/step) * step, step
}

func trimNumber(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws from (x0,y0) to (x1,y1), width pixels thick (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, width int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		for i := 0; i < width; i++ {
			for j := 0; j < width; j++ {
				img.SetRGBA(x0+i, y0+j, c)
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for i := -3; i <= 3; i++ {
		for j := -3; j <= 3; j++ {
			img.SetRGBA(x+i, y+j, c)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
