//go:build linux

package kernelaudit_test

import (
	"context"
	"log"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
)

// A supervisor feeds Landlock refusals into the session audit log.
func Example() {
	sink, err := audit.OpenFileSink(audit.DefaultPath, audit.SinkOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()
	launched := map[int]string{} // pids the supervisor started, per session
	r, err := kernelaudit.Open(kernelaudit.Options{
		SessionOfPID: func(pid int) (string, bool) { s, ok := launched[pid]; return s, ok },
	})
	if err != nil {
		log.Fatal(err) // wraps kernelaudit.ErrUnavailable when audit cannot be read
	}
	defer r.Close()
	err = r.Run(context.TODO(), func(rec audit.Record) {
		if err := sink.Write(&rec); err != nil {
			log.Print(err)
		}
	})
	if err != nil {
		log.Print(err)
	}
}
