package main

import (
	"os/exec"
	"regexp"
	"slices"
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

// userLookupImporters are the only packages linked into this binary that
// may import os/user: internal/account, which asks NSS through getent
// what os/user without cgo (this binary is static, the Makefile's STATIC)
// cannot; package daemon, whose lookups run only in the daemon program
// (cgo); and godbus (linked through containerd/cgroups), whose
// user.Current is for D-Bus authentication, a bus this program never
// opens (package cgroup drives cgroupfs). Anywhere else a lookup would
// miss LDAP, SSSD and systemd users in the static build.
var userLookupImporters = map[string]bool{
	"github.com/openoxide/oxsupervise/internal/account": true,
	"github.com/openoxide/oxsupervise/daemon":           true,
	"github.com/godbus/dbus/v5":                         true,
}

func TestCLILooksUpUsersThroughAccount(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no go command to list the packages linked: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	importers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !slices.Contains(f[1:], "os/user") {
			continue
		}
		importers++
		if !userLookupImporters[f[0]] {
			t.Errorf("%s imports os/user: look users up through internal/account", f[0])
		}
	}
	if importers == 0 {
		t.Fatal("no package linked imports os/user: the listing no longer shows imports")
	}
}
