//go:build !linux

package agent

import "errors"

const noCreate = "\x00"

// Prepare is not supported off Linux: profiles there grant only existing
// state.
func (p *Profile) Prepare(home string, uid, gid int) ([]string, error) {
	return nil, errors.New("agent: creating state entries is supported on Linux only")
}

func rewriteOwned(path string, b []byte, uid int) error {
	return errors.New("agent: rolling back state files is supported on Linux only")
}
