//go:build !linux

package agent

import "errors"

const noCreate = "\x00"

// Prepare creates nothing off Linux: there a profile grants the state
// entries that exist (the Seatbelt and Windows backends name paths, and
// the agent creates the rest itself where the policy lets it).
func (p *Profile) Prepare(home string, uid, gid int) ([]string, error) {
	return nil, nil
}

func rewriteOwned(path string, b []byte, uid int) error {
	return errors.New("agent: rolling back state files is supported on Linux only")
}
