//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
	"unicode/utf16"
	"unsafe"

	xw "golang.org/x/sys/windows"

	"github.com/openoxide/oxsupervise/policy"
)

// Run confines argv according to c and returns its exit status. An error
// means the boundary could not be built and the command did not run (exit
// code -1), or that waiting for it failed. ACE changes are undone before
// Run returns, and by the next Run if this process dies first.
func Run(ctx context.Context, c *policy.Compiled, argv []string, cfg RunConfig) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("windows run: no command")
	}
	if cfg.Audit == nil {
		return -1, errors.New("windows run: an audit sink is required")
	}
	if cfg.JournalDir == "" {
		return -1, errors.New("windows run: no ACL journal directory")
	}
	stderr := cfg.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	recovered, err := RecoverStale(cfg.JournalDir, processAlive, revokeSID)
	if err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	for _, r := range recovered {
		if r.Err != nil {
			fmt.Fprintf(stderr, "oxsupervise: WARNING: could not fully undo ACL changes of crashed session %s (%s): %v\n", r.SessionID, r.Path, r.Err)
		} else {
			fmt.Fprintf(stderr, "oxsupervise: undid ACL changes left by crashed session %s\n", r.SessionID)
		}
	}

	plan, err := NewPlan(c, cfg.SessionID, Environment{Elevated: xw.GetCurrentProcessToken().IsElevated(), AllowDegraded: cfg.AllowDegraded})
	if err != nil {
		return -1, err
	}
	if err := plan.CheckStateDir(cfg.JournalDir); err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	for _, g := range plan.Missing() {
		fmt.Fprintf(stderr, "oxsupervise: WARNING: NOT ENFORCED on Windows: %s: %s\n", g.Name, g.Detail)
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(stderr, "oxsupervise: note: %s\n", n)
	}
	if err := cfg.Audit(plan.StartRecord(cfg.PolicyDigest)); err != nil {
		return -1, fmt.Errorf("windows run: write session_start record: %w", err)
	}

	start, err := selfStartTime()
	if err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	journal := NewJournal(plan, os.Getpid(), start, time.Now())
	journalPath := JournalPath(cfg.JournalDir, plan.SessionID)
	save := func(j *Journal) error { return j.Save(journalPath) }
	if err := save(journal); err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	undo := func() {
		if err := journal.Undo(revokeSID, save); err != nil {
			fmt.Fprintf(stderr, "oxsupervise: WARNING: ACL undo incomplete (journal %s kept for the next run): %v\n", journalPath, err)
			return
		}
		_ = os.Remove(journalPath)
	}
	defer undo()
	for i := range journal.Entries {
		e := &journal.Entries[i]
		orig, err := applyACE(e.ACE)
		if err != nil {
			return -1, fmt.Errorf("windows run: %s ACE on %s: %w", e.Kind, e.Path, err)
		}
		e.State, e.OriginalSDDL = StateApplied, orig
		if err := save(journal); err != nil {
			return -1, fmt.Errorf("windows run: %w", err)
		}
	}

	job, err := createJob(plan.Job)
	if err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	// Closing the job kills every process left in it (kill on close).
	defer xw.CloseHandle(job)

	proc, err := startSuspended(plan, argv, cfg)
	if err != nil {
		return -1, fmt.Errorf("windows run: %w", err)
	}
	defer xw.CloseHandle(proc.Process)
	defer xw.CloseHandle(proc.Thread)
	if err := xw.AssignProcessToJobObject(job, proc.Process); err != nil {
		_ = xw.TerminateProcess(proc.Process, 1)
		return -1, fmt.Errorf("windows run: assign process to job: %w", err)
	}
	if _, err := xw.ResumeThread(proc.Thread); err != nil {
		_ = xw.TerminateJobObject(job, 1)
		return -1, fmt.Errorf("windows run: resume: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = xw.TerminateJobObject(job, 1)
		case <-done:
		}
	}()
	if _, err := xw.WaitForSingleObject(proc.Process, xw.INFINITE); err != nil {
		_ = xw.TerminateJobObject(job, 1)
		return -1, fmt.Errorf("windows run: wait: %w", err)
	}
	var code uint32
	if err := xw.GetExitCodeProcess(proc.Process, &code); err != nil {
		return -1, fmt.Errorf("windows run: exit code: %w", err)
	}
	return int(code), nil
}

func selfStartTime() (int64, error) {
	var created, exited, kernel, user xw.Filetime
	if err := xw.GetProcessTimes(xw.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0, fmt.Errorf("own process times: %w", err)
	}
	return created.Nanoseconds(), nil
}

// processAlive reports whether the supervisor that wrote a journal still
// runs. A process we may not query is assumed alive: replaying a live
// session's journal would strip its grants mid-run.
func processAlive(pid int, start int64) bool {
	h, err := xw.OpenProcess(xw.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return errors.Is(err, xw.ERROR_ACCESS_DENIED)
	}
	defer xw.CloseHandle(h)
	var created, exited, kernel, user xw.Filetime
	if err := xw.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return true
	}
	var code uint32
	if err := xw.GetExitCodeProcess(h, &code); err == nil && code != 259 /* STILL_ACTIVE */ {
		return false
	}
	return created.Nanoseconds() == start
}

func notExist(err error) bool {
	return errors.Is(err, xw.ERROR_FILE_NOT_FOUND) || errors.Is(err, xw.ERROR_PATH_NOT_FOUND)
}

func daclFlags(sd *xw.SECURITY_DESCRIPTOR) xw.SECURITY_INFORMATION {
	info := xw.SECURITY_INFORMATION(xw.DACL_SECURITY_INFORMATION)
	if ctl, _, err := sd.Control(); err == nil && ctl&xw.SE_DACL_PROTECTED != 0 {
		return info | xw.PROTECTED_DACL_SECURITY_INFORMATION
	}
	return info | xw.UNPROTECTED_DACL_SECURITY_INFORMATION
}

// applyACE adds one ACE to path's DACL and returns the DACL it replaced.
func applyACE(a ACE) (string, error) {
	sd, err := xw.GetNamedSecurityInfo(a.Path, xw.SE_FILE_OBJECT, xw.DACL_SECURITY_INFORMATION)
	if err != nil {
		return "", fmt.Errorf("read DACL: %w", err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return "", fmt.Errorf("read DACL: %w", err)
	}
	sid, err := xw.StringToSid(a.SID)
	if err != nil {
		return "", fmt.Errorf("parse SID %s: %w", a.SID, err)
	}
	mode := xw.ACCESS_MODE(xw.GRANT_ACCESS)
	if a.Kind == ACEDeny {
		mode = xw.DENY_ACCESS
	}
	acl, err := xw.ACLFromEntries([]xw.EXPLICIT_ACCESS{{
		AccessPermissions: xw.ACCESS_MASK(a.Mask),
		AccessMode:        mode,
		Inheritance:       a.InheritFlags(),
		Trustee: xw.TRUSTEE{
			TrusteeForm:  xw.TRUSTEE_IS_SID,
			TrusteeType:  xw.TRUSTEE_IS_UNKNOWN,
			TrusteeValue: xw.TrusteeValueFromSID(sid),
		},
	}}, dacl)
	if err != nil {
		return "", fmt.Errorf("build DACL: %w", err)
	}
	if err := xw.SetNamedSecurityInfo(a.Path, xw.SE_FILE_OBJECT, daclFlags(sd), nil, nil, acl, nil); err != nil {
		return "", fmt.Errorf("write DACL: %w", err)
	}
	return sd.String(), nil
}

// revokeSID removes every explicit ACE for sid from path's DACL; the
// inherited copies below path vanish when the new DACL propagates.
func revokeSID(path, sid string) error {
	sd, err := xw.GetNamedSecurityInfo(path, xw.SE_FILE_OBJECT, xw.DACL_SECURITY_INFORMATION)
	if err != nil {
		if notExist(err) {
			return fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		return fmt.Errorf("read DACL: %w", err)
	}
	sddl, removed, _, err := dropExplicitACEs(sd.String(), sid)
	if err != nil {
		return err
	}
	if removed == 0 {
		return nil
	}
	nsd, err := xw.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("parse rewritten DACL: %w", err)
	}
	dacl, _, err := nsd.DACL()
	if err != nil {
		return fmt.Errorf("rewritten DACL: %w", err)
	}
	if err := xw.SetNamedSecurityInfo(path, xw.SE_FILE_OBJECT, daclFlags(sd), nil, nil, dacl, nil); err != nil {
		return fmt.Errorf("write DACL: %w", err)
	}
	return nil
}

func createJob(p JobPlan) (xw.Handle, error) {
	job, err := xw.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("create job object: %w", err)
	}
	var limits xw.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	limits.BasicLimitInformation.LimitFlags = p.LimitFlags
	limits.BasicLimitInformation.ActiveProcessLimit = p.ActiveProcessLimit
	limits.JobMemoryLimit = uintptr(p.JobMemoryLimit)
	if _, err := xw.SetInformationJobObject(job, xw.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&limits)), uint32(unsafe.Sizeof(limits))); err != nil {
		xw.CloseHandle(job)
		return 0, fmt.Errorf("set job limits: %w", err)
	}
	ui := xw.JOBOBJECT_BASIC_UI_RESTRICTIONS{UIRestrictionsClass: p.UIRestrictions}
	if _, err := xw.SetInformationJobObject(job, xw.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui))); err != nil {
		xw.CloseHandle(job)
		return 0, fmt.Errorf("set job UI restrictions: %w", err)
	}
	return job, nil
}

// tokenDefaultDACL is TOKEN_DEFAULT_DACL.
type tokenDefaultDACL struct {
	DefaultDacl *xw.ACL
}

// restrictedToken creates the session's primary token. x/sys/windows has
// no CreateRestrictedToken, so it is called through advapi32 directly.
func restrictedToken(p TokenPlan) (xw.Token, error) {
	var cur xw.Token
	if err := xw.OpenProcessToken(xw.CurrentProcess(),
		xw.TOKEN_DUPLICATE|xw.TOKEN_QUERY|xw.TOKEN_ASSIGN_PRIMARY|xw.TOKEN_ADJUST_DEFAULT, &cur); err != nil {
		return 0, fmt.Errorf("open own token: %w", err)
	}
	defer cur.Close()
	toSA := func(sids []string) ([]xw.SIDAndAttributes, error) {
		out := make([]xw.SIDAndAttributes, 0, len(sids))
		for _, s := range sids {
			sid, err := xw.StringToSid(s)
			if err != nil {
				return nil, fmt.Errorf("parse SID %s: %w", s, err)
			}
			out = append(out, xw.SIDAndAttributes{Sid: sid})
		}
		return out, nil
	}
	disable, err := toSA(p.DisableSIDs)
	if err != nil {
		return 0, err
	}
	restrict, err := toSA(p.RestrictingSIDs)
	if err != nil {
		return 0, err
	}
	ptr := func(s []xw.SIDAndAttributes) uintptr {
		if len(s) == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(&s[0]))
	}
	proc := xw.NewLazySystemDLL("advapi32.dll").NewProc("CreateRestrictedToken")
	if err := proc.Find(); err != nil {
		return 0, fmt.Errorf("find CreateRestrictedToken: %w", err)
	}
	var tok xw.Token
	r1, _, e1 := proc.Call(uintptr(cur), uintptr(p.Flags),
		uintptr(len(disable)), ptr(disable),
		0, 0,
		uintptr(len(restrict)), ptr(restrict),
		uintptr(unsafe.Pointer(&tok)))
	if r1 == 0 {
		return 0, fmt.Errorf("CreateRestrictedToken: %w", e1)
	}
	user, err := tok.GetTokenUser()
	if err != nil {
		tok.Close()
		return 0, fmt.Errorf("token user: %w", err)
	}
	sids := []*xw.SID{user.User.Sid}
	if system, err := xw.StringToSid("S-1-5-18"); err == nil {
		sids = append(sids, system)
	}
	for _, s := range p.DefaultDACLSIDs {
		sid, err := xw.StringToSid(s)
		if err != nil {
			tok.Close()
			return 0, fmt.Errorf("parse SID %s: %w", s, err)
		}
		sids = append(sids, sid)
	}
	var entries []xw.EXPLICIT_ACCESS
	for _, sid := range sids {
		entries = append(entries, xw.EXPLICIT_ACCESS{
			AccessPermissions: xw.GENERIC_ALL,
			AccessMode:        xw.GRANT_ACCESS,
			Trustee:           xw.TRUSTEE{TrusteeForm: xw.TRUSTEE_IS_SID, TrusteeType: xw.TRUSTEE_IS_UNKNOWN, TrusteeValue: xw.TrusteeValueFromSID(sid)},
		})
	}
	acl, err := xw.ACLFromEntries(entries, nil)
	if err != nil {
		tok.Close()
		return 0, fmt.Errorf("build default DACL: %w", err)
	}
	info := tokenDefaultDACL{DefaultDacl: acl}
	if err := xw.SetTokenInformation(tok, xw.TokenDefaultDacl, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		tok.Close()
		return 0, fmt.Errorf("set default DACL: %w", err)
	}
	return tok, nil
}

// envBlock encodes env as a CREATE_UNICODE_ENVIRONMENT block.
func envBlock(env []string) *uint16 {
	if env == nil {
		return nil
	}
	var block []uint16
	for _, kv := range env {
		block = append(block, utf16.Encode([]rune(kv))...)
		block = append(block, 0)
	}
	if len(env) == 0 {
		block = append(block, 0)
	}
	block = append(block, 0)
	return &block[0]
}

func stdHandle(v any, fallback *os.File) (*os.File, error) {
	switch f := v.(type) {
	case nil:
		return fallback, nil
	case *os.File:
		return f, nil
	default:
		return nil, fmt.Errorf("stdio of type %T is not a file", v)
	}
}

// startSuspended creates the command's process, suspended so it can be put
// into the job before it can start anything that might escape it. Only
// the three stdio handles are inherited.
func startSuspended(plan *Plan, argv []string, cfg RunConfig) (*xw.ProcessInformation, error) {
	var files [3]*os.File
	var err error
	if files[0], err = stdHandle(cfg.Stdin, os.Stdin); err != nil {
		return nil, err
	}
	if files[1], err = stdHandle(cfg.Stdout, os.Stdout); err != nil {
		return nil, err
	}
	if files[2], err = stdHandle(cfg.Stderr, os.Stderr); err != nil {
		return nil, err
	}
	self := xw.CurrentProcess()
	handles := make([]xw.Handle, 0, 3)
	defer func() {
		for _, h := range handles {
			xw.CloseHandle(h)
		}
	}()
	for _, f := range files {
		var dup xw.Handle
		if err := xw.DuplicateHandle(self, xw.Handle(f.Fd()), self, &dup, 0, true, xw.DUPLICATE_SAME_ACCESS); err != nil {
			return nil, fmt.Errorf("duplicate stdio handle: %w", err)
		}
		handles = append(handles, dup)
	}
	attrs, err := xw.NewProcThreadAttributeList(1)
	if err != nil {
		return nil, fmt.Errorf("attribute list: %w", err)
	}
	defer attrs.Delete()
	if err := attrs.Update(xw.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&handles[0]), uintptr(len(handles))*unsafe.Sizeof(handles[0])); err != nil {
		return nil, fmt.Errorf("handle list: %w", err)
	}
	si := xw.StartupInfoEx{ProcThreadAttributeList: attrs.List()}
	si.Cb = uint32(unsafe.Sizeof(si))
	si.Flags = xw.STARTF_USESTDHANDLES
	si.StdInput, si.StdOutput, si.StdErr = handles[0], handles[1], handles[2]

	cmdline, err := xw.UTF16PtrFromString(xw.ComposeCommandLine(argv))
	if err != nil {
		return nil, fmt.Errorf("command line: %w", err)
	}
	var dir *uint16
	if cfg.Dir != "" {
		if dir, err = xw.UTF16PtrFromString(cfg.Dir); err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
	}
	flags := uint32(xw.CREATE_SUSPENDED | xw.CREATE_UNICODE_ENVIRONMENT | xw.EXTENDED_STARTUPINFO_PRESENT)
	pi := new(xw.ProcessInformation)
	if plan.Token.Restricted {
		tok, err := restrictedToken(plan.Token)
		if err != nil {
			return nil, err
		}
		defer tok.Close()
		err = xw.CreateProcessAsUser(tok, nil, cmdline, nil, nil, true, flags, envBlock(cfg.Env), dir, &si.StartupInfo, pi)
		if err != nil {
			return nil, fmt.Errorf("start %s with restricted token: %w", argv[0], err)
		}
		return pi, nil
	}
	if err := xw.CreateProcess(nil, cmdline, nil, nil, true, flags, envBlock(cfg.Env), dir, &si.StartupInfo, pi); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	return pi, nil
}
