package policy

import "slices"

// Capability is a Linux capability a session keeps although sessions
// otherwise run with none, root included (DESIGN §9).
type Capability struct {
	// Name is the capability's name as in capabilities(7), "CAP_CHOWN".
	Name string `json:"name"`
	// Reason says what the session can do with it, for `policy show`.
	Reason string `json:"reason"`
	// Source is the file:line that asked for it.
	Source string `json:"source,omitempty"`
}

// grantableCapabilities are the only capabilities sandbox.capabilities
// accepts, each with what it lets a session do. Every other capability
// undoes a layer (CAP_SYS_ADMIN remounts, CAP_BPF and CAP_SYS_MODULE load
// kernel code, CAP_SYS_PTRACE reaches processes outside the session,
// CAP_DAC_READ_SEARCH opens files by handle past the mounts, CAP_NET_ADMIN
// changes the host's firewall, ...) and no policy can grant it.
var grantableCapabilities = []Capability{
	{Name: "CAP_CHOWN", Reason: "change the owner of files in the writable roots"},
	{Name: "CAP_DAC_OVERRIDE", Reason: "read and write files whatever their permission bits say (Landlock and the read-only view still apply)"},
	{Name: "CAP_FOWNER", Reason: "change the mode and times of files the session's user does not own"},
	{Name: "CAP_FSETID", Reason: "keep set-user-ID bits when changing files of other users"},
	{Name: "CAP_KILL", Reason: "signal processes of other users (within the session's own Landlock signal scope)"},
	{Name: "CAP_SETUID", Reason: "switch to another user inside the session (su, package builds)"},
	{Name: "CAP_SETGID", Reason: "switch to another group inside the session"},
	{Name: "CAP_NET_BIND_SERVICE", Reason: "bind TCP and UDP ports below 1024"},
	{Name: "CAP_NET_RAW", Reason: "open raw and packet sockets (only with network = \"full\": seccomp refuses them otherwise)"},
	{Name: "CAP_IPC_LOCK", Reason: "lock memory (mlock) beyond RLIMIT_MEMLOCK"},
	{Name: "CAP_SYS_NICE", Reason: "raise scheduling priority"},
	{Name: "CAP_SYS_RESOURCE", Reason: "exceed resource limits (the session cgroup's limits still apply)"},
	{Name: "CAP_AUDIT_WRITE", Reason: "write user records to the kernel audit log (login tools)"},
}

func capabilityNames() []string {
	names := make([]string, len(grantableCapabilities))
	for i, c := range grantableCapabilities {
		names[i] = c.Name
	}
	return names
}

// compileCapabilities turns sandbox.capabilities into Capabilities, in the
// order of grantableCapabilities, each with the source that asked for it.
func compileCapabilities(m *merged) []Capability {
	s := m.get("sandbox.capabilities")
	asked := s.val.([]string)
	var out []Capability
	for _, c := range grantableCapabilities {
		if i := slices.Index(asked, c.Name); i >= 0 {
			c.Source = s.elemSource(i)
			out = append(out, c)
		}
	}
	return out
}

// CapabilityNames lists the names of c.Capabilities.
func (c *Compiled) CapabilityNames() []string {
	var out []string
	for _, cp := range c.Capabilities {
		out = append(out, cp.Name)
	}
	return out
}
