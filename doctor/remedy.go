package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/planner"
)

// Machine is what the remedies are computed from, read from the files of
// the machine doctor runs on (ReadMachine), never assumed from its
// distribution's defaults.
type Machine struct {
	// Distribution from /etc/os-release: ID ("ubuntu"), ID_LIKE, VERSION_ID
	// and PRETTY_NAME.
	ID         string `json:"id"`
	IDLike     string `json:"id_like,omitempty"`
	VersionID  string `json:"version_id,omitempty"`
	PrettyName string `json:"pretty_name,omitempty"`
	// Cmdline is /proc/cmdline (the kernel command line this boot used).
	Cmdline string `json:"cmdline"`
	// LSM is the active LSM order, /sys/kernel/security/lsm.
	LSM []string `json:"lsm"`
	// Boot is how this machine's kernel command line is configured:
	// grub (/etc/default/grub and grub.d drop-ins), grubby (Fedora and
	// RHEL's GRUB with BLS entries), kernelstub (Pop!_OS), systemd-boot
	// (/etc/kernel/cmdline or loader entries), or unknown.
	Boot string `json:"boot"`
	// GrubCmdlineDefault is GRUB_CMDLINE_LINUX_DEFAULT as /etc/default/grub
	// and then /etc/default/grub.d/*.cfg leave it (the last assignment
	// wins, as update-grub sources them); GrubFile is the file that set it.
	GrubCmdlineDefault string `json:"grub_cmdline_linux_default,omitempty"`
	GrubFile           string `json:"grub_file,omitempty"`
	// BootEntry is the systemd-boot file holding the kernel options
	// (/etc/kernel/cmdline, or a loader entry).
	BootEntry string `json:"boot_entry,omitempty"`
	// BootOptions is the options line of a loader entry (without
	// "options").
	BootOptions string `json:"boot_options,omitempty"`
	// RestrictUserns is kernel.apparmor_restrict_unprivileged_userns, or
	// nil where the kernel has no such setting.
	RestrictUserns *int `json:"apparmor_restrict_unprivileged_userns,omitempty"`
}

// Remedy is the exact change one missing layer needs on this machine.
type Remedy struct {
	// Layers are the layers the change enables (one lsm= line can enable
	// bpf-lsm and landlock together).
	Layers []string `json:"layers"`
	// Why says what is missing, in the machine's terms.
	Why string `json:"why"`
	// Steps are commands or file lines, in order, for root.
	Steps []string `json:"steps"`
}

// ReadMachine reads the distribution, kernel command line, LSM order, boot
// loader configuration and AppArmor setting under root ("/" normally; a
// fixture tree in tests). Missing files leave their fields empty.
func ReadMachine(root string) Machine {
	var m Machine
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return string(b)
	}
	exists := func(p string) bool {
		_, err := os.Stat(filepath.Join(root, p))
		return err == nil
	}
	osr := parseEnvFile(read("etc/os-release"))
	if len(osr) == 0 {
		osr = parseEnvFile(read("usr/lib/os-release"))
	}
	m.ID, m.IDLike, m.VersionID, m.PrettyName = osr["ID"], osr["ID_LIKE"], osr["VERSION_ID"], osr["PRETTY_NAME"]
	m.Cmdline = strings.TrimSpace(read("proc/cmdline"))
	if lsm := strings.TrimSpace(read("sys/kernel/security/lsm")); lsm != "" {
		m.LSM = strings.Split(lsm, ",")
	}
	if v, err := strconv.Atoi(strings.TrimSpace(read("proc/sys/kernel/apparmor_restrict_unprivileged_userns"))); err == nil {
		m.RestrictUserns = &v
	}

	if g := read("etc/default/grub"); g != "" {
		if v, ok := parseEnvFile(g)["GRUB_CMDLINE_LINUX_DEFAULT"]; ok {
			m.GrubCmdlineDefault, m.GrubFile = v, "/etc/default/grub"
		}
		dropins, _ := filepath.Glob(filepath.Join(root, "etc/default/grub.d/*.cfg"))
		sort.Strings(dropins)
		for _, d := range dropins {
			b, _ := os.ReadFile(d)
			if v, ok := parseEnvFile(string(b))["GRUB_CMDLINE_LINUX_DEFAULT"]; ok {
				// A drop-in usually extends the value: "$GRUB_CMDLINE_LINUX_DEFAULT x".
				m.GrubCmdlineDefault = strings.TrimSpace(strings.ReplaceAll(v, "$GRUB_CMDLINE_LINUX_DEFAULT", m.GrubCmdlineDefault))
				m.GrubFile = "/etc/default/grub.d/" + filepath.Base(d)
			}
		}
	}
	entries, _ := filepath.Glob(filepath.Join(root, "boot/loader/entries/*.conf"))
	if len(entries) == 0 {
		entries, _ = filepath.Glob(filepath.Join(root, "efi/loader/entries/*.conf"))
	}
	sort.Strings(entries)
	switch {
	case exists("etc/kernelstub/configuration"):
		m.Boot = "kernelstub"
	case exists("usr/sbin/grubby") || exists("usr/bin/grubby"):
		m.Boot = "grubby"
	case m.GrubFile != "" || exists("etc/default/grub"):
		m.Boot = "grub"
	case exists("etc/kernel/cmdline"):
		m.Boot, m.BootEntry = "systemd-boot", "/etc/kernel/cmdline"
	case len(entries) > 0:
		m.Boot, m.BootEntry = "systemd-boot", "/"+strings.TrimPrefix(strings.TrimPrefix(entries[0], root), "/")
		b, _ := os.ReadFile(entries[0])
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "options" {
				m.BootOptions = strings.Join(f[1:], " ")
			}
		}
	default:
		m.Boot = "unknown"
	}
	return m
}

// parseEnvFile reads KEY=value lines as os-release and /etc/default/grub
// write them (shell assignments, optionally quoted).
func parseEnvFile(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out
}

// like reports whether the machine is distribution id or derived from it.
func (m Machine) like(id string) bool {
	return m.ID == id || strings.Contains(" "+m.IDLike+" ", " "+id+" ")
}

// withLSMs is the lsm= value that keeps the machine's current order and
// appends the missing names.
func (m Machine) withLSMs(missing []string) string {
	order := append([]string{}, m.LSM...)
	for _, name := range missing {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	return "lsm=" + strings.Join(order, ",")
}

// replaceArg returns cmdline with every key=... argument replaced by arg
// (appended when there was none).
func replaceArg(cmdline, key, arg string) string {
	var out []string
	for _, f := range strings.Fields(cmdline) {
		if !strings.HasPrefix(f, key+"=") {
			out = append(out, f)
		}
	}
	return strings.Join(append(out, arg), " ")
}

// Remedies lists, for each layer the report finds missing for a reason
// the kernel command line can fix, the exact change on this machine; and
// the AppArmor user-namespace setting where it applies.
func Remedies(m Machine, r *Report) []Remedy {
	var missing, layers []string
	for _, l := range r.Layers {
		switch {
		case l.Name == LayerBPFLSM && !l.Available && r.Root && r.LSM.Error == "" && !slices.Contains(r.LSM.Active, "bpf"):
			missing, layers = append(missing, "bpf"), append(layers, LayerBPFLSM)
		case l.Name == LayerLandlock && !l.Available && r.Landlock.Errno == "EOPNOTSUPP":
			missing, layers = append(missing, "landlock"), append(layers, LayerLandlock)
		}
	}
	var out []Remedy
	if len(missing) > 0 {
		out = append(out, m.lsmRemedy(missing, layers))
	}
	if m.RestrictUserns != nil && *m.RestrictUserns == 1 && slices.Contains(m.LSM, "apparmor") {
		out = append(out, Remedy{
			Layers: []string{},
			Why: "kernel.apparmor_restrict_unprivileged_userns = 1: unprivileged user namespaces need an AppArmor profile. " +
				"oxsupervise's own boundary does not need them (the daemon builds sessions as root), but an agent's own sandbox " +
				"inside a session (bubblewrap, as Claude Code's sandbox uses) fails with EPERM; keep the setting and let the " +
				"oxsupervise boundary confine the agent, or give that tool an AppArmor profile with \"userns,\"",
			Steps: []string{
				"sysctl kernel.apparmor_restrict_unprivileged_userns   # 1 here; Ubuntu 23.10 and later default",
				"cat /etc/apparmor.d/bwrap-userns-restrict   # Ubuntu 24.04's profile for bwrap, if installed",
			},
		})
	}
	return out
}

func (m Machine) lsmRemedy(missing, layers []string) Remedy {
	lsm := m.withLSMs(missing)
	rem := Remedy{
		Layers: layers,
		Why: fmt.Sprintf("%s not in the active LSM order %s (/sys/kernel/security/lsm); the kernel takes the order from lsm= on its command line (needs CONFIG_BPF_LSM=y for bpf)",
			strings.Join(missing, " and "), strings.Join(m.LSM, ",")),
	}
	reboot := "reboot, then check: cat /sys/kernel/security/lsm   # should read " + strings.TrimPrefix(lsm, "lsm=")
	switch m.Boot {
	case "grubby":
		rem.Steps = []string{fmt.Sprintf("grubby --update-kernel=ALL --args=%q", lsm), reboot}
	case "kernelstub":
		rem.Steps = []string{fmt.Sprintf("kernelstub --add-options %q", lsm), reboot}
	case "systemd-boot":
		if m.BootEntry == "/etc/kernel/cmdline" {
			rem.Steps = []string{
				fmt.Sprintf("echo %q > /etc/kernel/cmdline", replaceArg(m.Cmdline, "lsm", lsm)),
				"kernel-install add \"$(uname -r)\" /lib/modules/\"$(uname -r)\"/vmlinuz   # or reinstall the kernel package",
				reboot}
		} else {
			rem.Steps = []string{
				fmt.Sprintf("in %s (and the other entries under its directory), set: options %s", m.BootEntry, replaceArg(m.BootOptions, "lsm", lsm)),
				reboot}
		}
	case "grub":
		file := m.GrubFile
		if file == "" {
			file = "/etc/default/grub"
		}
		update := "update-grub"
		if !m.like("debian") && !m.like("ubuntu") {
			update = "grub-mkconfig -o /boot/grub/grub.cfg"
		}
		rem.Steps = []string{
			fmt.Sprintf("in %s, set: GRUB_CMDLINE_LINUX_DEFAULT=%q", file, replaceArg(m.GrubCmdlineDefault, "lsm", lsm)),
			update,
			reboot}
	default:
		rem.Steps = []string{
			fmt.Sprintf("add %s to the kernel command line in your boot loader (current: %s)", lsm, m.Cmdline),
			reboot}
	}
	return rem
}

// writeRemedies prints the remedies below the layers of the text report.
func (r *Report) writeRemedies(w io.Writer) {
	if r.Machine == nil || len(r.Remedies) == 0 {
		return
	}
	name := r.Machine.PrettyName
	if name == "" {
		name = r.Machine.ID
	}
	fmt.Fprintf(w, "\nremedies for this machine (%s, boot: %s)\n", name, r.Machine.Boot)
	for _, rem := range r.Remedies {
		label := "note"
		if len(rem.Layers) > 0 {
			label = strings.Join(rem.Layers, ", ")
		}
		io.WriteString(w, rem.Format(label))
	}
}

// Format is rem as the text report prints it: "  label: why", then each
// step numbered on a line of its own.
func (rem Remedy) Format(label string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s: %s\n", label, rem.Why)
	for i, step := range rem.Steps {
		fmt.Fprintf(&b, "    %d. %s\n", i+1, step)
	}
	return b.String()
}

// RefusalRemedy is the remedy block a refused session's message ends
// with ("remedy:" and the steps, newline-terminated), or "" when the
// refusal is not for want of BPF-LSM or not one the machine can fix (see
// BPFLSMRemedy). run, attach and the daemon print it after "boundary not
// built: ...".
func RefusalRemedy(refusal error) string {
	var nofs *planner.AttachNeedsBPFLSM
	var req *planner.RequiresBPFLSM
	if !errors.As(refusal, &nofs) && !errors.As(refusal, &req) {
		return ""
	}
	if rem, ok := BPFLSMRemedy(refusal); ok {
		return rem.Format("remedy")
	}
	return ""
}

// BPFLSMRemedy is doctor's remedy for a session refused for want of
// BPF-LSM (a *planner.AttachNeedsBPFLSM, a *planner.RequiresBPFLSM, or the
// loader's reason itself):
// what makes BPF-LSM usable on this machine, from why the host could not
// build it (the loader's error, which the refusal does not show) and the
// machine's LSM list and boot configuration, read now. False when the
// reason is the host's own (its programs cannot enforce this policy:
// planner.NotLoaded says why) or a test marked the layer unavailable
// (planner.ErrForced) rather than the kernel's, since then nothing
// on the machine needs changing.
func BPFLSMRemedy(refusal error) (Remedy, bool) {
	why := refusal
	var nofs *planner.AttachNeedsBPFLSM
	var req *planner.RequiresBPFLSM
	switch {
	case errors.As(refusal, &nofs):
		why = nofs.Why
	case errors.As(refusal, &req):
		why = req.Why
	}
	var nl *planner.NotLoaded
	if why == nil || errors.As(why, &nl) || errors.Is(why, planner.ErrForced) {
		return Remedy{}, false
	}
	// The supervisor that was refused runs as root (standalone attach and
	// the daemon both do), so the remedy is never "run doctor as root".
	r := Report{Root: true}
	probeLSM(&r)
	r.BPFLSM = probeFrom(why)
	return r.bpfLSMRemedy(ReadMachine("/")), true
}

// bpfLSMRemedy is the lsm= remedy for m when that is the change, and
// otherwise the bpf-lsm layer's fix.
func (r *Report) bpfLSMRemedy(m Machine) Remedy {
	l := r.bpfLSMLayer()
	rr := *r
	rr.Layers = []Layer{l}
	for _, rem := range Remedies(m, &rr) {
		if slices.Contains(rem.Layers, LayerBPFLSM) {
			return rem
		}
	}
	return Remedy{Layers: []string{LayerBPFLSM}, Why: l.Fix}
}
