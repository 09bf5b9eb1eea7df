package doctor

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// LandlockScopeABI is the first Landlock ABI that scopes abstract unix
// sockets (and signals) to the session: Linux 6.12.
const LandlockScopeABI = 6

// Limit is one thing sessions on this machine's layers cannot hold as
// the policy says, or hold by other means, with what oxsupervise does
// instead. Every limit follows from the probes (the filesystem layer,
// the Landlock ABI, BPF-LSM), never from which host doctor runs on.
type Limit struct {
	// Subject is what the limit is about: "pathname unix sockets",
	// "abstract unix sockets", "attach".
	Subject string `json:"subject"`
	// Holds is false where the policy's rule is not enforced as written.
	Holds  bool   `json:"holds"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// limits states, for the filesystem layer run would use, what it cannot
// hold and what replaces it, and what attach does here.
func (r *Report) limits(bpf Layer) []Limit {
	var out []Limit
	switch r.Verdict.Filesystem {
	case LayerLandlock:
		out = append(out, Limit{Subject: "pathname unix sockets", Status: "NOT refused",
			Detail: fmt.Sprintf("Landlock (ABI %d) has no right for connect(2) on a pathname socket, and a mount namespace "+
				"does not cover AF_UNIX: a session can connect to a socket outside the writable roots; the session's mount "+
				"namespace hides only the well-known ones whose servers act outside the session (systemd, D-Bus, docker, "+
				"containerd, podman, gpg and ssh agents, keyrings) unless network.allow_unix_sockets lists them", r.Landlock.ABI)})
		if r.Landlock.ABI >= LandlockScopeABI {
			out = append(out, Limit{Subject: "abstract unix sockets", Holds: true, Status: "scoped",
				Detail: fmt.Sprintf("Landlock ABI %d scopes them: a session cannot connect to an abstract socket bound outside it", r.Landlock.ABI)})
		} else {
			out = append(out, Limit{Subject: "abstract unix sockets", Status: "NOT refused",
				Detail: fmt.Sprintf("Landlock scopes them from ABI %d (Linux 6.12); below it (ABI %d here) a session can connect to "+
					"an abstract socket bound outside it (on a desktop @/tmp/.X11-unix/X0 is the user's display)", LandlockScopeABI, r.Landlock.ABI)})
		}
	case LayerBPFLSM:
		out = append(out, Limit{Subject: "pathname unix sockets", Holds: true, Status: "refused outside the roots",
			Detail: "BPF-LSM judges connect(2) and sendto(2) on a pathname socket like a write to its inode: a socket outside " +
				"the writable roots is refused (EACCES, audited) unless network.allow_unix_sockets lists it"})
		out = append(out, Limit{Subject: "abstract unix sockets", Holds: true, Status: "refused outside the session",
			Detail: "BPF-LSM judges the peer: an abstract socket created outside the session (and the sessions nested in it) " +
				"is refused (EPERM, audited) whatever the Landlock ABI"})
	}
	if bpf.Available {
		out = append(out, Limit{Subject: "attach", Holds: true, Status: "filesystem rules held",
			Detail: "BPF-LSM holds a running process to the policy's filesystem rules"})
	} else {
		out = append(out, Limit{Subject: "attach", Status: "refused without bpf-lsm",
			Detail: "a running process cannot enter Landlock or a mount namespace, so attach refuses a policy with filesystem rules " +
				"(exit 125, nothing moved) unless --network-only accepts its network rules and cgroup containment alone; " +
				"external-sandbox and full-access have no filesystem rules and attach as they are (fix: " + bpf.Fix + ")"})
	}
	return out
}

// writeLimits prints the limits below the verdict of the text report.
func (r *Report) writeLimits(w io.Writer) error {
	if len(r.Verdict.Limits) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nlimit\tstatus\tdetail")
	for _, l := range r.Verdict.Limits {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Subject, l.Status, l.Detail)
	}
	return tw.Flush()
}
