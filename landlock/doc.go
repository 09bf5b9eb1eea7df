// Package landlock owns the planning of oxsupervise's Landlock filesystem
// layer for `run`: it turns a compiled policy into a Landlock ruleset
// (writable roots, reads everywhere except deny-read anchors, device files,
// signal and abstract-unix scoping) and into the plan of the private mount
// namespace that makes existing protected subpaths read-only and keeps
// cgroupfs, bpffs, /proc/sys and /sys unwritable. Both are package
// launcher's types (launcher.Ruleset, launcher.MountPlan), which the session
// launcher applies on itself right before exec: this package is the side
// that reads the policy, that one the side that talks to the kernel, so the
// launcher program links no policy code.
//
// Without BPF-LSM that namespace is also a read-only view: every mount
// read-only except the writable directories (WritableDirs), so the
// metadata changes Landlock has no right for (chmod, chown, utimes) fail
// with EROFS outside them; so does every other change there, before
// Landlock is asked, which is why those refusals are not audited.
//
// Landlock is the filesystem layer when BPF-LSM is unavailable and defence
// in depth when it is. Two limits shape this package and are stated where
// they matter:
//   - Landlock only grants; it cannot deny below a granted directory. Deny
//     reads are therefore expressed by granting read on every sibling along
//     the path to each denied anchor, never on the anchor itself.
//   - Landlock and bind mounts protect existing inodes only. A protected name
//     that does not exist when the session starts (a later `git init`, a
//     first `.claude/`) cannot be blocked without BPF-LSM, because
//     oxsupervise never creates placeholders on the host. The supervisor
//     moves such entries out after the fact (package quarantine).
package landlock
