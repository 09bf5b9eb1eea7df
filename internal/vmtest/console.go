package vmtest

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// JobResult is the outcome of one job as the guest reported it.
type JobResult struct {
	Name     string
	Reported bool // the guest printed an exit status for this job
	Exit     int
	Duration time.Duration
}

// Result is the outcome of one VM run.
type Result struct {
	BootTime time.Duration // qemu start until the guest program is up
	Total    time.Duration
	Jobs     []JobResult
	Panic    string // first kernel panic line, if any
	Failure  string // why the guest ended early (initramfs failure, timeout)
	Done     bool   // the guest program finished every job
}

// console follows the guest's serial output: it copies everything to out
// and records the guest program's markers into a Result.
type console struct {
	nonce   string
	out     io.Writer
	start   time.Time
	now     func() time.Time
	res     *Result
	byName  map[string]int
	started map[string]time.Time
	jobs    []Job
	onReady func() // called once the guest program reports it is up
}

func newConsole(nonce string, jobs []Job, out io.Writer, res *Result, now func() time.Time) *console {
	c := &console{nonce: nonce, out: out, start: now(), now: now, res: res,
		byName: map[string]int{}, started: map[string]time.Time{}, jobs: jobs}
	res.Jobs = make([]JobResult, len(jobs))
	for i, j := range jobs {
		res.Jobs[i].Name = j.Name
		c.byName[j.Name] = i
	}
	return c
}

func (c *console) line(raw string) {
	line := strings.TrimRight(raw, "\r\n")
	if strings.Contains(line, "Kernel panic") && c.res.Panic == "" {
		c.res.Panic = line
	}
	if strings.HasPrefix(line, markerPrefix+"initramfs") || strings.Contains(line, "@@oxs-vmtest initramfs failed") {
		c.res.Failure = line
	}
	// A test may leave its last line unterminated, so the marker can
	// follow other output on the same line.
	before, rest, ok := strings.Cut(line, markerPrefix+c.nonce+" ")
	if before != "" || !ok {
		fmt.Fprintln(c.out, before)
	}
	if !ok {
		return
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return
	}
	switch fields[0] {
	case "ready":
		c.res.BootTime = c.now().Sub(c.start)
		if c.onReady != nil {
			c.onReady()
		}
		uptime := "?"
		if len(fields) > 1 {
			uptime = fields[1]
		}
		fmt.Fprintf(c.out, "vmtest: guest booted in %.1fs (qemu start to guest PID 1 ready; kernel uptime %ss)\n", c.res.BootTime.Seconds(), uptime)
	case "start":
		if len(fields) == 2 {
			c.started[fields[1]] = c.now()
			note := ""
			if i, ok := c.byName[fields[1]]; ok && c.jobs[i].ExpectFail {
				note = " (runner self-check: this job MUST fail)"
			}
			fmt.Fprintf(c.out, "vmtest: === %s%s\n", fields[1], note)
		}
	case "exit":
		if len(fields) != 3 {
			return
		}
		i, known := c.byName[fields[1]]
		code, err := strconv.Atoi(fields[2])
		if !known || err != nil {
			return
		}
		c.res.Jobs[i].Reported = true
		c.res.Jobs[i].Exit = code
		if t, ok := c.started[fields[1]]; ok {
			c.res.Jobs[i].Duration = c.now().Sub(t)
		}
	case "done":
		c.res.Done = true
	case "error":
		c.res.Failure = strings.Join(fields[1:], " ")
		fmt.Fprintf(c.out, "vmtest: guest error: %s\n", c.res.Failure)
	}
}

// evaluate turns a Result into the run's verdict: every job must have a
// reported status matching its expectation, and the guest must have
// finished cleanly. Silence is never success.
func evaluate(jobs []Job, res Result) error {
	var errs []error
	if res.Panic != "" {
		errs = append(errs, fmt.Errorf("guest kernel panicked: %s", res.Panic))
	}
	if res.Failure != "" {
		errs = append(errs, fmt.Errorf("guest failed: %s", res.Failure))
	}
	for i, j := range jobs {
		r := res.Jobs[i]
		switch {
		case !r.Reported:
			errs = append(errs, fmt.Errorf("%s: no result from the guest", j.Name))
		case j.ExpectFail && r.Exit == 0:
			errs = append(errs, fmt.Errorf("%s: self-check passed but must fail: the runner would not notice failing tests", j.Name))
		case !j.ExpectFail && r.Exit != 0:
			errs = append(errs, fmt.Errorf("%s: exit status %d", j.Name, r.Exit))
		}
	}
	if !res.Done && len(errs) == 0 {
		errs = append(errs, errors.New("guest did not report completion"))
	}
	return errors.Join(errs...)
}
