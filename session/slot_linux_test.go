//go:build linux

package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/session"
)

// oneSlot hands out its slot once.
type oneSlot struct {
	mu sync.Mutex
	sl *session.Slot
}

// close closes the slot unless it was claimed (a test that failed
// before).
func (o *oneSlot) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sl != nil {
		o.sl.Close()
		o.sl = nil
	}
}

func (o *oneSlot) Claim(opts session.RunOptions, netns bool) (*session.Slot, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sl == nil {
		return nil, "claimed already"
	}
	if why := o.sl.Serves(opts, netns); why != "" {
		return nil, why
	}
	sl := o.sl
	o.sl = nil
	return sl, ""
}

// slotProbe prints what makes a session's boundary, as the command sees
// it: its cgroup, credentials, capabilities, no_new_privs and seccomp
// filters, its mounts (without the ids that differ between two mount
// namespaces, and sorted: the private /dev/shm's tmpfs is made after a
// slot's mount namespace and before a fresh one's, so its id sorts it
// elsewhere in mountinfo; what is on top at /dev/shm is probed instead:
// the session's own, empty tmpfs, not the host's), the Landlock refusal of a write outside the workspace, its
// descriptors and its stdio.
const slotProbe = `grep '^0::' /proc/self/cgroup
grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|Seccomp_filters|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status
sed -E 's/^[0-9]+ [0-9]+ [0-9]+:[0-9]+ //' /proc/self/mountinfo | sort
echo "/dev/shm holds: $(ls -A /dev/shm)"
echo z > /dev/shm/probe && echo "/dev/shm write ok"
echo x 2>&1 > "$OUTSIDE/victim.txt" || echo "outside write refused"
echo y > "$PWD/written.txt" && echo "workspace write ok"
ls /proc/self/fd
read line
echo "stdin: $line"
echo "to stderr" >&2
`

type probeRun struct {
	id, stdout, stderr, timing, warnings string
	// limits are the group's pids.max and memory.max while the session
	// runs, "-" where cgroup2 has no such controller (then a warning
	// says the limit was not applied).
	limits string
	group  string
}

// limitFiles reads the limits of the group at dir.
func limitFiles(dir string) string {
	var out []string
	for _, f := range []string{"pids.max", "memory.max"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			out = append(out, "-")
			continue
		}
		out = append(out, strings.TrimSpace(string(b)))
	}
	return strings.Join(out, " ")
}

// runProbe runs slotProbe in a session, through slots when given.
func runProbe(t *testing.T, e *env, reg session.Registry, slots session.Slots) probeRun {
	t.Helper()
	self := selfExe(t)
	c := compiledFor(t, e)
	c.Limits.PidsMax = 77
	c.Limits.MemoryMax = 300 << 20
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	inW.WriteString("hello\n")
	inW.Close()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out.ReadFrom(outR) }()
	go func() { defer wg.Done(); errb.ReadFrom(errR) }()
	var timing, warnings bytes.Buffer
	var pr probeRun
	code, err := session.Run(context.Background(), session.RunOptions{
		Policy: c,
		Argv:   []string{"sh", "-c", slotProbe},
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "OUTSIDE=" + e.outside},
		Dir:    e.ws, SelfExe: self, Registry: reg, Slots: slots,
		Stdin: inR, Stdout: outW, Stderr: errW,
		Timing: phasetime.New(&timing), Warn: &warnings,
		OnStart: func(info session.SessionInfo) {
			pr.id = info.ID
			pr.limits, pr.group = limitFiles(info.CgroupPath), info.CgroupPath
		},
	})
	inR.Close()
	outW.Close()
	errW.Close()
	wg.Wait()
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, %v; stderr: %s", code, err, errb.String())
	}
	pr.stdout = strings.ReplaceAll(out.String(), pr.id, "SESSION")
	pr.stderr, pr.timing = errb.String(), timing.String()
	pr.warnings = strings.ReplaceAll(warnings.String(), pr.id, "SESSION")
	return pr
}

// A session started through a claimed slot is the session a fresh start
// builds: the same cgroup place and limits, credentials, capabilities,
// seccomp filter, mounts, Landlock refusal, descriptors and stdio. Only
// the debug timing tells them apart.
func TestSlotSessionIsAFreshOne(t *testing.T) {
	e, self := runEnv(t)
	reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
	hostShm := filepath.Join("/dev/shm", filepath.Base(e.base))
	mustWrite(t, hostShm, "the host's\n")
	t.Cleanup(func() { os.Remove(hostShm) })
	fresh := runProbe(t, e, reg, nil)
	// compiledFor's network is none, and Run is given no cgroup network
	// layer: an empty network namespace.
	sl, err := session.NewSlot(session.SlotOptions{Registry: reg, SelfExe: self, NetNS: true})
	if err != nil {
		t.Fatalf("NewSlot: %v", err)
	}
	slotID := sl.ID()
	slots := &oneSlot{sl: sl}
	t.Cleanup(slots.close)
	claimed := runProbe(t, e, reg, slots)

	if claimed.id != slotID {
		t.Errorf("the session through the slot is %s, want the slot's id %s", claimed.id, slotID)
	}
	if !strings.Contains(claimed.timing, "slot claimed") || strings.Contains(fresh.timing, "slot claimed") {
		t.Errorf("timing: through the slot %q, fresh %q; want the claim in the first only", claimed.timing, fresh.timing)
	}
	for _, want := range []string{"/SESSION\n", "NoNewPrivs:\t1", "Seccomp:\t2", "outside write refused", "workspace write ok", "stdin: hello", "/dev/shm holds: \n", "/dev/shm write ok"} {
		if !strings.Contains(fresh.stdout, want) {
			t.Errorf("the fresh session's probe lacks %q:\n%s", want, fresh.stdout)
		}
	}
	if fresh.stdout != claimed.stdout {
		t.Errorf("the session through a slot differs from a fresh one:\nfresh:\n%s\nthrough the slot:\n%s", fresh.stdout, claimed.stdout)
	}
	if fresh.stderr != "to stderr\n" || claimed.stderr != fresh.stderr {
		t.Errorf("stderr: fresh %q, through the slot %q; want %q", fresh.stderr, claimed.stderr, "to stderr\n")
	}
	// Each limit is applied, or said not to be (a host without the
	// controller in cgroup2): the same way both times.
	for i, limit := range []string{"pids.max=77", "memory.max=314572800"} {
		value := strings.Fields(fresh.limits)[i]
		if applied := value == strings.Split(limit, "=")[1]; applied == strings.Contains(fresh.warnings, "limit "+limit+" not applied") {
			t.Errorf("limit %s: group has %s, warnings %q: want it applied or a warning", limit, value, fresh.warnings)
		}
	}
	if claimed.limits != fresh.limits || claimed.warnings != fresh.warnings {
		t.Errorf("limits: fresh %q (warnings %q), through the slot %q (warnings %q)", fresh.limits, fresh.warnings, claimed.limits, claimed.warnings)
	}
	if got := strings.TrimSpace(mustRead(t, filepath.Join(e.outside, "victim.txt"))); got != "victim" {
		t.Errorf("outside file now %q, want it unchanged", got)
	}
	if _, err := reg.Get(slotID); err == nil {
		t.Errorf("the slot's session %s still has a registry entry after its end", slotID)
	}
	if _, err := os.Stat(claimed.group); err == nil {
		t.Errorf("the slot's session group %s is left after its end", claimed.group)
	}
}

// A slot that cannot serve the session (here: it has no network
// namespace, the session needs one) is left alone: the session starts the
// normal way and its timing says why. Closing the slot leaves no group and
// no launcher.
func TestSlotThatCannotServeFallsBack(t *testing.T) {
	e, self := runEnv(t)
	reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
	sl, err := session.NewSlot(session.SlotOptions{Registry: reg, SelfExe: self})
	if err != nil {
		t.Fatalf("NewSlot: %v", err)
	}
	slots := &oneSlot{sl: sl}
	t.Cleanup(slots.close)
	pr := runProbe(t, e, reg, slots)
	if pr.id == sl.ID() || !strings.Contains(pr.timing, "no slot (the session needs a private network namespace, the slot has none): normal start") {
		t.Errorf("session %s (slot %s), timing:\n%s\nwant a normal start that says why", pr.id, sl.ID(), pr.timing)
	}
	groups, err := cgroup.ListSessions(cgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(groups, sl.ID()) {
		t.Errorf("ListSessions lists the waiting slot %s: %v", sl.ID(), groups)
	}
	list, _ := session.List(cgroup.Config{}, reg)
	for _, st := range list {
		if st.ID == sl.ID() {
			t.Errorf("List shows the waiting slot: %+v", st)
		}
	}
	g, err := cgroup.OpenSession(cgroup.Config{}, sl.ID())
	if err != nil {
		t.Fatalf("the slot's group: %v", err)
	}
	procs, err := g.Procs()
	if err != nil || len(procs) != 1 {
		t.Fatalf("the slot's group holds %v (%v), want its launcher alone", procs, err)
	}
	slots.close()
	if _, err := os.Stat(g.Path); err == nil {
		t.Errorf("the slot's group %s is left after Close", g.Path)
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", procs[0])); err == nil && !strings.Contains(string(stat), ") Z ") {
		t.Errorf("the slot's launcher %d is alive after Close: %s", procs[0], stat)
	}
}

// A signal that reached the supervisor while a daemon's slot waited is not
// its session's: the session claiming the slot does not forward it to its
// command (which would die of it, or run its trap). A slot made ahead by a
// process that runs this one session (SlotAhead, a standalone run) keeps
// them: one that ends a process ends the run at the claim, before anything
// of it runs (also when the same Ctrl-C killed the slot's launcher, which
// waits in the terminal's foreground group), and the others reach the
// command once it runs, as from a normal start.
func TestSlotSignalsFromBeforeItsClaim(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
	self := selfExe(t)
	daemonSlot := func(t *testing.T, o session.SlotOptions) (session.Slots, string) {
		sl, err := session.NewSlot(o)
		if err != nil {
			t.Fatalf("NewSlot: %v", err)
		}
		slots := &oneSlot{sl: sl}
		t.Cleanup(slots.close)
		return slots, sl.ID()
	}
	slotAhead := func(t *testing.T, o session.SlotOptions) (session.Slots, string) {
		a := session.MakeSlotAhead(o)
		t.Cleanup(a.Close)
		id := session.SlotAheadID(a)
		if id == "" {
			t.Fatal("the slot made ahead could not be made")
		}
		return a, id
	}
	const (
		dropped   = iota // the command ran to its end: code 0, ready, done
		forwarded        // the command got it: its trap exits 7, or it died of it before the trap was set
		ended            // nothing ran: the run ends with 128+N
	)
	tests := []struct {
		name string
		// slots makes the slot, waiting once it returns, and what hands
		// it to Run, with the slot's session ID.
		slots func(t *testing.T, o session.SlotOptions) (session.Slots, string)
		sig   syscall.Signal
		// killLauncher: the signal kills the slot's launcher too.
		killLauncher bool
		want         int
	}{
		{"daemon slot drops them", daemonSlot, syscall.SIGUSR1, false, dropped},
		{"slot made ahead forwards SIGUSR1", slotAhead, syscall.SIGUSR1, false, forwarded},
		{"slot made ahead: SIGTERM ends the run", slotAhead, syscall.SIGTERM, false, ended},
		{"slot made ahead: Ctrl-C that killed its launcher ends the run", slotAhead, syscall.SIGINT, true, ended},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
			slots, id := tt.slots(t, session.SlotOptions{Registry: reg, SelfExe: self, NetNS: true})
			group := filepath.Join(cgroup2Mount(t), cgroup.DefaultParent, id)
			if tt.killLauncher {
				procs, err := os.ReadFile(filepath.Join(group, "cgroup.procs"))
				pids := strings.Fields(string(procs))
				if err != nil || len(pids) != 1 {
					t.Fatalf("the slot's group holds %q (%v), want its launcher", procs, err)
				}
				pid, _ := strconv.Atoi(pids[0])
				if err := syscall.Kill(pid, tt.sig); err != nil {
					t.Fatal(err)
				}
				waitGone(t, pid)
			}
			// The slot registered the signal for its session: this
			// process lives. The runtime hands a signal to every channel
			// registered for it in one pass: once seen here, the slot
			// has it too (a signal still on its way when the slot is
			// claimed is one that came after).
			seen := make(chan os.Signal, 1)
			signal.Notify(seen, tt.sig)
			if err := syscall.Kill(os.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			<-seen
			signal.Stop(seen)
			inR, inW, _ := os.Pipe()
			defer inW.Close()
			outR, outW, _ := os.Pipe()
			var out bytes.Buffer
			done := make(chan struct{})
			if tt.want == forwarded {
				// The command ends by the signal: its trap, or the
				// signal itself before the trap is set. Its read is not
				// ended for it, since the signal may reach it only after
				// "ready" (forwarded once the command runs); a signal
				// that never comes ends the read after this long (a
				// bound on a hang, not a measure: the run then fails).
				stop := time.AfterFunc(time.Minute, func() { inW.Close() })
				defer stop.Stop()
			}
			go func() {
				defer close(done)
				buf := make([]byte, 256)
				for {
					n, err := outR.Read(buf)
					out.Write(buf[:n])
					if tt.want != forwarded && strings.Contains(out.String(), "ready\n") {
						inW.Close() // the command's read returns: it ends
					}
					if err != nil {
						return
					}
				}
			}()
			var timing bytes.Buffer
			code, err := session.Run(context.Background(), session.RunOptions{
				Policy: compiledFor(t, e),
				Argv:   []string{"sh", "-c", `trap 'echo USR1; exit 7' USR1; echo ready; read x; echo done`},
				Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
				Dir:    e.ws, SelfExe: self, Registry: reg, Slots: slots,
				Stdin: inR, Stdout: outW, Stderr: outW, Timing: phasetime.New(&timing),
			})
			inR.Close()
			outW.Close()
			<-done
			switch tt.want {
			case ended:
				var ee *session.ExecError
				if !errors.As(err, &ee) || ee.Code != 128+int(tt.sig) || out.Len() != 0 {
					t.Errorf("Run: code %d, %v, output %q; want an ExecError with %d and nothing run", code, err, out.String(), 128+int(tt.sig))
				}
				if _, err := os.Stat(group); err == nil {
					t.Errorf("the slot's group %s is left after the run ended", group)
				}
				return
			case forwarded:
				if err != nil || (code != 7 && code != 128+int(tt.sig)) {
					t.Errorf("Run: code %d, %v, output %q; want the command to get %v (7 from its trap, or %d)", code, err, out.String(), tt.sig, 128+int(tt.sig))
				}
			case dropped:
				if err != nil || code != 0 || out.String() != "ready\ndone\n" {
					t.Errorf("Run: code %d, %v, output %q; want 0 and ready, done (no %v)", code, err, out.String(), tt.sig)
				}
			}
			if !strings.Contains(timing.String(), "slot claimed") {
				t.Errorf("the session did not claim the slot:\n%s", timing.String())
			}
		})
	}
}

// waitGone waits until pid has exited (a zombie counts: nothing reaps
// the slot's launcher before its supervisor's Close).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	// A liveness bound, not a speed assertion.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
	}
	t.Fatalf("process %d did not exit", pid)
}
