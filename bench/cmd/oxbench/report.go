//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/bench/internal/chart"
	"github.com/openoxide/oxsupervise/bench/internal/stats"
)

// variant is one way of doing the same work; trial does it once and
// returns one value per metric (nanoseconds unless the figure says else).
type variant struct {
	name  string
	trial func(ctx context.Context, round int) (map[string]float64, error)
}

// figure is a set of variants measured side by side; variants[0] is the
// baseline every other variant is divided by.
type figure struct {
	id, title string
	command   string
	metrics   []string
	variants  []variant
	rounds    int
	notes     []string
	unit      string // "ns" (shown as durations) or a plain unit
}

// report is a finished figure: raw samples plus, for figures that are not
// ratios (audit, memory), a free-form table.
type report struct {
	ID      string                          `json:"id"`
	Title   string                          `json:"title"`
	Command string                          `json:"command"`
	Unit    string                          `json:"unit"`
	Rounds  int                             `json:"rounds"`
	Metrics []string                        `json:"metrics,omitempty"`
	Names   []string                        `json:"variants,omitempty"`
	Samples map[string]map[string][]float64 `json:"samples,omitempty"` // metric -> variant -> per round
	Failed  map[string]string               `json:"failed,omitempty"`  // variant -> why it produced no numbers
	Notes   []string                        `json:"notes,omitempty"`
	Headers []string                        `json:"headers,omitempty"`
	Rows    [][]string                      `json:"rows,omitempty"`
	Took    string                          `json:"took"`
	RunAt   string                          `json:"run_at,omitempty"` // when the figure was measured (RFC 3339, UTC)
}

// measure runs the rounds interleaved: round r starts at variant r mod n,
// so no variant always runs first (cold caches) or last.
func (f *figure) measure(ctx context.Context) (*report, error) {
	start := time.Now()
	r := &report{ID: f.id, Title: f.title, Command: f.command, Unit: f.unit, Rounds: f.rounds,
		Metrics: f.metrics, Samples: map[string]map[string][]float64{}, Failed: map[string]string{},
		Notes: f.notes}
	for _, v := range f.variants {
		r.Names = append(r.Names, v.name)
	}
	for _, m := range f.metrics {
		r.Samples[m] = map[string][]float64{}
	}
	// Warm-up: one untimed trial of each variant (page cache, binaries).
	for _, v := range f.variants {
		if _, err := v.trial(ctx, -1); err != nil {
			if v.name == f.variants[0].name {
				return r, fmt.Errorf("%s: baseline %s: %w", f.id, v.name, err)
			}
			r.Failed[v.name] = err.Error()
			fmt.Fprintf(os.Stderr, "oxbench: %s: variant %q fails, left out: %v\n", f.id, v.name, err)
		}
	}
	n := len(f.variants)
	for round := 0; round < f.rounds; round++ {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		got := map[string]map[string]float64{}
		for k := 0; k < n; k++ {
			v := f.variants[(round+k)%n]
			if _, bad := r.Failed[v.name]; bad {
				continue
			}
			vals, err := v.trial(ctx, round)
			if err != nil {
				return r, fmt.Errorf("%s: round %d, %s: %w", f.id, round, v.name, err)
			}
			got[v.name] = vals
		}
		// Append only complete rounds so samples stay paired by index.
		for _, m := range f.metrics {
			for name, vals := range got {
				x, ok := vals[m]
				if !ok {
					return r, fmt.Errorf("%s: %s reported no %s", f.id, name, m)
				}
				r.Samples[m][name] = append(r.Samples[m][name], x)
			}
		}
		fmt.Fprintf(os.Stderr, "oxbench: %s: round %d/%d done\n", f.id, round+1, f.rounds)
	}
	r.Took = time.Since(start).Round(time.Second).String()
	return r, nil
}

func (r *report) format(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if r.Unit == "ns" {
		d := time.Duration(v)
		switch {
		case d >= time.Second:
			return fmt.Sprintf("%.2f s", d.Seconds())
		case d >= time.Millisecond:
			return fmt.Sprintf("%.2f ms", float64(d)/1e6)
		case d >= time.Microsecond:
			return fmt.Sprintf("%.2f µs", float64(d)/1e3)
		default:
			return fmt.Sprintf("%.0f ns", v)
		}
	}
	return fmt.Sprintf("%.4g %s", v, r.Unit)
}

type row struct {
	metric, variant string
	median, p90     float64
	ratio           stats.Ratio
	baseline        bool
	n               int
}

func (r *report) rows() []row {
	var out []row
	if len(r.Names) == 0 {
		return nil
	}
	base := r.Names[0]
	for mi, m := range r.Metrics {
		for _, name := range r.Names {
			xs, ok := r.Samples[m][name]
			if !ok {
				continue
			}
			out = append(out, row{metric: m, variant: name, median: stats.Median(xs), p90: stats.Quantile(xs, 0.9),
				ratio: stats.CompareRounds(r.Samples[m][base], xs, uint64(mi+1)), baseline: name == base, n: len(xs)})
		}
	}
	return out
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", r.Title)
	fmt.Fprintf(&b, "Reproduce: `%s`", r.Command)
	if r.Took != "" {
		fmt.Fprintf(&b, " (took %s)", r.Took)
	}
	b.WriteString("\n\n")
	if len(r.Metrics) > 0 {
		fmt.Fprintf(&b, "Baseline: **%s**. %d interleaved rounds; ratio = median(variant) / median(baseline), "+
			"[95%% paired bootstrap interval], and the smallest/largest per-round ratio.\n\n", r.Names[0], r.Rounds)
		b.WriteString("| metric | variant | median | p90 | ratio to baseline [95% CI] | per-round ratio min–max | n |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
		for _, x := range r.rows() {
			ratio := fmt.Sprintf("%.2f× [%.2f–%.2f]", x.ratio.Median, x.ratio.Lo, x.ratio.Hi)
			spread := fmt.Sprintf("%.2f–%.2f", x.ratio.MinRound, x.ratio.MaxRound)
			name := x.variant
			if x.baseline {
				name += " (baseline)"
				ratio, spread = "1 (baseline)", "–"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d |\n", x.metric, name, r.format(x.median), r.format(x.p90), ratio, spread, x.n)
		}
		b.WriteString("\n")
		if len(r.Rows) == 0 {
			fmt.Fprintf(&b, "![%s](%s.png)\n\n", r.Title, r.ID)
		}
	}
	if len(r.Rows) > 0 {
		b.WriteString("| " + strings.Join(r.Headers, " | ") + " |\n|")
		for range r.Headers {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, row := range r.Rows {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	for name, why := range r.Failed {
		fmt.Fprintf(&b, "- **%s produced no numbers**: %s\n", name, oneLine(why))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (r *report) chart() chart.Chart {
	c := chart.Chart{
		Title:     r.Title,
		XLabel:    "time relative to baseline (x, median; whisker: 95% bootstrap CI)",
		Reference: 1,
		Footer:    []string{"reproduce: " + r.Command, "host: " + hostLine()},
	}
	if r.Unit != "ns" {
		c.XLabel = fmt.Sprintf("%s relative to baseline (x, median; whisker: 95%% bootstrap CI)", r.Unit)
	}
	// A log axis once ratios span more than a decade or so (session start
	// against `true`), so the small ones stay readable.
	lo, hi := 1.0, 1.0
	for _, x := range r.rows() {
		lo, hi = min(lo, x.ratio.Median), max(hi, x.ratio.Hi, x.ratio.Median)
	}
	c.Log = hi/lo > 20
	// basicfont has ASCII only.
	ascii := strings.NewReplacer("µ", "u", "×", "x", "–", "-")
	for _, x := range r.rows() {
		label := x.variant
		if len(r.Metrics) > 1 {
			label = x.metric + " / " + x.variant
		}
		bar := chart.Bar{Label: label, Value: x.ratio.Median, Lo: x.ratio.Lo, Hi: x.ratio.Hi,
			Note: fmt.Sprintf("%.2fx  (median %s)", x.ratio.Median, r.format(x.median))}
		if x.baseline {
			bar = chart.Bar{Label: label + " (baseline)", Value: 1, Lo: math.NaN(), Hi: math.NaN(), Baseline: true,
				Note: "1x  (median " + r.format(x.median) + ")"}
		}
		bar.Label, bar.Note = ascii.Replace(bar.Label), ascii.Replace(bar.Note)
		c.Bars = append(c.Bars, bar)
	}
	return c
}

func (r *report) write(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.ID+".json"), raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, r.ID+".md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	if len(r.Metrics) == 0 || len(r.Rows) > 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := chart.Render(&buf, r.chart()); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.ID+".png"), buf.Bytes(), 0o644)
}

// figureOrder is the order of figures in the index: the order suites run.
var figureOrder = []string{"session-start", "fs-micro", "macro", "net-connect", "net-resolver", "audit", "memory", "fs-vm-bpflsm", "fs-vm-macro", "fs-vm-mapmem"}

// writeIndex writes results.md: the figures of this run, and, so that the
// index always covers every figure, the last results of suites not run
// this time (read back from their JSON files), each marked as coming from
// an earlier run with the time it was measured.
func writeIndex(dir string, reps []*report, took time.Duration) error {
	now := time.Now().UTC()
	fresh := map[string]bool{}
	all := map[string]*report{}
	for _, r := range reps {
		fresh[r.ID], all[r.ID] = true, r
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".json")
		if fresh[id] {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r report
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if r.RunAt == "" {
			// Written before reports carried their time: the file's
			// modification time is when that run wrote it.
			if fi, err := os.Stat(f); err == nil {
				r.RunAt = fi.ModTime().UTC().Format(time.RFC3339)
			}
		}
		all[id] = &r
	}
	var ids []string
	for _, id := range figureOrder {
		if all[id] != nil {
			ids = append(ids, id)
		}
	}
	var extra []string
	for id := range all {
		if !slices.Contains(figureOrder, id) {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	ids = append(ids, extra...)

	var b strings.Builder
	b.WriteString("# oxsupervise benchmark results\n\n")
	var ran []string
	for _, r := range reps {
		ran = append(ran, "`"+r.ID+"`")
	}
	fmt.Fprintf(&b, "Last run at %s on %s measured %s and took %s. Generated by `oxbench`; see [../README.md](../README.md) for what each figure means.",
		now.Format(time.RFC3339), hostLine(), strings.Join(ran, ", "), took.Round(time.Second))
	if len(ids) > len(reps) {
		b.WriteString(" Figures marked *earlier run* were not measured again this time; they keep the results of the run named in them.")
	}
	b.WriteString("\n\n")
	for _, id := range ids {
		r := all[id]
		md := strings.Replace(r.markdown(), "### ", "## ", 1)
		if !fresh[id] {
			when := r.RunAt
			if when == "" {
				when = "unknown time"
			}
			md = strings.Replace(md, "\n\n", fmt.Sprintf("\n\n*Earlier run: measured at %s, not in the last run.*\n\n", when), 1)
		}
		b.WriteString(md)
		b.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644)
}

func hostLine() string {
	rel := "?"
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		rel = strings.TrimSpace(string(raw))
	}
	cpu := "?"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	n := 0
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n = strings.Count(string(raw), "processor\t:")
	}
	return fmt.Sprintf("Linux %s, %d CPUs (%s)", rel, n, cpu)
}

// replot rewrites the PNG chart and Markdown table of every figure in dir
// from its JSON raw samples, e.g. after a change to the renderer; nothing
// is measured again.
func replot(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r report
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if len(r.Metrics) == 0 || len(r.Rows) > 0 {
			continue
		}
		var buf bytes.Buffer
		if err := chart.Render(&buf, r.chart()); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.ID+".png"), buf.Bytes(), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, r.ID+".md"), []byte(r.markdown()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
