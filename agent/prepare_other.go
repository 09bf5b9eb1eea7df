//go:build !unix

package agent

import "errors"

const noCreate = "\x00"

// Prepare is not supported off Unix: profiles there grant only existing
// state.
func (p *Profile) Prepare(home string, uid, gid int) ([]string, error) {
	return nil, errors.New("agent: creating state entries is supported on Unix only")
}
