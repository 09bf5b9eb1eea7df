// Package planner is where a session's layers are decided: one pure
// function, Decide, from a compiled policy, the machine's Capabilities and
// the caller's Options to the Plan of layers the session gets — each
// required, optional or absent, with the fallback that replaces a missing
// one and the warning that says so — or the refusal naming the layer that
// cannot be built (attach of a policy with filesystem rules without
// BPF-LSM unless Options.NetworkOnly, the CLI's --network-only). `oxsupervise run`, `attach` and the daemon all call it, and
// package session builds exactly what the plan says; no other package
// decides whether a policy needs a layer or what to warn when it is
// missing.
//
// Deciding is separate from probing. Capabilities are measured once per
// command (or once per daemon start) by Probe and by the enforcement host
// (package host), which reports whether it holds the BPF-LSM filesystem
// programs and the cgroup network programs. Wants tells the host which BPF
// layers a policy would use, so a command loads only those. Because Decide
// reads nothing but its arguments, its table test covers every
// combination of capabilities and policy without a kernel.
//
// The plan also says where refusals are read from: the BPF layers report
// through their ring buffer, while Landlock (at the audit ABI) and seccomp
// report only to the kernel audit feed, which the session then follows
// (Plan.KernelAudit).
//
// The layers, in the order they are built:
//
//	cgroup             required always (containment, the key of every BPF map)
//	bpf-lsm            filesystem rules by inode ancestry, when the host has it
//	landlock-abiN      filesystem rules from inside; stacked on bpf-lsm (optional)
//	                   or the filesystem layer itself (required)
//	mount-namespace    run only: the read-only view, masks, private /tmp
//	seccomp            run only: the launcher's syscall filter
//	network            cgroup BPF connect/sendmsg rules
//	network-namespace  run only: network "none" without the network layer
package planner
