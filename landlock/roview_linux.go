//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
)

// WritableDirs are the directories a session may write below: the policy's
// existing writable roots and, in workspace-write mode, /dev/shm (POSIX
// shared memory and semaphores, which Python's multiprocessing locks use).
// Missing roots are returned apart, for the caller's warning. Landlock
// grants writes below exactly these, and the read-only view keeps exactly
// these writable: one list for both layers.
func WritableDirs(c *policy.Compiled) (dirs, missing []string) {
	if !c.FilesystemRules {
		return nil, nil
	}
	for _, a := range c.WritableRoots {
		if !a.Exists {
			missing = append(missing, a.Path)
			continue
		}
		dirs = append(dirs, a.Path)
	}
	if c.Mode == policy.ModeWorkspaceWrite {
		if fi, err := os.Lstat(launcher.DevShm); err == nil && fi.IsDir() && !slices.Contains(dirs, launcher.DevShm) {
			dirs = append(dirs, launcher.DevShm)
		}
	}
	return dirs, missing
}

// viewWritable is what stays writable at the mount level in the read-only
// view: WritableDirs, and the directory holding each writable root that is
// a file. Such a file's writers create a temporary file beside it and
// rename it over the file (Claude Code's ~/.claude.json), and fall back to
// writing it in place only when the kernel refuses the temporary file
// with EACCES or EPERM, not with EROFS: in that directory Landlock stays
// the refusing layer (EACCES, audited) for every create, write, rename and
// unlink but the file's own write. What the view no longer stops there is
// a metadata change (chmod, utimes) of another entry in that directory;
// the BPF-LSM path refuses those too.
func viewWritable(c *policy.Compiled) []string {
	dirs, _ := WritableDirs(c)
	out := append([]string(nil), dirs...)
	for _, a := range c.WritableRoots {
		if a.Exists && !a.Dir {
			out = append(out, filepath.Dir(a.Path))
		}
	}
	return out
}

// privateShm reports whether the session gets a /dev/shm of its own: in
// every mode with filesystem rules, unless the policy lists /dev/shm as a
// writable root (sharing the host's shared memory on purpose). Through
// the host's /dev/shm a session could otherwise reach the POSIX shared
// memory and semaphores of the user's other programs.
func privateShm(c *policy.Compiled) bool {
	if !c.FilesystemRules {
		return false
	}
	for _, a := range c.WritableRoots {
		if a.Path == launcher.DevShm {
			return false
		}
	}
	fi, err := os.Lstat(launcher.DevShm)
	return err == nil && fi.IsDir()
}

// PrivateShmWritable reports whether c's session gets a /dev/shm of its
// own that it may write (PlanMounts' PrivateShm without ShmReadOnly).
func PrivateShmWritable(c *policy.Compiled) bool {
	return c.Mode != policy.ModeFullAccess && privateShm(c) && slices.Contains(viewWritable(c), launcher.DevShm)
}
