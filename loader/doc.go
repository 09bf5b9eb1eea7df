// Package loader loads oxsupervise's BPF objects into the kernel, attaches
// them, and probes which program types and hooks this kernel accepts.
package loader
