// Package macos is the macOS backend: it turns a policy.Compiled into a
// Seatbelt (SBPL) profile for sandbox-exec, runs a command under it, and
// turns the kernel's sandbox denials from the unified log into audit
// records.
//
// Profile generation and log parsing are pure Go and build and are tested
// on every OS; only the runner touches macOS (darwin build tag). No path
// from the policy is ever spliced into profile text: paths travel as
// sandbox-exec -D parameters, and the only policy-derived text in a profile
// is component regexes built from a restricted, escaped alphabet.
package macos
