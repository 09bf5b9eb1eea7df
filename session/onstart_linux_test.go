//go:build linux

package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/session"
)

// RunOptions.OnStart is called exactly once, with the session's id and
// cgroup, while the group exists and before the command has run; it adds
// no layer to the session's record.
func TestRunOnStart(t *testing.T) {
	e, self := runEnv(t)
	reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
	marker := filepath.Join(e.ws, "ran.txt")
	var calls []session.SessionInfo
	var groupExisted, ranBefore bool
	var entry session.Entry
	code, err := session.Run(context.Background(), session.RunOptions{
		Policy: compiledFor(t, e),
		Argv:   []string{"sh", "-c", `grep '^0::' /proc/self/cgroup > ran.txt`},
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
		Dir:    e.ws, SelfExe: self, Registry: reg,
		OnStart: func(info session.SessionInfo) {
			calls = append(calls, info)
			_, err := os.Stat(info.CgroupPath)
			groupExisted = err == nil
			ranBefore = exists(marker)
			entry, _ = reg.Get(info.ID)
		},
	})
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, %v", code, err)
	}
	if len(calls) != 1 {
		t.Fatalf("OnStart called %d times, want once", len(calls))
	}
	info := calls[0]
	if !groupExisted || info.CgroupID == 0 || info.Policy == nil {
		t.Errorf("OnStart saw %+v, group existed %v", info, groupExisted)
	}
	if ranBefore {
		t.Error("the command had already run when OnStart was called")
	}
	if got := strings.TrimSpace(mustRead(t, marker)); !strings.HasSuffix(got, "/"+info.ID) {
		t.Errorf("command ran in %q, want the session %s OnStart was given", got, info.ID)
	}
	if entry.ID != info.ID || entry.CgroupID != info.CgroupID {
		t.Errorf("registry entry at OnStart %+v, want id %s cgroup %d", entry, info.ID, info.CgroupID)
	}
	for _, l := range entry.Layers {
		if l == "daemon" {
			t.Errorf("layers %v: the start callback is not a layer", entry.Layers)
		}
	}
}
