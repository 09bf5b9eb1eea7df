//go:build linux

package session

import (
	"fmt"
	"os"
	"strings"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// requireBPFLSMError explains a refused run under sandbox.require =
// ["bpf-lsm"] in words a user acts on: the kernel's LSM list and the
// GRUB line that adds bpf to it.
func requireBPFLSMError(r policy.Requirement, unavailable map[string]bool) error {
	why := "marked unavailable by " + ForceUnavailableEnv
	if !unavailable[LayerBPFLSM] {
		if err := loader.ProbeBPFLSM(); err != nil {
			why = err.Error()
		} else {
			why = "usable, but this supervisor did not load it"
		}
	}
	lsm := "lockdown,capability,landlock,yama,apparmor"
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		lsm = strings.TrimSpace(string(b))
	}
	if !strings.Contains(","+lsm+",", ",bpf,") {
		lsm += ",bpf"
	}
	return fmt.Errorf("the policy requires BPF-LSM (sandbox.require, %s), which refuses protected names when they are created; "+
		"this machine has none (%s). Remedy on Ubuntu and Debian: add lsm=%s to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub and reboot; `oxsupervise doctor` checks the result",
		r.Source, why, lsm)
}
