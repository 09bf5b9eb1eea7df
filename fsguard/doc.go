// Package fsguard enforces a session's filesystem rules with BPF-LSM
// (DESIGN §3): it turns a policy.Compiled into the maps of the filesystem
// programs (anchors by (s_dev, inode), protected patterns as a
// bit-parallel NFA over component names), adds and removes sessions by
// cgroup id, and decodes the refusals the programs report.
//
// The programs are attached once (Load) and judge only tasks whose cgroup
// was added with AddSession; every other task is never affected.
package fsguard
