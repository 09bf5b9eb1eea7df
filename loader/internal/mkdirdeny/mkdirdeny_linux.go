//go:build linux

package mkdirdeny

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

// Denier is the smallest complete BPF-LSM policy: while attached, it
// refuses mkdir(2) with EPERM for every process in the cgroups added with
// DenyCgroup and for nobody else.
type Denier struct {
	objs mkdirdenyObjects
	link link.Link
}

// Load loads the program and attaches it to the path_mkdir LSM hook. Until
// DenyCgroup is called it allows everything.
func Load() (*Denier, error) {
	memlock.Raise()
	var d Denier
	if err := loadMkdirdenyObjects(&d.objs, nil); err != nil {
		return nil, fmt.Errorf("load mkdir deny program: %w", err)
	}
	l, err := link.AttachLSM(link.LSMOptions{Program: d.objs.DenyMkdir})
	if err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("attach mkdir deny program to path_mkdir: %w", err)
	}
	d.link = l
	return &d, nil
}

// DenyCgroup makes mkdir fail with EPERM for processes in the cgroup v2
// group with this id (the inode number of its directory).
func (d *Denier) DenyCgroup(cgroupID uint64) error {
	if err := d.objs.DenyMkdirCgroups.Update(cgroupID, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("add cgroup %d to deny_mkdir_cgroups: %w", cgroupID, err)
	}
	return nil
}

// Close detaches the program; mkdir is allowed again everywhere.
func (d *Denier) Close() error {
	return errors.Join(d.link.Close(), d.objs.Close())
}
