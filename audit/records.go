package audit

import (
	"fmt"
	"time"

	"github.com/openoxide/oxsupervise/policy"
)

// SessionStart builds the session_start record of a session running
// compiled, launched by proc (may be nil).
func SessionStart(session string, compiled *policy.Compiled, proc *Process) (*Record, error) {
	return sessionRecord(KindSessionStart, session, compiled, proc, "")
}

// SessionStop builds the session_stop record; message says why it ended
// (e.g. "command exited with status 0").
func SessionStop(session string, compiled *policy.Compiled, message string) (*Record, error) {
	return sessionRecord(KindSessionStop, session, compiled, nil, message)
}

func sessionRecord(kind Kind, session string, compiled *policy.Compiled, proc *Process, message string) (*Record, error) {
	if compiled == nil {
		return nil, fmt.Errorf("%s record for session %s: no compiled policy", kind, session)
	}
	digest, err := compiled.Digest()
	if err != nil {
		return nil, fmt.Errorf("%s record for session %s: policy digest: %w", kind, session, err)
	}
	return &Record{
		Timestamp: time.Now(),
		Message:   message,
		Process:   proc,
		Ox: Ox{Kind: kind, Session: session, Layer: LayerSupervisor,
			Mode: string(compiled.Mode), PolicyDigest: digest},
	}, nil
}
