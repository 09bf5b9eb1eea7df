package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// exporterPackages are what only the daemon program may link: its
// exporters and the Prometheus, OpenTelemetry and gRPC stacks under them,
// whose package initialization alone costs every start milliseconds.
var exporterPackages = regexp.MustCompile(`prometheus|opentelemetry|grpc|/oxsupervise/(metrics|auditexport|daemon/exporters)$`)

// The oxsupervise binary, which every client request and standalone
// session starts, links none of the daemon's exporters; the daemon program
// does (so the pattern matches what it must).
func TestCLILinksNoExporters(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no go command to list the packages linked: %v", err)
	}
	for _, tc := range []struct {
		pkg         string
		wantLinking bool
	}{
		{".", false},
		{"../oxsupervised", true},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			out, err := exec.Command(gobin, "list", "-deps", tc.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", tc.pkg, err)
			}
			var linked []string
			for _, p := range strings.Fields(string(out)) {
				if exporterPackages.MatchString(p) {
					linked = append(linked, p)
				}
			}
			switch {
			case tc.wantLinking && len(linked) == 0:
				t.Fatalf("%s links no exporter package: the pattern %s no longer finds them", tc.pkg, exporterPackages)
			case !tc.wantLinking && len(linked) > 0:
				t.Fatalf("%s links %d exporter packages, among them %s", tc.pkg, len(linked), strings.Join(linked[:min(len(linked), 5)], ", "))
			}
		})
	}
}
