package vmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Job is one test binary to run in the guest.
type Job struct {
	Name    string        // shown in the summary, e.g. the import path
	Binary  string        // absolute host path of the test binary
	Dir     string        // working directory (the package directory, as `go test` does)
	Args    []string      // e.g. -test.v, -test.run
	Env     []string      // extra KEY=VALUE on top of the guest's base environment
	Timeout time.Duration // the guest kills the job after this long
	// ExpectFail marks the runner's self-check: the job must exit non-zero,
	// proving a failing guest test fails the run.
	ExpectFail bool
}

// spec is what the host hands the guest program, as a JSON file.
type spec struct {
	Nonce string
	Jobs  []Job
}

// markerPrefix starts every line the guest program writes for the host.
// The nonce after it keeps test output from forging results.
const markerPrefix = "@@oxs-vmtest:"

func marker(nonce, event string, args ...any) string {
	line := markerPrefix + nonce + " " + event
	for _, a := range args {
		line += " " + fmt.Sprint(a)
	}
	return line
}

func writeSpec(path string, s spec) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readSpec(path string) (spec, error) {
	var s spec
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("parse %s: %w", path, err)
	}
	return s, nil
}
