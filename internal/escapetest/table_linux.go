//go:build linux

package escapetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/shquote"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// Row is one attack: the shell commands the session runs (each prints
// one result: OK, an errno name, or what capeff prints), and what the
// path the session took must answer.
type Row struct {
	Class, Name string
	Steps       []string
	Want        func(k Kernel, s Session, w *World) Want
}

// Session is what the run of the table said about itself: its id and
// layers (session_start) and its warnings (stderr), which are how run
// states what a path does not guarantee.
type Session struct {
	ID, Layers, Stderr string
}

// Want is a row's expectation on one path.
type Want struct {
	// Results holds, per step, the results that pass.
	Results [][]string
	// State checks the files afterwards; nil when the row changes none.
	State func(w *World) error
	// Audit are the records that must be in the session's log (each
	// matches a record of its own).
	Audit []Record
	// Unaudited are records that must NOT be in the session's log, each
	// with why none is expected; a matching record fails the row.
	Unaudited []Unaudited
	// Said and Unsaid are statements run must, or must not, make on
	// stderr: the guarantee a result rests on.
	Said, Unsaid []string
	// Skip, when set, is why the row cannot run here (reported loudly).
	Skip string
}

// Record is one audit record a refusal must leave. Empty fields (and a
// zero Errno) are not compared. With Related, a record of Path, of an
// entry above it or of one below it matches (the quarantine moves the
// protected entry it sees first).
type Record struct {
	Layer   audit.Layer
	Action  string
	Class   audit.Class
	Errno   unix.Errno
	Path    string
	Related bool
}

// Unaudited is a refusal that leaves no record, and why it does not.
type Unaudited struct {
	Record
	Why string
}

func (r Record) String() string {
	return fmt.Sprintf("%s %s %s errno %d %s", r.Layer, r.Action, r.Class, r.Errno, r.Path)
}

// What run says about the boundaries a path lacks (planner.decideRun,
// landlock.Plan): the rows that rest on them quote them.
const (
	pathSocketsNotBlocked = "connections to pathname unix sockets outside writable roots are NOT blocked"
	noAbstractScoping     = "no signal or abstract-unix-socket scoping"
	ownNetNS              = "network none is enforced with an empty network namespace"
	roViewUnaudited       = "EROFS refusals are not audited"
)

var opFlag = testutil.OpArgs(OpName)[0]

// op is the shell command that performs one step with Op; a word
// beginning with "$" is left for the shell to expand.
func op(args ...string) string {
	words := []string{`"$SELF"`, shquote.Quote(opFlag)}
	for _, a := range args {
		if strings.HasPrefix(a, "$") {
			words = append(words, `"`+a+`"`)
		} else {
			words = append(words, shquote.Quote(a))
		}
	}
	return strings.Join(words, " ")
}

// shell is a step that runs a real tool, whose errno is not the point:
// it prints OK or FAIL.
func shell(script string) string {
	return "(" + script + ") >/dev/null 2>&1 && echo OK || echo FAIL"
}

func one(results ...string) []string { return results }

// Rows is the table, with w's paths.
func Rows(w *World) []Row {
	var rows []Row
	rows = append(rows, metadataRows(w)...)
	rows = append(rows, capabilityRows(w)...)
	rows = append(rows, socketRows()...)
	rows = append(rows, protectedRows(w)...)
	rows = append(rows, unixRows(w)...)
	rows = append(rows, shmRows(w)...)
	rows = append(rows, cacheRows(w)...)
	rows = append(rows, cgroupRows(w)...)
	return rows
}

// metadataRows: chmod, chown and utimes of a file in another directory
// and in /etc, which Landlock has no right for: the read-only view
// refuses them with EROFS, BPF-LSM's path_chmod, path_chown and
// inode_setattr with EACCES. The same changes in the workspace succeed.
func metadataRows(w *World) []Row {
	var rows []Row
	for _, target := range []struct{ name, path string }{{"outside", w.Victim}, {"etc", w.Etc}} {
		for _, m := range []struct{ op, bpfAction string }{{"chmod", "chmod"}, {"chown", "chown"}, {"utimes", "setattr"}} {
			path, m := target.path, m
			rows = append(rows, Row{Class: "metadata", Name: m.op + "-" + target.name, Steps: []string{op(m.op, path)},
				Want: func(k Kernel, s Session, w *World) Want {
					want := Want{State: func(w *World) error { return w.unchanged(path) }}
					if k.Path == PathBPFLSM {
						want.Results = [][]string{one("EACCES")}
						want.Audit = []Record{bpfFile(m.bpfAction, path)}
						return want
					}
					want.Results = [][]string{one("EROFS")}
					want.Audit = roView(s, m.op, path)
					return want
				}})
		}
	}
	own := filepath.Join(w.WS, "own.txt")
	rows = append(rows, Row{Class: "metadata", Name: "chmod-utimes-workspace", Steps: []string{op("chmod", own), op("utimes", own)},
		Want: func(Kernel, Session, *World) Want {
			return Want{Results: [][]string{one("OK"), one("OK")}, State: func(*World) error {
				fi, err := os.Stat(own)
				if err != nil || fi.Mode().Perm() != 0o777 || fi.ModTime().Unix() != 1 {
					return fmt.Errorf("%s after chmod and utimes in the session: %v, %v; want mode 0777, mtime 1", own, fi, err)
				}
				return nil
			}}
		}})
	return rows
}

// capabilityRows: a root session has no capabilities (the policy names
// none), so what root could do is refused. mknod of a device is
// Landlock's first (no make_char right in a writable root) and the
// capability check's on BPF-LSM. Capability checks leave no audit record.
func capabilityRows(w *World) []Row {
	own := filepath.Join(w.WS, "own-caps.txt")
	dev := filepath.Join(w.WS, "devnull")
	return []Row{
		{Class: "capabilities", Name: "capeff-zero", Steps: []string{op("capeff")},
			Want: func(Kernel, Session, *World) Want {
				return Want{Results: [][]string{one("0000000000000000")}}
			}},
		{Class: "capabilities", Name: "setuid-other", Steps: []string{op("setuid", "65534")},
			Want: func(Kernel, Session, *World) Want { return Want{Results: [][]string{one("EPERM")}} }},
		{Class: "capabilities", Name: "chown-own-file", Steps: []string{op("chown", own)},
			Want: func(Kernel, Session, *World) Want {
				return Want{Results: [][]string{one("EPERM")}, State: func(*World) error {
					var st unix.Stat_t
					if err := unix.Stat(own, &st); err != nil {
						return err
					}
					if st.Uid != 0 || st.Gid != 0 {
						return fmt.Errorf("%s owned by %d:%d after the refused chown, want 0:0", own, st.Uid, st.Gid)
					}
					return nil
				}}
			}},
		{Class: "capabilities", Name: "mknod-char-device", Steps: []string{op("mknod-char", dev)},
			Want: func(k Kernel, _ Session, _ *World) Want {
				res := "EPERM"
				if k.Path == PathLandlock {
					res = "EACCES"
				}
				return Want{Results: [][]string{one(res)}, State: gone(dev)}
			}},
	}
}

// socketRows, under network none: families the network layers cannot
// judge and raw sockets, refused by seccomp on the Landlock path and by
// BPF-LSM's socket_create (AF_PACKET) or the missing CAP_NET_RAW on the
// BPF-LSM path; io_uring_setup refused by seccomp on both (the filter
// always restricts TIOCSTI).
func socketRows() []Row {
	seccomp := func(k Kernel, action string, class audit.Class) []Record {
		if !k.SeccompAudited {
			return nil
		}
		return []Record{{Layer: audit.LayerSeccomp, Action: action, Class: class}}
	}
	return []Row{
		{Class: "sockets", Name: "af-packet", Steps: []string{op("socket", strconv.Itoa(unix.AF_PACKET), strconv.Itoa(unix.SOCK_RAW))},
			Want: func(k Kernel, _ Session, _ *World) Want {
				if k.Path == PathBPFLSM {
					return Want{Results: [][]string{one("EPERM")}, Audit: []Record{{Layer: audit.LayerBPFLSM, Action: "socket", Class: audit.ClassSelfProtection, Errno: unix.EPERM}}}
				}
				return Want{Results: [][]string{one("EAFNOSUPPORT")}, Audit: seccomp(k, "socket", audit.ClassNetwork)}
			}},
		// A raw socket names its protocol (with 0 the kernel answers
		// EPROTONOSUPPORT before any check): ping's ICMP.
		{Class: "sockets", Name: "inet-raw", Steps: []string{op("socket", strconv.Itoa(unix.AF_INET), strconv.Itoa(unix.SOCK_RAW), strconv.Itoa(unix.IPPROTO_ICMP))},
			Want: func(k Kernel, _ Session, _ *World) Want {
				if k.Path == PathBPFLSM {
					return Want{Results: [][]string{one("EPERM")}}
				}
				return Want{Results: [][]string{one("EPERM")}, Audit: seccomp(k, "socket", audit.ClassNetwork)}
			}},
		{Class: "sockets", Name: "io-uring-setup", Steps: []string{op("io_uring_setup")},
			Want: func(k Kernel, _ Session, _ *World) Want {
				why := "the filter that refuses clone3 is installed without SECCOMP_FILTER_FLAG_LOG: glibc tries clone3 first on every thread creation and spawn, so a record of each would flood the log with calls no program meant (launcher/seccomp_linux.go)"
				if !k.SeccompAudited {
					why += "; !!! this kernel audits no seccomp refusal at all, so the absence proves nothing here"
				}
				return Want{Results: [][]string{one("ENOSYS")}, Audit: seccomp(k, "io_uring_setup", audit.ClassSelfProtection)}
			}},
	}
}

// protectedRows: protected names that do not exist when the session
// starts, created during it. BPF-LSM refuses the creation by name
// (EACCES); on the Landlock path nothing can refuse a name, so each is
// moved to quarantine when it appears and none is left where it takes
// effect at the end (the steps after the first may find it gone).
func protectedRows(w *World) []Row {
	type p struct {
		name, entry string // entry: the protected entry, relative to the workspace
		steps       []string
		bpf         [][]string // results on BPF-LSM
		bpfAction   string
		gone        string // must not exist afterwards, when not entry
		// related: BPF-LSM's record may be of an entry below entry
		// (git init makes .git, then is refused .git/hooks).
		related bool
	}
	ws := func(rel string) string { return filepath.Join(w.WS, rel) }
	mkdirWrite := func(dir, file string) []string { return []string{op("mkdir", ws(dir)), op("write", ws(file))} }
	refusedDir := [][]string{one("EACCES"), one("ENOENT")}
	table := []p{
		{"claude-settings", ".claude", mkdirWrite(".claude", ".claude/settings.json"), refusedDir, "mkdir", "", false},
		{"codex-config", ".codex", mkdirWrite(".codex", ".codex/config.toml"), refusedDir, "mkdir", "", false},
		{"vscode-settings", ".vscode", mkdirWrite(".vscode", ".vscode/settings.json"), refusedDir, "mkdir", "", false},
		{"mcp-json", ".mcp.json", []string{op("write", ws(".mcp.json"))}, [][]string{one("EACCES")}, "create", "", false},
		{"envrc", ".envrc", []string{op("write", ws(".envrc"))}, [][]string{one("EACCES")}, "create", "", false},
		{"agents-md-subdir", "sub/AGENTS.md", []string{op("write", ws("sub/AGENTS.md"))}, [][]string{one("EACCES")}, "create", "", false},
		// Two steps, so that the config is tried whatever init did (a
		// half-made nested/.git sends git to the workspace's own
		// repository, checked below).
		{"git-init-fsmonitor", "nested/.git", []string{shell("git init -q nested"), shell("git -C nested config core.fsmonitor evil")},
			[][]string{one("FAIL"), one("FAIL")}, "mkdir", "nested/.git/config", true},
		{"rename-creates-name", "deep/.claude", []string{op("mkdir", ws("staging")), op("write", ws("staging/settings.json")), op("rename", ws("staging"), ws("deep/.claude"))},
			[][]string{one("OK"), one("OK"), one("EACCES")}, "rename", "", false},
		{"symlink-at-protected-name", ".openoxide", []string{op("symlink", "/elsewhere", ws(".openoxide"))}, [][]string{one("EACCES")}, "symlink", "", false},
	}
	var rows []Row
	for _, tc := range table {
		rows = append(rows, Row{Class: "protected-names", Name: tc.name, Steps: tc.steps,
			Want: func(k Kernel, s Session, w *World) Want {
				goneRel := tc.gone
				if goneRel == "" {
					goneRel = tc.entry
				}
				want := Want{State: func(w *World) error {
					if b, err := os.ReadFile(ws(".git/config")); err != nil || strings.Contains(string(b), "fsmonitor") {
						return fmt.Errorf("the workspace's .git/config after the session: %v\n%s", err, b)
					}
					return gone(ws(goneRel))(w)
				}}
				if k.Path == PathBPFLSM {
					want.Results = tc.bpf
					rec := bpfFile(tc.bpfAction, ws(tc.entry))
					rec.Related = tc.related
					want.Audit = []Record{rec}
					return want
				}
				// The quarantine moves a name when it appears: a step
				// after the one that made it may find it gone.
				made := false
				for _, step := range tc.steps {
					switch {
					case strings.HasPrefix(step, "("):
						want.Results = append(want.Results, one("OK", "FAIL"))
					case made:
						want.Results = append(want.Results, one("OK", "ENOENT"))
					default:
						want.Results = append(want.Results, one("OK"))
					}
					made = made || strings.Contains(step, shquote.Quote(ws(tc.entry)))
				}
				want.Audit = []Record{{Layer: audit.LayerQuarantine, Class: audit.ClassFile, Path: ws(tc.entry), Related: true}}
				return want
			}})
	}
	return rows
}

// unixRows: a pathname socket outside the roots (not a well-known one)
// and an abstract socket, both listened on by the test outside the
// session.
func unixRows(w *World) []Row {
	return []Row{
		{Class: "unix-sockets", Name: "pathname-outside", Steps: []string{op("unix-connect", w.PathSocket)},
			Want: func(k Kernel, s Session, w *World) Want {
				if k.Path == PathBPFLSM {
					// BPF-LSM's unix_stream_connect judges the socket's
					// inode like a write: outside the roots, refused;
					// run must not say otherwise.
					return Want{Results: [][]string{one("EACCES")}, Audit: []Record{bpfFile("unix_connect", w.PathSocket)},
						Unsaid: []string{pathSocketsNotBlocked}}
				}
				// Landlock has no right for connect(2) on a pathname
				// socket: run says so, and it is so.
				return Want{Results: [][]string{one("OK")}, Said: []string{pathSocketsNotBlocked}}
			}},
		{Class: "unix-sockets", Name: "abstract-outside", Steps: []string{op("unix-connect", w.AbstractSocket)},
			Want: func(k Kernel, s Session, w *World) Want {
				var want Want
				landlockScopes := k.abstractScoped() && strings.Contains(s.Layers, session.LayerLandlock)
				switch {
				case landlockScopes:
					want.Results = [][]string{one("EPERM")}
					if k.landlockAudits() {
						want.Audit = []Record{{Layer: audit.LayerLandlock, Action: "connect", Class: audit.ClassNetwork}}
					}
				case k.Path == PathBPFLSM:
					// The BPF programs judge the peer of
					// unix_stream_connect whatever the Landlock ABI.
					want.Results = [][]string{one("EACCES", "EPERM")}
					want.Audit = []Record{{Layer: audit.LayerBPFLSM, Action: "unix_connect"}}
				default:
					// Landlock below ABI 6: run says nothing scopes them.
					want.Results = [][]string{one("OK")}
					want.Said = []string{noAbstractScoping}
				}
				if strings.Contains(s.Stderr, ownNetNS) {
					// Abstract names live in a network namespace: an empty
					// one has none of the host's.
					want.Results = [][]string{one("ECONNREFUSED")}
					want.Audit, want.Said = nil, nil
				}
				return want
			}},
	}
}

// shmRows: the session's /dev/shm is its own (both paths build the mount
// namespace): the host's files are not there, the session's stay there.
func shmRows(w *World) []Row {
	if w.ShmHost == "" {
		skip := func(Kernel, Session, *World) Want { return Want{Skip: "no /dev/shm directory on this machine"} }
		return []Row{{Class: "dev-shm", Name: "read-host", Want: skip}, {Class: "dev-shm", Name: "write-own", Want: skip}}
	}
	return []Row{
		{Class: "dev-shm", Name: "read-host", Steps: []string{op("read", w.ShmHost)},
			Want: func(Kernel, Session, *World) Want {
				return Want{Results: [][]string{one("ENOENT")}, State: func(w *World) error {
					if b, err := os.ReadFile(w.ShmHost); err != nil || string(b) != "host secret\n" {
						return fmt.Errorf("%s after the session: %q, %v", w.ShmHost, b, err)
					}
					return nil
				}}
			}},
		{Class: "dev-shm", Name: "write-own", Steps: []string{op("write", w.ShmSession)},
			Want: func(Kernel, Session, *World) Want {
				return Want{Results: [][]string{one("OK")}, State: gone(w.ShmSession)}
			}},
	}
}

// cacheRows: the user's own Go build cache is outside the writable roots
// (refused like any file there), while the session's GOCACHE is a cache
// of its own that takes the write.
func cacheRows(w *World) []Row {
	poison := filepath.Join(w.UserCache, "poison")
	return []Row{{Class: "caches", Name: "go-build-user-cache", Steps: []string{op("write", poison), op("mkdir", "$GOCACHE"), op("write", "$GOCACHE/poison")},
		Want: func(k Kernel, s Session, w *World) Want {
			want := Want{State: func(w *World) error {
				if _, err := os.Lstat(poison); !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("%s is in the user's cache after the session (%v)", poison, err)
				}
				if b, err := os.ReadFile(filepath.Join(w.UserCache, "README")); err != nil || string(b) != "the user's own cache\n" {
					return fmt.Errorf("the user's cache changed: %q, %v", b, err)
				}
				return nil
			}}
			own := []string{"OK", "EEXIST"}
			if k.Path == PathBPFLSM {
				want.Results = [][]string{one("EACCES"), own, one("OK")}
				want.Audit = []Record{bpfFile("create", poison)}
				return want
			}
			want.Results = [][]string{one("EROFS"), own, one("OK")}
			want.Audit = roView(s, "open", poison)
			return want
		}}}
}

// cgroupRows: a uid 0 session leaving its cgroup without writing
// cgroup.procs (which the filesystem layers refuse: session's
// TestRunWorkspaceWrite, fsguard's TestKernelInterfacesNotWritable): clone3 with
// CLONE_INTO_CGROUP and an O_PATH descriptor of the cgroup2 root, which
// the kernel grants a root process without capabilities (the probe shows
// it, outside any session). The seccomp filter answers clone3 with ENOSYS
// on both paths, so there is no child, in the root or anywhere: no
// process with the op's marker lives after the session. An attached
// process has no seccomp filter; BPF-LSM's task_alloc refuses it there
// (session/fsvmtest's TestAttachRefusesCloneIntoCgroup).
func cgroupRows(w *World) []Row {
	return []Row{{Class: "cgroups", Name: "clone3-into-cgroup-root", Steps: []string{op("clone3-into-cgroup", w.Cgroup2, w.CloneMarker)},
		Want: func(k Kernel, _ Session, w *World) Want {
			if !k.movesIntoCgroup() {
				return Want{Skip: k.cloneIntoCgroupSkip()}
			}
			why := "the filter that refuses clone3 is installed without SECCOMP_FILTER_FLAG_LOG: glibc tries clone3 first on every thread creation and spawn, so a record of each would flood the log with calls no program meant (launcher/seccomp_linux.go)"
			if !k.SeccompAudited {
				why += "; !!! this kernel audits no seccomp refusal at all, so the absence proves nothing here"
			}
			return Want{Results: [][]string{one("ENOSYS")},
				State: func(w *World) error {
					pid, err := LiveProcessWith(w.CloneMarker)
					if err != nil {
						return err
					}
					if pid != 0 {
						cg, _ := cgroup.CgroupOf(pid)
						return fmt.Errorf("pid %d, the clone3 row's child, is alive after the session, in cgroup %s", pid, cg)
					}
					return nil
				},
				Unaudited: []Unaudited{{Record: Record{Layer: audit.LayerSeccomp, Action: "clone3"}, Why: why}},
			}
		}}}
}

func bpfFile(action, path string) Record {
	return Record{Layer: audit.LayerBPFLSM, Action: action, Class: audit.ClassFile, Errno: unix.EACCES, Path: path}
}

// roView is the read-only view's record of a refusal, unless run said
// its tracer could not be built.
func roView(s Session, action, path string) []Record {
	if strings.Contains(s.Stderr, roViewUnaudited) {
		return nil
	}
	return []Record{{Layer: audit.LayerReadOnlyView, Action: action, Class: audit.ClassFile, Errno: unix.EROFS, Path: path}}
}

func gone(p string) func(*World) error {
	return func(*World) error {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists after the session (%v)", p, err)
		}
		return nil
	}
}

// unchanged: p's mode, owner and times are what they were before the
// session.
func (w *World) unchanged(p string) error {
	before := w.before[p]
	var after unix.Stat_t
	if err := unix.Stat(p, &after); err != nil {
		return err
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim {
		return fmt.Errorf("%s changed: mode %o uid %d gid %d mtime %v; was %o %d %d %v",
			p, after.Mode, after.Uid, after.Gid, after.Mtim, before.Mode, before.Uid, before.Gid, before.Mtim)
	}
	return nil
}
